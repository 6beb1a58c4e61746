package cuda

import (
	"context"
	"errors"
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
