package cuda

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"talkbox/engine/backendtest"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

// modelFor is the model engineFor loaded for dir.
func modelFor(t *testing.T, dir string) (*model.Model, *LM) {
	t.Helper()
	lm := engineFor(t, dir)
	lmCacheMu.Lock()
	defer lmCacheMu.Unlock()
	return lmCache[lmCacheKey(dir, PrefillTensorCores)].m, lm
}

// textRows looks up text-embedding rows (bf16 in every checkpoint here) as
// float32, the input ProjectText takes.
func textRows(t *testing.T, m *model.Model, ids []int) []float32 {
	t.Helper()
	info, raw, err := m.LM.Raw("talker.model.text_embedding.weight")
	if err != nil {
		t.Fatal(err)
	}
	if info.DType != safetensors.BF16 {
		t.Skipf("skipping: text embedding is %s, this test reads bf16", info.DType)
	}
	w := info.Shape[1]
	x := make([]float32, 0, len(ids)*w)
	for _, id := range ids {
		for k := 0; k < w; k++ {
			x = append(x, safetensors.BF16ToF32(binary.LittleEndian.Uint16(raw[2*(id*w+k):])))
		}
	}
	return x
}

// refProjection is fc2(SiLU(fc1 x + b1)) + b2 in float64 from the
// checkpoint's tensors, independent of both engines.
func refProjection(t *testing.T, m *model.Model, x []float32, rows int) []float64 {
	t.Helper()
	get := func(name string) []float32 {
		v, err := m.LM.F32("talker.text_projection." + name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fc1, b1, fc2, b2 := get("linear_fc1.weight"), get("linear_fc1.bias"), get("linear_fc2.weight"), get("linear_fc2.bias")
	th, H := len(b1), len(b2)
	out := make([]float64, rows*H)
	hid := make([]float64, th)
	for r := 0; r < rows; r++ {
		xr := x[r*th : (r+1)*th]
		for j := range hid {
			s := float64(b1[j])
			for k, v := range xr {
				s += float64(fc1[j*th+k]) * float64(v)
			}
			hid[j] = s / (1 + math.Exp(-s))
		}
		for j := 0; j < H; j++ {
			s := float64(b2[j])
			for k, v := range hid {
				s += float64(fc2[j*th+k]) * v
			}
			out[r*H+j] = s
		}
	}
	return out
}

// checkProjection compares GPU rows with the float64 reference: max abs
// difference relative to max |value| at most 1e-4.
func checkProjection(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var worst, scale float64
	for i, w := range want {
		worst = math.Max(worst, math.Abs(float64(got[i])-w))
		scale = math.Max(scale, math.Abs(w))
	}
	rel := worst / math.Max(scale, 1e-30)
	t.Logf("%s: max|diff| %.3g, max|value| %.3g, relative %.3g", what, worst, scale, rel)
	if !(rel <= 1e-4) {
		t.Errorf("%s: GPU text projection differs from the reference: max|diff| %.3g relative to max|value| %.3g = %.3g > 1e-4",
			what, worst, scale, rel)
	}
}

// projectionIDs are 20 text ids with repeats (9707 three times, 1879 and 0
// twice), more than two row tiles of the kernel.
var projectionIDs = []int{9707, 1879, 0, 9707, 151644, 77091, 198, 358, 1079, 264, 1273, 11, 1879, 13, 151645, 0, 40, 41, 42, 9707}

// checkProjectText runs the comparisons on one engine: 20 rows with
// repeats, one row alone (the same bits as in the batch), and more rows
// than one round of the library's buffers.
func checkProjectText(t *testing.T, m *model.Model, lm *LM) {
	th, H := m.Config.Talker.TextHiddenSize, m.Config.Talker.HiddenSize
	if !lm.CanProjectText() {
		t.Fatal("the text projection was not uploaded (the checkpoint stores it as bf16)")
	}
	x := textRows(t, m, projectionIDs)
	n := len(projectionIDs)
	got, err := lm.ProjectText(x, n, th)
	if err != nil {
		t.Fatal(err)
	}
	checkProjection(t, "20 rows", got, refProjection(t, m, x, n))
	row := func(v []float32, i int) []float32 { return v[i*H : (i+1)*H] }
	for i, id := range projectionIDs {
		if j := slices.Index(projectionIDs, id); j < i && !slices.Equal(row(got, i), row(got, j)) {
			t.Errorf("rows %d and %d (id %d) differ", j, i, id)
		}
	}
	one, err := lm.ProjectText(x[5*th:6*th], 1, th)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(one, row(got, 5)) {
		t.Error("a row projected alone differs from the same row in a batch")
	}
	const many = 300
	ids := make([]int, many)
	for i := range ids {
		ids[i] = (i*7919 + 13) % m.Config.Talker.TextVocabSize
	}
	xm := textRows(t, m, ids)
	gm, err := lm.ProjectText(xm, many, th)
	if err != nil {
		t.Fatal(err)
	}
	checkProjection(t, "300 rows", gm, refProjection(t, m, xm, many))
}

func TestProjectTextMatchesReference(t *testing.T) {
	requireGPU(t)
	// 16-wide (the 0.6B layout: the kernel's 8-wide loads) and 4-wide
	// (1.7B layout at tiny size: the scalar path) text projections.
	for _, name := range []string{"qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-customvoice-1b7"} {
		t.Run(name, func(t *testing.T) {
			m, lm := modelFor(t, golden.Checkpoint(t, name))
			checkProjectText(t, m, lm)
		})
	}
}

func TestProjectTextErrors(t *testing.T) {
	requireGPU(t)
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	m, lm := modelFor(t, dir)
	th := m.Config.Talker.TextHiddenSize
	x := textRows(t, m, []int{1, 2})
	for _, c := range []struct {
		name        string
		x           []float32
		rows, textH int
	}{
		{"wrong width", x, 1, 2 * th},
		{"zero rows", x, 0, th},
		{"negative rows", x, -2, th},
		{"too few values", x[:th+1], 2, th},
		{"no values", nil, 1, th},
	} {
		if y, err := lm.ProjectText(c.x, c.rows, c.textH); err == nil {
			t.Errorf("%s: no error (%d values)", c.name, len(y))
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	if _, err := lm.ProjectText(x, 2, th); err != nil {
		t.Fatalf("valid call after the errors: %v", err)
	}
	own, err := NewLM(m, Options{MaxPositions: 64, SkipWarmup: true})
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	if _, err := own.ProjectText(x, 2, th); err == nil {
		t.Error("ProjectText after Close: no error")
	}
}

// ProjectText runs beside Generate (the engine builds the next prompt while
// the LM speaks): the codes equal a run without it, and every projection
// equals one made while the GPU was idle.
func TestProjectTextDuringGenerate(t *testing.T) {
	requireGPU(t)
	c := golden.OpenCase(t, "cv_en_ryan_nonstream")
	m, lm := modelFor(t, c.Checkpoint)
	th := m.Config.Talker.TextHiddenSize
	x := textRows(t, m, projectionIDs)
	n := len(projectionIDs)
	alone, err := lm.ProjectText(x, n, th)
	if err != nil {
		t.Fatal(err)
	}
	o := backendtest.Sampled(60, 5)
	clean, _, err := run(t, lm, context.Background(), casePrompt(c), o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var calls int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			y, err := lm.ProjectText(x, n, th)
			if err != nil {
				t.Errorf("ProjectText during Generate: %v", err)
				return
			}
			if !slices.Equal(y, alone) {
				t.Error("ProjectText during Generate differs from the idle-GPU result")
				return
			}
			calls++
		}
	}()
	got, _, err := run(t, lm, context.Background(), casePrompt(c), o)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, clean) {
		t.Error("Generate's codes changed while ProjectText ran beside it")
	}
	t.Logf("%d projections beside a %d-frame utterance", calls, len(got))
}

// The 2048-wide projection of the real 0.6B shapes against the reference,
// and its time for 64 rows (the CPU path takes about 7 ms on the GPU host).
// Uses the synthetic checkpoint of TestRealShapesAgainstCPU (EnvSynth).
func TestProjectTextRealShapes(t *testing.T) {
	m := synthModel(t)
	lm, err := NewLM(m, Options{MaxPositions: 64, SkipWarmup: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	checkProjectText(t, m, lm)
	th := m.Config.Talker.TextHiddenSize
	ids := make([]int, 64)
	for i := range ids {
		ids[i] = (i*104729 + 7) % m.Config.Talker.TextVocabSize
	}
	x := textRows(t, m, ids)
	var times []time.Duration
	for i := 0; i < 30; i++ {
		start := time.Now()
		if _, err := lm.ProjectText(x, len(ids), th); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	t.Logf("ProjectText, 64 rows of %d -> %d: median %v, min %v, max %v (30 calls, copies included)",
		th, m.Config.Talker.HiddenSize, times[len(times)/2], times[0], times[len(times)-1])
}
