// Package backendtest is the behaviour suite every backend runs: the
// backend.LM contract (golden codes, teacher-forced logits, stop reasons,
// bad input, cancel then reuse, two engines) and the backend.Codec contract
// (golden waveforms, streams of different lengths, bad codes, reset, several
// streams). Each backend's tests call it with its own tolerances, so the
// backends are held to one list of behaviours written once.
package backendtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// LMSuite is one LM backend under test.
type LMSuite struct {
	// Shared returns the backend's LM for a golden checkpoint directory; it
	// may hand out the same LM to several tests (the suite leaves it open).
	Shared func(t *testing.T, dir string) backend.LM
	// Fresh opens a new LM on m; the suite closes it.
	Fresh func(t *testing.T, m *model.Model) backend.LM
	// Checkpoints are the golden checkpoints whose cases the golden tests run.
	Checkpoints []string
	// LogitsTol is the teacher-forced logits' tolerance relative to the
	// golden activations (golden.ActivationTol) on float32 cases; BF16Tol on
	// the official bf16 run.
	LogitsTol, BF16Tol float64
	// CheckHidden also compares the talker's final-normed hidden state.
	CheckHidden bool
	// ExplainedMargin > 0 lets a free-running greedy code differ from the
	// golden one where the official top-2 logit gap is at most this (a bf16
	// engine cannot resolve smaller gaps); the run is compared up to that
	// first divergence. 0: every code must equal the golden one.
	ExplainedMargin float64
	// MinCases is how many single-utterance golden cases must run.
	MinCases int
}

// Prompt is a golden case's prompt rows. The __bf16 cases hold no text rows:
// they come from the fp32 case of the same utterance (their name without the
// suffix).
func Prompt(t *testing.T, c *golden.Case) backend.Prompt {
	t.Helper()
	text := c
	if !c.Has("trailing_text_hidden") && strings.HasSuffix(c.Name, "__bf16") {
		text = golden.OpenCase(t, strings.TrimSuffix(c.Name, "__bf16"))
	}
	w := c.Shape("prefill_embeds")[len(c.Shape("prefill_embeds"))-1]
	return backend.Prompt{Prefill: Rows(c.F32("prefill_embeds"), w), Trailing: Rows(text.F32("trailing_text_hidden"), w),
		TTSPad: text.F32("tts_pad_embed")}
}

// Rows splits a flat [n, w] tensor into rows.
func Rows(v []float32, w int) [][]float32 {
	var out [][]float32
	for i := 0; i+w <= len(v); i += w {
		out = append(out, v[i:i+w])
	}
	return out
}

// Codes reads a golden [T, 16] code tensor.
func Codes(v []int64) []backend.Codes {
	out := make([]backend.Codes, len(v)/backend.NumGroups)
	for i := range out {
		for g := 0; g < backend.NumGroups; g++ {
			out[i][g] = int32(v[i*backend.NumGroups+g])
		}
	}
	return out
}

// Greedy generates exactly frames frames greedily.
func Greedy(frames int) backend.GenerateOptions {
	return backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: frames}
}

// Sampled generates exactly frames frames with the official sampling defaults.
func Sampled(frames int, seed uint64) backend.GenerateOptions {
	o := backend.GenerateOptions{ExactFrames: frames, Seed: seed}
	o.Talker, o.Predictor = backend.Sampling(model.DefaultGenerationConfig())
	return o
}

// Run is what one Generate call sent and reported.
type Run struct {
	Codes        []backend.Codes
	TalkerLogits [][]float32         // per frame (with OnLogits)
	TalkerHidden [][]float32         // per frame, when the backend reports it
	CPLogits     map[int][][]float32 // frame -> the 15 predictor rows
	Result       backend.Result
	Err          error
}

