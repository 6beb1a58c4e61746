package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/backendtest"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

var (
	batchCacheMu sync.Mutex
	batchCache   = map[string]*Batcher{}
)

// batcherFor is a batch (once per test binary) on the shared LM of a golden checkpoint.
func batcherFor(t *testing.T, dir string) *Batcher {
	t.Helper()
	lm := engineFor(t, dir)
	batchCacheMu.Lock()
	defer batchCacheMu.Unlock()
	if b, ok := batchCache[dir]; ok {
		return b
	}
	b, err := NewBatcher(lm, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	batchCache[dir] = b
	return b
}

// ownedBatch is a batched LM that owns its Batcher and engine (the suite's Fresh LMs).
type ownedBatch struct {
	backend.LM
	b  *Batcher
	lm *LM
}

func (o ownedBatch) Spec() backend.Spec { return o.b.Spec() }

func (o ownedBatch) Close() error {
	o.b.Close()
	return o.lm.Close()
}

// The batched path runs the whole behaviour suite: golden codes, teacher-forced
// logits, seeds, stopping, bad input, cancel then reuse, two engines.
func TestBatchSuite(t *testing.T) {
	requireGPU(t)
	s := gpuSuite(func(t *testing.T, dir string) backend.LM { return batcherFor(t, dir).LM() })
	s.Fresh = func(t *testing.T, m *model.Model) backend.LM {
		lm, err := NewLM(m, Options{MaxPositions: 128})
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBatcher(lm, 2, 0)
		if err != nil {
			lm.Close()
			t.Fatal(err)
		}
		return ownedBatch{b.LM(), b, lm}
	}
	s.Run(t)
}

type batchJob struct {
	name  string
	p     backend.Prompt
	opt   backend.GenerateOptions
	delay time.Duration
}

// batchJobs are the golden CustomVoice prompts, greedy and sampled, of
// different lengths.
func batchJobs(t *testing.T) []batchJob {
	var jobs []batchJob
	for i, name := range []string{"cv_en_ryan_nonstream", "cv_zh_vivian_stream", "cv_auto_eric_dialect_nonstream"} {
		c := golden.OpenCase(t, name)
		p := casePrompt(c)
		g := sample.Greedy()
		jobs = append(jobs, batchJob{name + "/greedy", p, backend.GenerateOptions{Talker: g, Predictor: g, ExactFrames: 12 + 4*i}, 0})
		s := backendtest.Sampled(20-3*i, uint64(7+i))
		jobs = append(jobs, batchJob{name + "/sampled", p, s, 0})
	}
	return jobs
}

// Each stream of a batch gives the codes it gives alone in the batch, whether
// the others start with it, later, or are cancelled under it.
func TestBatchStreamsIndependent(t *testing.T) {
	requireGPU(t)
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	b := batcherFor(t, dir)
	jobs := batchJobs(t)
	alone := make([][]backend.Codes, len(jobs))
	for i, j := range jobs {
		codes, _, err := run(t, b.LM(), context.Background(), j.p, j.opt)
		if err != nil {
			t.Fatalf("%s alone: %v", j.name, err)
		}
		alone[i] = codes
	}
	// The same jobs at once, started at different times, with a long
	// stream cancelled after a few frames in their midst.
	got := make([][]backend.Codes, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Three at a time: those admitted together prefill together.
			time.Sleep(time.Duration(i/3) * 2 * time.Millisecond)
			got[i], _, errs[i] = run(t, b.LM(), context.Background(), j.p, j.opt)
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		g := sample.Greedy()
		out := make(chan backend.Frame, 8)
		go func() {
			n := 0
			for range out {
				if n++; n == 3 {
					cancel()
				}
			}
		}()
		res, err := b.LM().Generate(ctx, jobs[0].p, backend.GenerateOptions{Talker: g, Predictor: g, ExactFrames: 100}, out)
		close(out)
		if res.Stop != backend.StopCancelled {
			err = errors.Join(err, errors.New("stop "+string(res.Stop)))
		}
		cancelled <- err
	}()
	wg.Wait()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled stream: %v, want context.Canceled", err)
	}
	for i, j := range jobs {
		if errs[i] != nil {
			t.Errorf("%s in a batch: %v", j.name, errs[i])
			continue
		}
		if len(got[i]) != len(alone[i]) {
			t.Errorf("%s: %d frames in a batch, %d alone", j.name, len(got[i]), len(alone[i]))
			continue
		}
		for f := range got[i] {
			if got[i][f] != alone[i][f] {
				t.Errorf("%s frame %d: %v in a batch, %v alone", j.name, f, got[i][f], alone[i][f])
				break
			}
		}
	}
}

// streamLogits records a stream's raw logits by frame and group.
type streamLogits struct {
	mu   sync.Mutex
	rows map[[2]int][]float32
}

func (s *streamLogits) record(ev backend.LogitsEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[[2]int][]float32{}
	}
	s.rows[[2]int{ev.Frame, ev.Group}] = append([]float32(nil), ev.Logits...)
}

// batchTol bounds a stream's logits in a batch against its logits alone, as a
// fraction of the largest logit's magnitude (at least 1). The products sum a
// row the same way at any row count, so they agree bit for bit; one sum
// rounded the other way grows to ~1e-3 through these random-weight stacks
// (7e-4 to 1e-3 measured while the products' K split depended on the row
// count).
const batchTol = 5e-3

