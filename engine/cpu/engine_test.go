package cpu

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// vivianPrompt is a streaming golden prompt on the 0.6B-shaped checkpoint.
func vivianPrompt(t *testing.T) (*LM, backend.Prompt) {
	t.Helper()
	golden.Require(t)
	c := golden.OpenCase(t, "cv_zh_vivian_stream")
	lm := goldenLM(t, c.Checkpoint)
	return lm, backend.Prompt{Prefill: rowsOf(c.F32("prefill_embeds"), lm.spec.Hidden),
		Trailing: rowsOf(c.F32("trailing_text_hidden"), lm.spec.Hidden), TTSPad: c.F32("tts_pad_embed")}
}

func officialSampling() backend.GenerateOptions {
	return backend.GenerateOptions{
		Talker:    sample.Params{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 1, RepetitionPenalty: 1.05},
		Predictor: sample.Params{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 1, RepetitionPenalty: 1},
	}
}

func TestSeedReproducible(t *testing.T) {
	lm, p := vivianPrompt(t)
	opt := officialSampling()
	opt.ExactFrames = 12
	opt.Seed = 42
	a := runLM(t, lm, p, opt)
	b := runLM(t, lm, p, opt)
	opt.Seed = 43
	c := runLM(t, lm, p, opt)
	if len(a.codes) != 12 || len(b.codes) != 12 || len(c.codes) != 12 {
		t.Fatalf("frames %d %d %d, want 12", len(a.codes), len(b.codes), len(c.codes))
	}
	differ := 0
	for i := range a.codes {
		if a.codes[i] != b.codes[i] {
			t.Errorf("same seed, frame %d: %v vs %v", i, a.codes[i], b.codes[i])
		}
		for g := range a.codes[i] {
			if a.codes[i][g] != c.codes[i][g] {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Error("seeds 42 and 43 gave identical codes")
	}
	greedy := runLM(t, lm, p, greedyOptions(12))
	same := 0
	for i := range a.codes {
		for g := range a.codes[i] {
			if a.codes[i][g] == greedy.codes[i][g] {
				same++
			}
		}
	}
	if same == 12*backend.NumGroups {
		t.Error("sampling gave exactly the greedy codes: sampling is not on")
	}
	t.Logf("seed 42 vs 43: %d of %d codes differ; sampled vs greedy: %d equal", differ, 12*16, same)
}

// TestCancelThenReuse cancels mid-utterance and checks that the next Generate
// on the same LM matches a fresh LM's run.
func TestCancelThenReuse(t *testing.T) {
	lm, p := vivianPrompt(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan backend.Frame) // unbuffered: the loop waits for us
	type result struct {
		res backend.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := lm.Generate(ctx, p, greedyOptions(16), out)
		done <- result{res, err}
	}()
	for i := 0; i < 3; i++ {
		<-out
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Generate did not return after cancel")
	}
	if !errors.Is(r.err, context.Canceled) || r.res.Stop != backend.StopCancelled {
		t.Fatalf("after cancel: err %v, stop %s; want context.Canceled, cancelled", r.err, r.res.Stop)
	}
	if r.res.Frames < 3 || r.res.Frames > 4 {
		t.Errorf("cancelled run reports %d frames, want 3 or 4", r.res.Frames)
	}
	again := runLM(t, lm, p, greedyOptions(16))

	m, err := model.Load(golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fresh, err := New(m, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := runLM(t, fresh, p, greedyOptions(16))
	checkCodes(t, "after cancel vs fresh LM", again.codes, want.codes)
	if d := golden.MaxAbsDiff(flat(again.talkerLogits), flat(want.talkerLogits)); d > 1e-5 {
		t.Errorf("logits after cancel differ from a fresh LM by %g", d)
	}

	// A context cancelled before the call stops during the prefill.
	dead, stop := context.WithCancel(context.Background())
	stop()
	if _, err := lm.Generate(dead, p, greedyOptions(4), make(chan backend.Frame, 4)); !errors.Is(err, context.Canceled) {
		t.Errorf("pre-cancelled context: err %v, want context.Canceled", err)
	}
}

// TestStopping covers the stop reasons: EOS ends without emitting its frame,
// the MaxFrames cap stops and logs, ExactFrames ignores EOS.
func TestStopping(t *testing.T) {
	lm, p := vivianPrompt(t)
	greedy := runLM(t, lm, p, greedyOptions(4))

	// Teacher-force EOS as group 0 of frame 2.
	opt := greedyOptions(0)
	opt.TeacherCodes = append([]backend.Codes(nil), greedy.codes[:3]...)
	opt.TeacherCodes[2][0] = int32(lm.spec.EOS)
	run := runLM(t, lm, p, opt)
	if run.res.Stop != backend.StopEOS || len(run.codes) != 2 {
		t.Errorf("EOS at frame 2: stop %s, %d frames; want eos, 2", run.res.Stop, len(run.codes))
	}

	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	opt = greedyOptions(0)
	opt.MaxFrames = 3
	run = runLM(t, lm, p, opt)
	slog.SetDefault(prev)
	if run.res.Stop != backend.StopCap || len(run.codes) != 3 {
		t.Errorf("MaxFrames 3: stop %s, %d frames; want cap, 3", run.res.Stop, len(run.codes))
	}
	if !strings.Contains(logs.String(), "frame cap") || !strings.Contains(logs.String(), "cap=3") {
		t.Errorf("cap not logged; log was %q", logs.String())
	}

	// With ExactFrames, a teacher-forced EOS does not stop the utterance.
	opt = greedyOptions(3)
	opt.TeacherCodes = []backend.Codes{greedy.codes[0], greedy.codes[1]}
	opt.TeacherCodes[1][0] = int32(lm.spec.EOS)
	run = runLM(t, lm, p, opt)
	if run.res.Stop != backend.StopExact || len(run.codes) != 3 {
		t.Errorf("ExactFrames 3 with EOS: stop %s, %d frames; want exact, 3", run.res.Stop, len(run.codes))
	}
}

func TestBadInputIsAnError(t *testing.T) {
	lm, p := vivianPrompt(t)
	H := lm.spec.Hidden
	nan := make([]float32, H)
	nan[3] = float32(math.NaN())
	badTeacher := backend.Codes{}
	badTeacher[5] = 5000
	cases := []struct {
		name string
		p    backend.Prompt
		opt  backend.GenerateOptions
		want error
	}{
		{"empty prefill", backend.Prompt{TTSPad: p.TTSPad}, greedyOptions(2), ErrBadPrompt},
		{"narrow prefill row", backend.Prompt{Prefill: [][]float32{make([]float32, H-1)}, TTSPad: p.TTSPad}, greedyOptions(2), ErrBadPrompt},
		{"NaN prefill", backend.Prompt{Prefill: [][]float32{nan}, TTSPad: p.TTSPad}, greedyOptions(2), ErrBadPrompt},
		{"wide trailing row", backend.Prompt{Prefill: p.Prefill, Trailing: [][]float32{make([]float32, H+1)}, TTSPad: p.TTSPad}, greedyOptions(2), ErrBadPrompt},
		{"no tts_pad", backend.Prompt{Prefill: p.Prefill}, greedyOptions(2), ErrBadPrompt},
		{"zero temperature", p, backend.GenerateOptions{Talker: sample.Params{DoSample: true, TopP: 1}, Predictor: sample.Greedy()}, ErrBadOptions},
		{"negative frames", p, backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), MaxFrames: -1}, ErrBadOptions},
		{"teacher code out of range", p, backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), TeacherCodes: []backend.Codes{badTeacher}}, ErrBadOptions},
	}
	for _, c := range cases {
		_, err := lm.Generate(context.Background(), c.p, c.opt, make(chan backend.Frame, 16))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := lm.Generate(context.Background(), p, greedyOptions(1), nil); err == nil {
		t.Error("nil channel accepted")
	}
}

// TestPureGoEngineMatchesGolden runs the engine on the pure-Go kernels (the
// -tags noblas default; engine/linalg checks the products themselves) against
// a golden case per layout.
func TestPureGoEngineMatchesGolden(t *testing.T) {
	golden.Require(t)
	for _, name := range []string{"cv_en_ryan_nonstream", "cv1b7_en_ryan_instruct_stream"} {
		c := golden.OpenCase(t, name)
		mdl, err := model.Load(c.Checkpoint, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lm, err := New(mdl, Options{Threads: 2, pureGo: true})
		mdl.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := backend.Prompt{Prefill: rowsOf(c.F32("prefill_embeds"), lm.spec.Hidden),
			Trailing: rowsOf(c.F32("trailing_text_hidden"), lm.spec.Hidden), TTSPad: c.F32("tts_pad_embed")}
		want := codesOf(c.I64("codes"))
		run := runLM(t, lm, p, greedyOptions(len(want)))
		t.Logf("pure Go %s", compareRun(t, c, run, "", 1e-4))
		checkCodes(t, name+" (pure Go)", run.codes, want)
	}
}