// Generate runs lm once, collecting frames (checking their indices) and,
// when logits is set, the logits events.
func Generate(t *testing.T, lm backend.LM, ctx context.Context, p backend.Prompt, opt backend.GenerateOptions, logits bool) Run {
	t.Helper()
	run := Run{CPLogits: map[int][][]float32{}}
	if logits {
		opt.OnLogits = func(ev backend.LogitsEvent) {
			if ev.Group == 0 {
				run.TalkerLogits = append(run.TalkerLogits, ev.Logits)
				if ev.Hidden != nil {
					run.TalkerHidden = append(run.TalkerHidden, ev.Hidden)
				}
			} else {
				run.CPLogits[ev.Frame] = append(run.CPLogits[ev.Frame], ev.Logits)
			}
		}
	}
	out := make(chan backend.Frame, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run.Result, run.Err = lm.Generate(ctx, p, opt, out)
		close(out)
	}()
	for f := range out {
		if f.Index != len(run.Codes) {
			t.Errorf("frame index %d, want %d", f.Index, len(run.Codes))
		}
		run.Codes = append(run.Codes, f.Codes)
	}
	<-done
	return run
}

// MustGenerate is Generate failing the test on an error.
func MustGenerate(t *testing.T, lm backend.LM, p backend.Prompt, opt backend.GenerateOptions, logits bool) Run {
	t.Helper()
	r := Generate(t, lm, context.Background(), p, opt, logits)
	if r.Err != nil {
		t.Fatalf("Generate: %v", r.Err)
	}
	return r
}

// singleCases are the golden cases of one utterance with codes and talker
// logits, in the suite's checkpoints.
func (s LMSuite) singleCases(t *testing.T) []*golden.Case {
	var out []*golden.Case
	for _, name := range golden.CaseNames(t, s.Checkpoints...) {
		c := golden.OpenCase(t, name)
		if c.Has("talker_logits") && c.Has("codes") && len(c.Shape("prefill_embeds")) == 2 {
			out = append(out, c)
		}
	}
	return out
}

// SpecOf is the spec an LM under test runs with; both backends report it.
func SpecOf(t *testing.T, lm backend.LM) backend.Spec {
	t.Helper()
	l, ok := lm.(interface{ Spec() backend.Spec })
	if !ok {
		t.Fatalf("%T does not report its backend.Spec", lm)
	}
	return l.Spec()
}

// TestGoldenCodes generates every fp32 golden case greedily and compares the
// codes with the official ones (ExplainedMargin says which differences a
// backend may show).
func (s LMSuite) TestGoldenCodes(t *testing.T) {
	golden.Require(t)
	ran := 0
	for _, c := range s.singleCases(t) {
		if strings.HasSuffix(c.Name, "__bf16") {
			// An official bf16 run: its free-running codes diverge from
			// an fp32 engine by design.
			continue
		}
		ran++
		t.Run(c.Name, func(t *testing.T) {
			want := Codes(c.I64("codes"))
			r := MustGenerate(t, s.Shared(t, c.Checkpoint), Prompt(t, c), Greedy(len(want)), false)
			if len(r.Codes) != len(want) || r.Result.Stop != backend.StopExact || r.Result.Frames != len(want) {
				t.Fatalf("%d frames (%d reported, stop %s), want %d, exact", len(r.Codes), r.Result.Frames, r.Result.Stop, len(want))
			}
			for k := range want {
				for g := range want[k] {
					if r.Codes[k][g] == want[k][g] {
						continue
					}
					m := goldenMargin(t, c.Name, k, g)
					if m > s.ExplainedMargin {
						t.Errorf("frame %d group %d: code %d, golden %d (golden top-2 margin %.3g, explained up to %.3g)",
							k, g, r.Codes[k][g], want[k][g], m, s.ExplainedMargin)
					} else {
						t.Logf("first divergence at frame %d group %d (code %d vs %d): golden top-2 margin %.3g <= %.3g",
							k, g, r.Codes[k][g], want[k][g], m, s.ExplainedMargin)
					}
					return
				}
			}
			t.Logf("all %d frames equal the golden codes", len(want))
		})
	}
	if ran < s.MinCases {
		t.Errorf("only %d golden cases ran, want at least %d", ran, s.MinCases)
	}
}

