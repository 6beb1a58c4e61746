package model

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"talkbox/engine/cores"
	"talkbox/engine/safetensors"
)

// ErrNonFinite is wrapped when a weight holds NaN or Inf: such a checkpoint
// would otherwise load and fail later, mid-utterance, as "no finite logit".
var ErrNonFinite = errors.New("weights with NaN or Inf")

// CheckFinite scans the tensors in want (already shape-checked) for NaN and
// Inf, spread over the CPUs, and names the tensors that hold any.
func CheckFinite(f *safetensors.File, want []TensorSpec) error {
	var (
		mu  sync.Mutex
		bad []string
		wg  sync.WaitGroup
	)
	next := make(chan string, len(want))
	for _, w := range want {
		next <- w.Name
	}
	close(next)
	for i := 0; i < cores.Limit(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range next {
				at, err := f.FirstNonFinite(name)
				if err != nil || at < 0 {
					continue
				}
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s (element %d)", name, at))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%w: %s: %d tensor(s): %s", ErrNonFinite, f.Path, len(bad), FirstFew(bad, ", "))
}
