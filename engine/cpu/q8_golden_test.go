package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"talkbox/engine/backendtest"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// int8LM loads (once per test binary) the Int8 LM of a golden checkpoint.
func int8LM(t *testing.T, dir string) *LM {
	t.Helper()
	lmCacheMu.Lock()
	defer lmCacheMu.Unlock()
	key := dir + "#int8"
	if lm, ok := lmCache[key]; ok {
		return lm
	}
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lm, err := New(m, Options{Threads: 2, Precision: Int8})
	if err != nil {
		t.Fatal(err)
	}
	lmCache[key] = lm
	return lm
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// logitAgreement compares int8 logit rows with f32 ones: how many top-1
// picks agree, the largest absolute error, and the smallest f32 margin
// (top-1 minus the int8 pick) among the rows that disagree.
type logitAgreement struct {
	same, rows      int
	maxErr, maxAbs  float64
	worstFlipMargin float64
}

func (a *logitAgreement) add(f32, q8 []float32) {
	a.rows++
	i, j := argmax(f32), argmax(q8)
	if i == j {
		a.same++
	} else {
		a.worstFlipMargin = max(a.worstFlipMargin, float64(f32[i]-f32[j]))
	}
	a.maxErr = max(a.maxErr, golden.MaxAbsDiff(q8, f32))
	a.maxAbs = max(a.maxAbs, golden.MaxAbs(f32))
}

func (a *logitAgreement) String() string {
	return fmt.Sprintf("top-1 %d/%d (%.1f%%), max |err| %.3g of max |logit| %.3g", a.same, a.rows,
		100*float64(a.same)/float64(max(1, a.rows)), a.maxErr, a.maxAbs)
}

// TestInt8TeacherForcedAgreement runs the Int8 engine against the F32 one on
// every golden case, both fed the official codes (teacher forcing, so one
// flip does not change every later input): group-0 and predictor top-1
// agreement and the largest logit error. Every disagreement must be a near
// tie in f32 (margin within twice the largest logit error); then free-running
// greedy int8 codes are compared with the official ones and the first
// divergence is reported.
func TestInt8TeacherForcedAgreement(t *testing.T) {
	golden.Require(t)
	names := golden.CaseNames(t, "qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-base",
		"qwen3-tts-tiny-customvoice-1b7", "qwen3-tts-tiny-voicedesign-1b7")
	var g0All, cpAll logitAgreement
	ran := 0
	for _, name := range names {
		if strings.HasSuffix(name, "__bf16") {
			continue
		}
		c := golden.OpenCase(t, name)
		if !c.Has("prefill_embeds") || !c.Has("codes") {
			continue
		}
		ran++
		ref, q8 := goldenLM(t, c.Checkpoint), int8LM(t, c.Checkpoint)
		p := backendtest.Prompt(t, c)
		want := backendtest.Codes(c.I64("codes"))
		opt := backendtest.Greedy(len(want))
		opt.TeacherCodes = want
		a, b := backendtest.MustGenerate(t, ref, p, opt, true), backendtest.MustGenerate(t, q8, p, opt, true)
		var g0, cp logitAgreement
		for f := range a.TalkerLogits {
			g0.add(a.TalkerLogits[f], b.TalkerLogits[f])
			for g := range a.CPLogits[f] {
				cp.add(a.CPLogits[f][g], b.CPLogits[f][g])
			}
		}
		for _, x := range []*logitAgreement{&g0, &cp} {
			if x.same < x.rows && x.worstFlipMargin > 2*x.maxErr {
				t.Errorf("%s: a top-1 flip with f32 margin %.3g, more than twice the largest int8 error %.3g", name, x.worstFlipMargin, x.maxErr)
			}
		}
		g0All.same, g0All.rows = g0All.same+g0.same, g0All.rows+g0.rows
		g0All.maxErr, g0All.maxAbs = max(g0All.maxErr, g0.maxErr), max(g0All.maxAbs, g0.maxAbs)
		cpAll.same, cpAll.rows = cpAll.same+cp.same, cpAll.rows+cp.rows
		cpAll.maxErr, cpAll.maxAbs = max(cpAll.maxErr, cp.maxErr), max(cpAll.maxAbs, cp.maxAbs)

		free := backendtest.MustGenerate(t, q8, p, backendtest.Greedy(len(want)), false)
		first := "all equal"
		for f := range want {
			if free.Codes[f] != want[f] {
				g := 0
				for free.Codes[f][g] == want[f][g] {
					g++
				}
				first = fmt.Sprintf("first differ at frame %d group %d", f, g)
				break
			}
		}
		t.Logf("%s: group 0 %v; predictor %v; greedy int8 codes over %d frames: %s", name, &g0, &cp, len(want), first)
	}
	if ran < 13 {
		t.Errorf("only %d golden cases ran, want at least 13", ran)
	}
	t.Logf("all cases: group 0 %v; predictor %v", &g0All, &cpAll)
	// The rates the note reports; a broken kernel or scale gives chance
	// level (well under 50%), so these catch it with room for near ties.
	if r := float64(g0All.same) / float64(g0All.rows); r < 0.9 {
		t.Errorf("group-0 top-1 agreement %.3f, want >= 0.9", r)
	}
	if r := float64(cpAll.same) / float64(cpAll.rows); r < 0.9 {
		t.Errorf("predictor top-1 agreement %.3f, want >= 0.9", r)
	}
	if math.IsNaN(g0All.maxErr) || math.IsNaN(cpAll.maxErr) {
		t.Error("NaN logits")
	}
}