// TestTeacherForcedLogits feeds every golden case's own codes back and
// compares the raw talker logits of each frame, the code predictor's logits
// of frame 0 (and the hidden state, CheckHidden) with the official ones, and
// the greedy decision the rules make from them with the golden codes.
func (s LMSuite) TestTeacherForcedLogits(t *testing.T) {
	golden.Require(t)
	for _, c := range s.singleCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			bf16 := strings.HasSuffix(c.Name, "__bf16")
			rel := s.LogitsTol
			if bf16 {
				rel = s.BF16Tol
			}
			want := Codes(c.I64("codes"))
			opt := Greedy(len(want))
			opt.TeacherCodes = want
			lm := s.Shared(t, c.Checkpoint)
			r := MustGenerate(t, lm, Prompt(t, c), opt, true)
			for k := range want {
				if r.Codes[k] != want[k] {
					t.Fatalf("frame %d: teacher-forced codes %v are not the teacher's %v", k, r.Codes[k], want[k])
				}
			}
			wantT := c.F32("talker_logits")
			V := len(wantT) / len(want)
			if len(r.TalkerLogits) != len(want) {
				t.Fatalf("%d talker steps reported, want %d", len(r.TalkerLogits), len(want))
			}
			tolT := golden.ActivationTol(wantT, rel)
			rules := SpecOf(t, lm).Rules
			worst, flips := 0.0, 0
			for k := range want {
				if len(r.TalkerLogits[k]) != V {
					t.Fatalf("frame %d: %d group-0 logits, want %d", k, len(r.TalkerLogits[k]), V)
				}
				worst = math.Max(worst, golden.AssertClose(t, fmt.Sprintf("talker logits frame %d", k), r.TalkerLogits[k], wantT[k*V:(k+1)*V], tolT))
				l := append([]float32(nil), r.TalkerLogits[k]...)
				rules.Apply(l, k, false)
				if g := argmax(l); g != int(want[k][0]) {
					flips++
					t.Logf("frame %d group 0: argmax %d, golden %d", k, g, want[k][0])
				}
			}
			summary := fmt.Sprintf("talker logits max|diff| %.3g (tol %.3g)", worst, tolT)
			if s.CheckHidden && c.Has("talker_last_hidden") {
				wantH := c.F32("talker_last_hidden")
				d := golden.AssertClose(t, "talker hidden", Flat(r.TalkerHidden), wantH, golden.ActivationTol(wantH, rel))
				summary += fmt.Sprintf(", hidden %.3g", d)
			}
			if c.Has("code_predictor_logits_frame0") {
				wantP := c.F32("code_predictor_logits_frame0")
				Vp := len(wantP) / (backend.NumGroups - 1)
				if len(r.CPLogits[0]) != backend.NumGroups-1 {
					t.Fatalf("%d predictor logit rows for frame 0, want %d", len(r.CPLogits[0]), backend.NumGroups-1)
				}
				tolP := golden.ActivationTol(wantP, rel)
				d := golden.AssertClose(t, "predictor logits frame 0", Flat(r.CPLogits[0]), wantP, tolP)
				for g, l := range r.CPLogits[0] {
					if len(l) != Vp {
						t.Fatalf("group %d: %d predictor logits, want %d", g+1, len(l), Vp)
					}
					if a := argmax(l); a != int(want[0][g+1]) {
						flips++
						t.Logf("frame 0 group %d: argmax %d, golden %d", g+1, a, want[0][g+1])
					}
				}
				summary += fmt.Sprintf(", predictor frame 0 %.3g (tol %.3g)", d, tolP)
			}
			t.Logf("%s, greedy flips %d", summary, flips)
			// The __bf16 case holds an official bf16 run: its codes are not an fp32 oracle.
			if flips > 0 && !bf16 {
				t.Errorf("%d teacher-forced greedy decisions differ from the golden codes", flips)
			}
		})
	}
}

