package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
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
	// 70 prompt rows: at 70+ positions, three attention chunks per KV head
	// (the cross-CTA merge). 300: the prefill's products of many rows
	// (gemm_wg on an sm_90a image, gemm_tiles on other Hopper builds).
	t.Run("70 rows", func(t *testing.T) { againstCPU(t, m, 70, 8, 128) })
	t.Run("300 rows", func(t *testing.T) { againstCPU(t, m, 300, 2, 320) })
}

// againstCPU compares the GPU's logits and hidden states with the CPU
// reference's over frames teacher-forced frames after a prompt of rows rows.
func againstCPU(t *testing.T, m *model.Model, rows, frames, maxPos int) {
	H := m.Config.Talker.HiddenSize
	p := syntheticPrompt(H, rows, 3, 9)
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
	gpu, err := NewLM(m, Options{MaxPositions: maxPos})
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

// Forty streams at once on the real shapes run the step's 33-64-row products
// (on Hopper: K split over thread-block clusters, several passes of K a CTA,
// the norms summed across the cluster); teacher-forced, each stream's logits
// match the same stream's alone (one row) within batchTol: the steps give the
// same bits, but forty prompts admitted together split the prefill's K
// otherwise than one (SplitK.all_tiles; 1.1e-3 of the largest logit, H100).
func TestBatchRealShapesManyStreams(t *testing.T) {
	m := synthModel(t)
	H := m.Config.Talker.HiddenSize
	gpu, err := NewLM(m, Options{MaxPositions: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	const n, kinds, frames = 40, 8, 6
	many, err := NewBatcher(gpu, n, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer many.Close()
	alone, err := NewBatcher(gpu, 1, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	type job struct {
		p       backend.Prompt
		teacher []backend.Codes
	}
	jobs := make([]job, kinds)
	for i := range jobs {
		jobs[i].p = syntheticPrompt(H, 20+7*i, 3, uint64(11+i))
		jobs[i].teacher = make([]backend.Codes, frames)
		for k := range jobs[i].teacher {
			for g := range jobs[i].teacher[k] {
				jobs[i].teacher[k][g] = int32((k*131 + g*37 + 97*i + 5) % 2048)
			}
		}
	}
	gen := func(lm backend.LM, j job, rec *streamLogits) error {
		o := backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: frames,
			TeacherCodes: j.teacher, OnLogits: rec.record}
		_, _, err := run(t, lm, context.Background(), j.p, o)
		return err
	}
	want := make([]streamLogits, kinds)
	for i, j := range jobs {
		if err := gen(alone.LM(), j, &want[i]); err != nil {
			t.Fatalf("kind %d alone: %v", i, err)
		}
	}
	got := make([]streamLogits, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = gen(many.LM(), jobs[i%kinds], &got[i])
		}()
	}
	wg.Wait()
	worst := 0.0
	for i := range got {
		if errs[i] != nil {
			t.Errorf("stream %d: %v", i, errs[i])
			continue
		}
	events:
		for f := range frames {
			for grp := range backend.NumGroups {
				rel, _, err := got[i].compare(&want[i%kinds], f, grp)
				worst = math.Max(worst, rel)
				if err != nil || rel > batchTol {
					t.Errorf("stream %d frame %d group %d: logits %.3g from alone (of the largest) %v", i, f, grp, rel, err)
					break events
				}
			}
		}
	}
	t.Logf("%d streams x %d frames x %d groups: largest difference from alone %.3g of the largest logit", n, frames, backend.NumGroups, worst)
}

// The decode kernel takes every SM for the frames GenerateOptions.CodecNear
// says the codec is idle and leaves it a third of them (132 SMs: 44) for the
// others; its sums split the same way on both grids (the one-phase MLP's down
// shares, the attention's chunks), so the logits are the same bits whichever
// grid each frame took. Real shapes only: on the golden checkpoints' 96-128-row MLPs a
// share holds at most one row, and any split gives the same sums.
func TestLeavingSMsKeepsTheLogits(t *testing.T) {
	m := synthModel(t)
	p := syntheticPrompt(m.Config.Talker.HiddenSize, 40, 3, 5)
	const frames = 6
	teacher := make([]backend.Codes, frames)
	for k := range teacher {
		for g := range teacher[k] {
			teacher[k][g] = int32((k*71 + g*13 + 3) % 2048)
		}
	}
	collect := func(lm *LM, near func(int) bool) [][]float32 {
		var all [][]float32
		o := backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: frames,
			TeacherCodes: teacher, CodecNear: near, OnLogits: func(e backend.LogitsEvent) { all = append(all, e.Logits) }}
		if _, _, err := run(t, lm, context.Background(), p, o); err != nil {
			t.Fatal(err)
		}
		if len(all) != frames*backend.NumGroups {
			t.Fatalf("%d logit events, want %d", len(all), frames*backend.NumGroups)
		}
		return all
	}
	same := func(what string, a, b [][]float32) {
		for i := range a {
			for j := range a[i] {
				if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
					t.Errorf("%s: frame %d group %d logit %d: %v against %v", what, i/backend.NumGroups, i%backend.NumGroups, j, a[i][j], b[i][j])
					return
				}
			}
		}
	}
	for _, fused := range []int{0, -1} {
		t.Run(fmt.Sprintf("fused_max_len=%d", fused), func(t *testing.T) {
			open := func() *LM {
				lm, err := NewLM(m, Options{MaxPositions: 128, FusedMaxLen: fused})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lm.Close() })
				return lm
			}
			plain, lm := open(), open()
			sms, _, _, _ := lm.Geometry()
			if err := lm.ReserveSMs(sms / 4); err != nil {
				t.Fatal(err)
			}
			lm.mu.Lock()
			all, err := lm.leaveSMs(false)
			left, err2 := lm.leaveSMs(true)
			lm.mu.Unlock()
			if err != nil || err2 != nil {
				t.Fatal(err, err2)
			}
			t.Logf("grids: %d CTAs on every SM, %d leaving %d to the codec", all, left, sms-left)
			if left > sms-sms/4 || (all != sms && all != left) {
				t.Fatalf("%d SMs, %d reserved: grids %d and %d", sms, sms/4, all, left)
			}
			var asked []bool
			alternate := func(i int) bool { asked = append(asked, i%2 == 1); return i%2 == 1 }
			ref := collect(lm, nil) // every frame leaves the SMs
			same("frames alternating between the grids", ref, collect(lm, alternate))
			same("every frame on every SM", ref, collect(lm, func(int) bool { return false }))
			if len(asked) != frames {
				t.Errorf("CodecNear asked for %d frames, want %d", len(asked), frames)
			}
			if all != left {
				same("an LM that reserves no SMs", ref, collect(plain, nil))
			}
		})
	}
}
