package cpu

import (
	"fmt"
	"sync"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/backendtest"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

var (
	lmCacheMu sync.Mutex
	lmCache   = map[string]*LM{}
)

// goldenLM loads (once per test binary) the CPU LM of a golden checkpoint dir.
func goldenLM(t *testing.T, dir string) *LM {
	t.Helper()
	lmCacheMu.Lock()
	defer lmCacheMu.Unlock()
	if lm, ok := lmCache[dir]; ok {
		return lm
	}
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lm, err := New(m, Options{Threads: 2, Precision: F32})
	if err != nil {
		t.Fatal(err)
	}
	lmCache[dir] = lm
	return lm
}

// TestBackendSuite holds the CPU engine, the float32 reference, to the
// official outputs at 1e-4 of the activations and every code exact.
func TestBackendSuite(t *testing.T) {
	backendtest.LMSuite{
		Shared: func(t *testing.T, dir string) backend.LM { return goldenLM(t, dir) },
		Fresh: func(t *testing.T, m *model.Model) backend.LM {
			lm, err := New(m, Options{Threads: 1, Precision: F32})
			if err != nil {
				t.Fatal(err)
			}
			return lm
		},
		Checkpoints: []string{"qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-base", "qwen3-tts-tiny-customvoice-1b7",
			"qwen3-tts-tiny-voicedesign-1b7"},
		LogitsTol:   1e-4,
		BF16Tol:     5e-2,
		CheckHidden: true,
		MinCases:    13,
	}.Run(t)
}

// compareRun checks one run against the golden tensors named with suffix
// ("" for single cases, "_0"/"_1" for batch items) and returns a summary line.
func compareRun(t *testing.T, c *golden.Case, run backendtest.Run, suffix string, rel float64) string {
	t.Helper()
	wantLogits := c.F32("talker_logits" + suffix)
	frames := len(wantLogits) / len(run.TalkerLogits[0])
	if len(run.TalkerLogits) != frames {
		t.Fatalf("%d talker steps reported, want %d", len(run.TalkerLogits), frames)
	}
	dl := golden.AssertClose(t, c.Name+" talker_logits"+suffix, backendtest.Flat(run.TalkerLogits), wantLogits, golden.ActivationTol(wantLogits, rel))
	summary := fmt.Sprintf("%s%s: talker_logits %.2g", c.Name, suffix, dl)
	if c.Has("talker_last_hidden" + suffix) {
		want := c.F32("talker_last_hidden" + suffix)
		d := golden.AssertClose(t, c.Name+" talker_last_hidden"+suffix, backendtest.Flat(run.TalkerHidden), want, golden.ActivationTol(want, rel))
		summary += fmt.Sprintf(", hidden %.2g", d)
	}
	if c.Has("code_predictor_logits_frame0") && suffix == "" {
		want := c.F32("code_predictor_logits_frame0")
		d := golden.AssertClose(t, c.Name+" code_predictor_logits_frame0", backendtest.Flat(run.CPLogits[0]), want, golden.ActivationTol(want, rel))
		summary += fmt.Sprintf(", cp_logits_f0 %.2g", d)
	}
	return summary
}

func checkCodes(t *testing.T, name string, got, want []backend.Codes) int {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d frames, want %d", name, len(got), len(want))
		return 0
	}
	same := 0
	for i := range want {
		for g := range want[i] {
			if got[i][g] == want[i][g] {
				same++
			}
		}
		if got[i] != want[i] {
			t.Errorf("%s: frame %d codes %v, want %v", name, i, got[i], want[i])
		}
	}
	return same
}

// TestGoldenBatchItems runs each item of the batched golden case on its own:
// item 1 was left-padded by one zero row, which a single run simply drops.
func TestGoldenBatchItems(t *testing.T) {
	golden.Require(t)
	c := golden.OpenCase(t, "cv_batch2_stream")
	lm := goldenLM(t, c.Checkpoint)
	H := lm.spec.Hidden
	shape := c.Shape("prefill_embeds")
	B, L := shape[0], shape[1]
	prefill := c.F32("prefill_embeds")
	mask := c.I64("prefill_attention_mask")
	tshape := c.Shape("trailing_text_hidden")
	trailing := c.F32("trailing_text_hidden")
	members, _ := golden.LoadManifest(t).Cases[c.Name].Inputs["members"].([]any)
	if len(members) != B {
		t.Fatalf("manifest lists %d members for %d batch items", len(members), B)
	}
	for b := 0; b < B; b++ {
		var rows [][]float32
		for i := 0; i < L; i++ {
			if mask[b*L+i] != 0 {
				rows = append(rows, prefill[(b*L+i)*H:(b*L+i+1)*H])
			}
		}
		p := backend.Prompt{Prefill: rows, Trailing: backendtest.Rows(trailing[b*tshape[1]*H:(b+1)*tshape[1]*H], H), TTSPad: c.F32("tts_pad_embed")}
		suffix := fmt.Sprintf("_%d", b)
		want := backendtest.Codes(c.I64("codes" + suffix))
		run := backendtest.MustGenerate(t, lm, p, backendtest.Greedy(len(want)), true)
		summary := compareRun(t, c, run, suffix, 1e-4)
		same := checkCodes(t, c.Name+suffix, run.Codes, want)
		t.Logf("%s (%d prefill rows), codes %d/%d exact", summary, len(rows), same, len(want)*backend.NumGroups)

		// The item equals the member's own single run.
		single := golden.OpenCase(t, members[b].(string))
		alone := backendtest.MustGenerate(t, lm, backendtest.Prompt(t, single), backendtest.Greedy(len(want)), true)
		checkCodes(t, single.Name+" single vs batch item", alone.Codes, run.Codes)
		if d := golden.MaxAbsDiff(backendtest.Flat(alone.TalkerLogits), backendtest.Flat(run.TalkerLogits)); d > 1e-5 {
			t.Errorf("%s: single-run logits differ from batch item %d by %g", single.Name, b, d)
		}
	}
}