// goldenMargin reads the official top-1/top-2 logit gap of (frame, group)
// from the manifest's checks; +Inf when it holds none.
func goldenMargin(t *testing.T, name string, frame, group int) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(golden.Require(t), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Cases map[string]struct {
			Checks struct {
				Talker    []float64   `json:"talker_group0_top2_margin"`
				Predictor [][]float64 `json:"code_predictor_top2_margin"`
			} `json:"checks"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	c := m.Cases[name].Checks
	if group == 0 && frame < len(c.Talker) {
		return c.Talker[frame]
	}
	if group > 0 && frame < len(c.Predictor) && group-1 < len(c.Predictor[frame]) {
		return c.Predictor[frame][group-1]
	}
	return math.Inf(1)
}

// streamingCase is the golden case the behaviour tests run on: a streaming
// prompt (trailing text rows) on the 0.6B-shaped checkpoint.
const streamingCase = "cv_zh_vivian_stream"

func (s LMSuite) streaming(t *testing.T) (*golden.Case, backend.LM, backend.Prompt) {
	t.Helper()
	golden.Require(t)
	c := golden.OpenCase(t, streamingCase)
	return c, s.Shared(t, c.Checkpoint), Prompt(t, c)
}

// TestSeeds: sampling is a pure function of the seed; another seed, or
// greedy, gives other codes.
func (s LMSuite) TestSeeds(t *testing.T) {
	_, lm, p := s.streaming(t)
	a := MustGenerate(t, lm, p, Sampled(24, 7), false)
	b := MustGenerate(t, lm, p, Sampled(24, 7), false)
	d := MustGenerate(t, lm, p, Sampled(24, 8), false)
	g := MustGenerate(t, lm, p, Greedy(24), false)
	if len(a.Codes) != 24 || len(b.Codes) != 24 || len(d.Codes) != 24 || len(g.Codes) != 24 {
		t.Fatalf("frames %d %d %d %d, want 24", len(a.Codes), len(b.Codes), len(d.Codes), len(g.Codes))
	}
	spec := SpecOf(t, lm)
	same, diffSeed, diffGreedy := 0, 0, 0
	for k := range a.Codes {
		if a.Codes[k] == b.Codes[k] {
			same++
		}
		if a.Codes[k] != d.Codes[k] {
			diffSeed++
		}
		if a.Codes[k] != g.Codes[k] {
			diffGreedy++
		}
		for gr, v := range a.Codes[k] {
			limit := spec.PredictorVocab
			if gr == 0 {
				limit = spec.Rules.SuppressFrom // no control id, EOS included
			}
			if v < 0 || int(v) >= limit {
				t.Fatalf("frame %d group %d: code %d outside what the codec decodes", k, gr, v)
			}
		}
	}
	if same != 24 || diffSeed == 0 || diffGreedy == 0 {
		t.Errorf("seed 7 twice: %d/24 frames equal; seed 8: %d frames differ; greedy: %d differ", same, diffSeed, diffGreedy)
	}
	t.Logf("seed 7 vs 8: %d of 24 frames differ; sampled vs greedy: %d", diffSeed, diffGreedy)
	// The top-p < 1 path.
	o := Sampled(24, 7)
	o.Talker.TopP, o.Predictor.TopP = 0.8, 0.8
	MustGenerate(t, lm, p, o, false)
}

// TestStopping covers the stop reasons: EOS ends without emitting its frame,
// the MaxFrames cap stops and logs, ExactFrames ignores EOS.
func (s LMSuite) TestStopping(t *testing.T) {
	_, lm, p := s.streaming(t)
	eos := int32(SpecOf(t, lm).EOS)
	greedy := MustGenerate(t, lm, p, Greedy(4), false)

	opt := Greedy(0)
	opt.TeacherCodes = append([]backend.Codes(nil), greedy.Codes[:3]...)
	opt.TeacherCodes[2][0] = eos
	r := MustGenerate(t, lm, p, opt, false)
	if r.Result.Stop != backend.StopEOS || len(r.Codes) != 2 || r.Result.Frames != 2 {
		t.Errorf("EOS at frame 2: stop %s, %d frames (%d reported); want eos, 2", r.Result.Stop, len(r.Codes), r.Result.Frames)
	}

	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	opt = Greedy(0)
	opt.MaxFrames = 3
	r = MustGenerate(t, lm, p, opt, false)
	slog.SetDefault(prev)
	if r.Result.Stop != backend.StopCap || len(r.Codes) != 3 {
		t.Errorf("MaxFrames 3: stop %s, %d frames; want cap, 3", r.Result.Stop, len(r.Codes))
	}
	if !strings.Contains(logs.String(), "frame cap") || !strings.Contains(logs.String(), "cap=3") {
		t.Errorf("cap not logged; log was %q", logs.String())
	}

	opt = Greedy(3)
	opt.TeacherCodes = []backend.Codes{greedy.Codes[0], greedy.Codes[1]}
	opt.TeacherCodes[1][0] = eos
	r = MustGenerate(t, lm, p, opt, false)
	if r.Result.Stop != backend.StopExact || len(r.Codes) != 3 {
		t.Errorf("ExactFrames 3 with EOS: stop %s, %d frames; want exact, 3", r.Result.Stop, len(r.Codes))
	}
}

// BadInput is one request every backend must refuse with Want before any work.
type BadInput struct {
	Name   string
	Prompt backend.Prompt
	Opt    backend.GenerateOptions
	Want   error
}

// BadInputs are the bad requests for a backend of limits l, built around a
// good prompt p of l.Hidden-wide rows.
func BadInputs(p backend.Prompt, l backend.Limits) []BadInput {
	H := l.Hidden
	nan := make([]float32, H)
	nan[3] = float32(math.NaN())
	g := Greedy(2)
	bad := func(group int, code int32) []backend.Codes {
		c := backend.Codes{}
		c[group] = code
		return []backend.Codes{c}
	}
	rows := func(n int) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = p.TTSPad
		}
		return out
	}
	return []BadInput{
		{"empty prefill", backend.Prompt{TTSPad: p.TTSPad}, g, backend.ErrBadPrompt},
		{"narrow prefill row", backend.Prompt{Prefill: [][]float32{make([]float32, H-1)}, TTSPad: p.TTSPad}, g, backend.ErrBadPrompt},
		{"narrow row before good ones", backend.Prompt{Prefill: append([][]float32{make([]float32, 3)}, p.Prefill...), Trailing: p.Trailing, TTSPad: p.TTSPad}, g, backend.ErrBadPrompt},
		{"NaN prefill", backend.Prompt{Prefill: [][]float32{nan}, TTSPad: p.TTSPad}, g, backend.ErrBadPrompt},
		{"wide trailing row", backend.Prompt{Prefill: p.Prefill, Trailing: [][]float32{make([]float32, H+1)}, TTSPad: p.TTSPad}, g, backend.ErrBadPrompt},
		{"no tts_pad", backend.Prompt{Prefill: p.Prefill}, g, backend.ErrBadPrompt},
		{"prefill fills every position", backend.Prompt{Prefill: rows(l.Positions), TTSPad: p.TTSPad}, g, backend.ErrBadPrompt},
		{"zero temperature", p, backend.GenerateOptions{Talker: sample.Params{DoSample: true, TopP: 1}, Predictor: sample.Greedy()}, backend.ErrBadOptions},
		{"negative frames", p, backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), MaxFrames: -1}, backend.ErrBadOptions},
		{"more exact frames than positions", p, Greedy(l.Positions - len(p.Prefill) + 1), backend.ErrBadOptions},
		{"teacher group-0 code out of range", p, backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: 2, TeacherCodes: bad(0, int32(l.Vocab))}, backend.ErrBadOptions},
		{"teacher predictor code out of range", p, backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), TeacherCodes: bad(5, int32(l.PredictorVocab))}, backend.ErrBadOptions},
	}
}

// TestBadInput: every bad request is a named error, the LM stays usable, and
// a nil output channel is refused.
func (s LMSuite) TestBadInput(t *testing.T) {
	_, lm, p := s.streaming(t)
	for _, b := range BadInputs(p, SpecOf(t, lm).Limits) {
		_, err := lm.Generate(context.Background(), b.Prompt, b.Opt, make(chan backend.Frame, 16))
		if !errors.Is(err, b.Want) {
			t.Errorf("%s: err %v, want %v", b.Name, err, b.Want)
		}
	}
	if _, err := lm.Generate(context.Background(), p, Greedy(1), nil); err == nil {
		t.Error("nil channel accepted")
	}
	MustGenerate(t, lm, p, Greedy(2), false)
}

// TestCancelThenReuse cancels a sampled utterance after a few frames: the
// call returns context.Canceled with StopCancelled promptly, the frames
// before equal a clean run's, and the next call on the same LM equals the
// clean run. A context cancelled before the call stops it too.
func (s LMSuite) TestCancelThenReuse(t *testing.T) {
	_, lm, p := s.streaming(t)
	o := Sampled(40, 11)
	clean := MustGenerate(t, lm, p, o, false)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan backend.Frame) // unbuffered: the loop waits for the reader
	type result struct {
		res backend.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := lm.Generate(ctx, p, o, out)
		done <- result{res, err}
	}()
	const read = 5
	for i := 0; i < read; i++ {
		if f := <-out; f.Codes != clean.Codes[i] {
			t.Errorf("frame %d before the cancel differs from the clean run", i)
		}
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
	if r.res.Frames < read || r.res.Frames > read+1 {
		t.Errorf("cancelled run reports %d frames, want %d or %d", r.res.Frames, read, read+1)
	}
	again := MustGenerate(t, lm, p, o, false)
	checkSame(t, "after the cancel", again.Codes, clean.Codes)

	dead, stop := context.WithCancel(context.Background())
	stop()
	if r := Generate(t, lm, dead, p, Greedy(4), false); !errors.Is(r.Err, context.Canceled) {
		t.Errorf("pre-cancelled context: err %v, want context.Canceled", r.Err)
	}
	checkSame(t, "after a pre-cancelled call", MustGenerate(t, lm, p, o, false).Codes, clean.Codes)
}

// TestTwoEngines: two LMs of one checkpoint in one process give the shared
// LM's codes, also when they generate at the same time.
func (s LMSuite) TestTwoEngines(t *testing.T) {
	c, shared, p := s.streaming(t)
	o := Sampled(40, 3)
	want := MustGenerate(t, shared, p, o, false)
	m, err := model.Load(c.Checkpoint, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var lms [2]backend.LM
	for i := range lms {
		lms[i] = s.Fresh(t, m)
		defer lms[i].Close()
	}
	var runs [2]Run
	done := make(chan int)
	for i := range lms {
		go func() {
			runs[i] = Generate(t, lms[i], context.Background(), p, o, false)
			done <- i
		}()
	}
	<-done
	<-done
	for i, r := range runs {
		if r.Err != nil {
			t.Fatalf("engine %d: %v", i, r.Err)
		}
		checkSame(t, fmt.Sprintf("engine %d", i), r.Codes, want.Codes)
	}
}

// Run runs every test of the suite.
func (s LMSuite) Run(t *testing.T) {
	t.Run("GoldenCodes", s.TestGoldenCodes)
	t.Run("TeacherForcedLogits", s.TestTeacherForcedLogits)
	t.Run("Seeds", s.TestSeeds)
	t.Run("Stopping", s.TestStopping)
	t.Run("BadInput", s.TestBadInput)
	t.Run("CancelThenReuse", s.TestCancelThenReuse)
	t.Run("TwoEngines", s.TestTwoEngines)
}

func checkSame(t *testing.T, what string, got, want []backend.Codes) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("%s: frame %d codes %v, want %v", what, k, got[k], want[k])
		}
	}
}

func argmax(l []float32) int {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return best
}

// Flat joins rows into one slice.
func Flat(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}
