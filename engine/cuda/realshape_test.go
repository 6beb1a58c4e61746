package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/cpu"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// EnvSynth names a directory for a synthetic 0.6B checkpoint (written there
// when it has no config.json). The golden checkpoints are tiny, so only this
// test runs the kernel's real-shape paths (1024/2048/3072-wide rows, 16 heads,
// 8-row prefill passes, multi-chunk attention) against the
// CPU reference. Skipped when unset (CI: no GPU, and the CPU run takes ~1 min).
const EnvSynth = "TALKBOX_CUDA_SYNTH"

// synthModel opens the synthetic 0.6B checkpoint of EnvSynth (writing it
// first when needed), or skips; the test closes it.
func synthModel(t *testing.T) *model.Model {
	t.Helper()
	requireGPU(t)
	dir := os.Getenv(EnvSynth)
	if dir == "" {
		t.Skipf("skipping: set %s to a directory for a synthetic 0.6B checkpoint", EnvSynth)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if err := model.WriteSynthetic(dir, model.SynthOptions{Size: "0.6b", Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestRealShapesAgainstCPU(t *testing.T) {
	m := synthModel(t)
	H := m.Config.Talker.HiddenSize
	// 70 prompt rows: several prefill passes and, at 70+ positions, three
	// attention chunks per KV head (the cross-CTA merge).
	p := syntheticPrompt(H, 70, 3, 9)
	const frames = 8
	teacher := make([]backend.Codes, frames)
	for k := range teacher {
		for g := range teacher[k] {
			teacher[k][g] = int32((k*131 + g*37 + 5) % 2048)
		}
	}
	type got struct {
		talker [][]float32 // group-0 logits, one per frame
		hidden [][]float32 // the final-normed talker hidden state that produced them
		cp     [][]float32
	}
	collect := func(lm backend.LM) got {
		var r got
		o := backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: frames,
			TeacherCodes: teacher, OnLogits: func(e backend.LogitsEvent) {
				if e.Group == 0 {
					r.talker = append(r.talker, e.Logits)
					r.hidden = append(r.hidden, e.Hidden)
				} else if e.Frame == 0 {
					r.cp = append(r.cp, e.Logits)
				}
			}}
		if _, _, err := run(t, lm, context.Background(), p, o); err != nil {
			t.Fatal(err)
		}
		return r
	}
	gpu, err := NewLM(m, Options{MaxPositions: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	ref, err := cpu.New(m, cpu.Options{Precision: cpu.F32})
	if err != nil {
		t.Fatal(err)
	}
	g, c := collect(gpu), collect(ref)
	if len(g.talker) != frames || len(c.talker) != frames || len(g.hidden) != frames || len(g.cp) != backend.NumGroups-1 || len(c.cp) != backend.NumGroups-1 {
		t.Fatalf("logit events: gpu %d/%d, cpu %d/%d", len(g.talker), len(g.cp), len(c.talker), len(c.cp))
	}
	check := func(what string, a, b []float32) {
		tol := golden.ActivationTol(b, 5e-2)
		var dot, na, nb, worst float64
		for i := range b {
			dot += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
			worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
		}
		cos := dot / math.Sqrt(na*nb)
		t.Logf("%s: max|diff| %.3g (tol %.3g), cosine %.6f", what, worst, tol, cos)
		if !(worst <= tol) || !(cos >= 0.999) {
			t.Errorf("%s: GPU values differ from the CPU reference: max|diff| %.3g (tol %.3g), cosine %.6f", what, worst, tol, cos)
		}
	}
	for k := range c.talker {
		check(fmt.Sprintf("talker frame %d", k), g.talker[k], c.talker[k])
		check(fmt.Sprintf("hidden frame %d", k), g.hidden[k], c.hidden[k])
	}
	for j := range c.cp {
		check(fmt.Sprintf("predictor frame 0 group %d", j+1), g.cp[j], c.cp[j])
	}
}