// compare returns how far s's logits of (frame f, group grp) are from
// alone's, over the largest logit alone (at least 1), and alone's logits.
func (s *streamLogits) compare(alone *streamLogits, f, grp int) (rel float64, want []float32, err error) {
	want, got := alone.rows[[2]int{f, grp}], s.rows[[2]int{f, grp}]
	if len(want) == 0 || len(got) != len(want) {
		return 0, nil, fmt.Errorf("frame %d group %d: %d logits in the batch, %d alone", f, grp, len(got), len(want))
	}
	scale, diff := 1.0, 0.0
	for k := range want {
		scale = max(scale, math.Abs(float64(want[k])))
		diff = max(diff, math.Abs(float64(got[k]-want[k])))
	}
	return diff / scale, want, nil
}

// top2Gap is the distance between the two largest logits.
func top2Gap(l []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range l {
		if x := float64(v); x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}

// Forty streams at once run the step's products at 33-64 rows, then at 17-32
// and 1-16 as they finish at different frames; each gives the logits it gives
// alone (one row). The products sum a row the same way at any row count, so
// the logits should agree bit for bit; the tolerance leaves room only for a
// row's sum of squares rounding the other way, and a greedy code may then
// differ only at a near tie.
func TestBatchManyStreamsMatchAlone(t *testing.T) {
	requireGPU(t)
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	lm := engineFor(t, dir)
	const n = 40
	many, err := NewBatcher(lm, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer many.Close()
	base := batchJobs(t)
	g := sample.Greedy()
	type job struct {
		p      backend.Prompt
		frames int
	}
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{base[i%len(base)].p, 3 + i%9}
	}
	gen := func(lm backend.LM, j job, rec *streamLogits) ([]backend.Codes, error) {
		opt := backend.GenerateOptions{Talker: g, Predictor: g, ExactFrames: j.frames, OnLogits: rec.record}
		codes, _, err := run(t, lm, context.Background(), j.p, opt)
		return codes, err
	}
	alone := batcherFor(t, dir).LM()
	aloneCodes := make([][]backend.Codes, n)
	aloneLogits := make([]streamLogits, n)
	for i, j := range jobs {
		if aloneCodes[i], err = gen(alone, j, &aloneLogits[i]); err != nil {
			t.Fatalf("stream %d alone: %v", i, err)
		}
	}
	codes := make([][]backend.Codes, n)
	logits := make([]streamLogits, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], errs[i] = gen(many.LM(), j, &logits[i])
		}()
	}
	wg.Wait()
	diverged := 0
	for i := range jobs {
		if errs[i] != nil {
			t.Errorf("stream %d in the batch: %v", i, errs[i])
			continue
		}
		if len(codes[i]) != len(aloneCodes[i]) {
			t.Errorf("stream %d: %d frames in the batch, %d alone", i, len(codes[i]), len(aloneCodes[i]))
			continue
		}
	frames:
		for f := range codes[i] {
			for grp := range backend.NumGroups {
				rel, want, err := logits[i].compare(&aloneLogits[i], f, grp)
				if err != nil || rel > batchTol {
					t.Errorf("stream %d frame %d group %d: logits %.3g from alone (of the largest) %v", i, f, grp, rel, err)
					break frames
				}
				if codes[i][f][grp] != aloneCodes[i][f][grp] {
					// The streams part here; what follows is not comparable.
					scale := 1.0
					for _, v := range want {
						scale = max(scale, math.Abs(float64(v)))
					}
					if gap := top2Gap(want); gap > 2*rel*scale {
						t.Errorf("stream %d frame %d group %d: code %d in the batch, %d alone, with a top-2 gap of %.3g against a logit difference of %.3g",
							i, f, grp, codes[i][f][grp], aloneCodes[i][f][grp], gap, rel*scale)
					}
					diverged++
					break frames
				}
			}
		}
	}
	t.Logf("%d streams, %d parted from alone at a near tie", n, diverged)
	if diverged > n/4 {
		t.Errorf("%d of %d streams parted at near ties: too many to be rounding", diverged, n)
	}
}

// A full batch refuses a new stream with ErrBatchFull and admits it once a
// slot frees.
func TestBatchFullRefuses(t *testing.T) {
	requireGPU(t)
	lm := engineFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	b, err := NewBatcher(lm, 1, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Capacity() != 1 {
		t.Fatalf("capacity %d, want 1", b.Capacity())
	}
	j := batchJobs(t)[0]
	// The first stream holds its slot while its logits callback waits.
	admitted, release := make(chan struct{}), make(chan struct{})
	opt := j.opt
	var once sync.Once
	opt.OnLogits = func(backend.LogitsEvent) {
		once.Do(func() {
			close(admitted)
			<-release
		})
	}
	first := make(chan error, 1)
	go func() {
		_, _, err := run(t, b.LM(), context.Background(), j.p, opt)
		first <- err
	}()
	<-admitted
	if _, _, err := run(t, b.LM(), context.Background(), j.p, j.opt); !errors.Is(err, ErrBatchFull) {
		t.Errorf("second stream on a full batch: %v, want ErrBatchFull", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, b.LM(), context.Background(), j.p, j.opt); err != nil {
		t.Fatalf("after the slot freed: %v", err)
	}
}
