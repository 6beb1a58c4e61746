package cuda

import (
	"context"
	"errors"
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
// the others start with it, later, or are cancelled under it: on the
// persistent path and on the launch path.
func TestBatchStreamsIndependent(t *testing.T) {
	requireGPU(t)
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	b := batcherFor(t, dir)
	defer setRunRows(t, b, runRowsDefault)
	for _, path := range batchPaths(b) {
		t.Run(path.name, func(t *testing.T) {
			setRunRows(t, b, path.rows)
			streamsIndependent(t, b)
		})
	}
}

// runRowsDefault is the native library's TB_BATCH_RUN_ROWS.
const runRowsDefault = 16

type batchPath struct {
	name string
	rows int // tb_batch_set_run_rows
}

// batchPaths run every step of b on the persistent path, then on the launch path.
func batchPaths(b *Batcher) []batchPath {
	return []batchPath{{"persistent", b.Capacity()}, {"launches", 0}}
}

func setRunRows(t *testing.T, b *Batcher, rows int) {
	t.Helper()
	if err := b.setRunRows(rows); err != nil {
		t.Fatal(err)
	}
}

// The two paths compute the same values in the same order: one stream's
// codes and every logit it sees, sampled and teacher-forced, agree bit for
// bit.
func TestBatchPathsAgree(t *testing.T) {
	requireGPU(t)
	b := batcherFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	defer setRunRows(t, b, runRowsDefault)
	j := batchJobs(t)[1] // sampled
	type seen struct {
		codes  []backend.Codes
		logits []backend.LogitsEvent
	}
	var got []seen
	for _, path := range batchPaths(b) {
		setRunRows(t, b, path.rows)
		var s seen
		opt := j.opt
		opt.ExactFrames = 6
		opt.OnLogits = func(ev backend.LogitsEvent) {
			ev.Logits = append([]float32(nil), ev.Logits...)
			ev.Hidden = append([]float32(nil), ev.Hidden...)
			s.logits = append(s.logits, ev)
		}
		codes, _, err := run(t, b.LM(), context.Background(), j.p, opt)
		if err != nil {
			t.Fatalf("%s: %v", path.name, err)
		}
		s.codes = codes
		got = append(got, s)
	}
	a, l := got[0], got[1]
	if len(a.codes) != 6 || len(l.codes) != 6 || len(a.logits) == 0 || len(a.logits) != len(l.logits) {
		t.Fatalf("persistent: %d frames, %d logit rows; launches: %d, %d", len(a.codes), len(a.logits), len(l.codes), len(l.logits))
	}
	for f := range a.codes {
		if a.codes[f] != l.codes[f] {
			t.Errorf("frame %d: %v persistent, %v launches", f, a.codes[f], l.codes[f])
		}
	}
	for i, ev := range a.logits {
		o := l.logits[i]
		if ev.Frame != o.Frame || ev.Group != o.Group || len(ev.Logits) != len(o.Logits) {
			t.Fatalf("logit row %d: frame %d group %d persistent, frame %d group %d launches", i, ev.Frame, ev.Group, o.Frame, o.Group)
		}
		for k := range ev.Logits {
			if math.Float32bits(ev.Logits[k]) != math.Float32bits(o.Logits[k]) {
				t.Errorf("frame %d group %d logit %d: %g persistent, %g launches", ev.Frame, ev.Group, k, ev.Logits[k], o.Logits[k])
				break
			}
		}
	}
}

func streamsIndependent(t *testing.T, b *Batcher) {
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
