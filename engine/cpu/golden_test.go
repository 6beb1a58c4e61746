package cpu

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/sample"
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
	lm, err := New(m, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	lmCache[dir] = lm
	return lm
}

// rowsOf splits a flat [n, w] tensor into rows.
func rowsOf(v []float32, w int) [][]float32 {
	var out [][]float32
	for i := 0; i+w <= len(v); i += w {
		out = append(out, v[i:i+w])
	}
	return out
}

// goldenRun is what one Generate call reported through OnLogits and out.
type goldenRun struct {
	talkerLogits, talkerHidden [][]float32         // per frame
	cpLogits                   map[int][][]float32 // frame -> 15 rows
	codes                      []backend.Codes
	res                        backend.Result
}

func runLM(t *testing.T, lm *LM, p backend.Prompt, opt backend.GenerateOptions) goldenRun {
	t.Helper()
	run := goldenRun{cpLogits: map[int][][]float32{}}
	opt.OnLogits = func(ev backend.LogitsEvent) {
		if ev.Group == 0 {
			run.talkerLogits = append(run.talkerLogits, ev.Logits)
			run.talkerHidden = append(run.talkerHidden, ev.Hidden)
		} else {
			run.cpLogits[ev.Frame] = append(run.cpLogits[ev.Frame], ev.Logits)
		}
	}
	out := make(chan backend.Frame, 64)
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		run.res, err = lm.Generate(context.Background(), p, opt, out)
		close(out)
	}()
	for f := range out {
		if f.Index != len(run.codes) {
			t.Errorf("frame index %d, want %d", f.Index, len(run.codes))
		}
		run.codes = append(run.codes, f.Codes)
	}
	<-done
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return run
}

func greedyOptions(frames int) backend.GenerateOptions {
	return backend.GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: frames}
}

func flat(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func codesOf(v []int64) []backend.Codes {
	out := make([]backend.Codes, len(v)/backend.NumGroups)
	for i := range out {
		for g := 0; g < backend.NumGroups; g++ {
			out[i][g] = int32(v[i*backend.NumGroups+g])
		}
	}
	return out
}

// compareRun checks one run against the golden tensors named with suffix
// ("" for single cases, "_0"/"_1" for batch items) and returns a summary line.
func compareRun(t *testing.T, c *golden.Case, run goldenRun, suffix string, rel float64) string {
	t.Helper()
	wantLogits := c.F32("talker_logits" + suffix)
	frames := len(wantLogits) / len(run.talkerLogits[0])
	if len(run.talkerLogits) != frames {
		t.Fatalf("%d talker steps reported, want %d", len(run.talkerLogits), frames)
	}
	dl := golden.AssertClose(t, c.Name+" talker_logits"+suffix, flat(run.talkerLogits), wantLogits, golden.ActivationTol(wantLogits, rel))
	summary := fmt.Sprintf("%s%s: talker_logits %.2g", c.Name, suffix, dl)
	if c.Has("talker_last_hidden" + suffix) {
		want := c.F32("talker_last_hidden" + suffix)
		d := golden.AssertClose(t, c.Name+" talker_last_hidden"+suffix, flat(run.talkerHidden), want, golden.ActivationTol(want, rel))
		summary += fmt.Sprintf(", hidden %.2g", d)
	}
	if c.Has("code_predictor_logits_frame0") && suffix == "" {
		want := c.F32("code_predictor_logits_frame0")
		d := golden.AssertClose(t, c.Name+" code_predictor_logits_frame0", flat(run.cpLogits[0]), want, golden.ActivationTol(want, rel))
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

// TestGoldenGreedy feeds every single-utterance golden case's prefill and
// text rows to the engine and checks logits, hidden states and all codes.
func TestGoldenGreedy(t *testing.T) {
	golden.Require(t)
	names := golden.CaseNames(t, "qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-base",
		"qwen3-tts-tiny-customvoice-1b7", "qwen3-tts-tiny-voicedesign-1b7")
	ran := 0
	for _, name := range names {
		if strings.HasSuffix(name, "__bf16") {
			continue // teacher-forced below
		}
		c := golden.OpenCase(t, name)
		if !c.Has("prefill_embeds") || !c.Has("talker_logits") || !c.Has("codes") {
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			lm := goldenLM(t, c.Checkpoint)
			H := lm.spec.Hidden
			p := backend.Prompt{Prefill: rowsOf(c.F32("prefill_embeds"), H),
				Trailing: rowsOf(c.F32("trailing_text_hidden"), H), TTSPad: c.F32("tts_pad_embed")}
			want := codesOf(c.I64("codes"))
			run := runLM(t, lm, p, greedyOptions(len(want)))
			if run.res.Stop != backend.StopExact || run.res.Frames != len(want) {
				t.Errorf("stop %s after %d frames, want exact after %d", run.res.Stop, run.res.Frames, len(want))
			}
			summary := compareRun(t, c, run, "", 1e-4)
			same := checkCodes(t, name, run.codes, want)
			t.Logf("%s, codes %d/%d exact", summary, same, len(want)*backend.NumGroups)
		})
	}
	if ran < 13 {
		t.Errorf("only %d golden cases ran, want at least 13", ran)
	}
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
		p := backend.Prompt{Prefill: rows, Trailing: rowsOf(trailing[b*tshape[1]*H:(b+1)*tshape[1]*H], H), TTSPad: c.F32("tts_pad_embed")}
		suffix := fmt.Sprintf("_%d", b)
		want := codesOf(c.I64("codes" + suffix))
		run := runLM(t, lm, p, greedyOptions(len(want)))
		summary := compareRun(t, c, run, suffix, 1e-4)
		same := checkCodes(t, c.Name+suffix, run.codes, want)
		t.Logf("%s (%d prefill rows), codes %d/%d exact", summary, len(rows), same, len(want)*backend.NumGroups)

		// The item equals the member's own single run.
		single := golden.OpenCase(t, members[b].(string))
		sp := backend.Prompt{Prefill: rowsOf(single.F32("prefill_embeds"), H),
			Trailing: rowsOf(single.F32("trailing_text_hidden"), H), TTSPad: single.F32("tts_pad_embed")}
		alone := runLM(t, lm, sp, greedyOptions(len(want)))
		checkCodes(t, single.Name+" single vs batch item", alone.codes, run.codes)
		if d := golden.MaxAbsDiff(flat(alone.talkerLogits), flat(run.talkerLogits)); d > 1e-5 {
			t.Errorf("%s: single-run logits differ from batch item %d by %g", single.Name, b, d)
		}
	}
}

// TestGoldenBF16TeacherForced compares the float32 engine with the official
// bfloat16 run, feeding the bf16 run's own codes back (free-running greedy
// diverges in bf16), against the manifest's bf16 tolerance.
func TestGoldenBF16TeacherForced(t *testing.T) {
	golden.Require(t)
	c := golden.OpenCase(t, "cv_en_ryan_nonstream__bf16")
	ref := golden.OpenCase(t, "cv_en_ryan_nonstream") // same utterance: its text rows
	lm := goldenLM(t, c.Checkpoint)
	H := lm.spec.Hidden
	teacher := codesOf(c.I64("codes"))
	p := backend.Prompt{Prefill: rowsOf(c.F32("prefill_embeds"), H),
		Trailing: rowsOf(ref.F32("trailing_text_hidden"), H), TTSPad: ref.F32("tts_pad_embed")}
	opt := greedyOptions(len(teacher))
	opt.TeacherCodes = teacher
	run := runLM(t, lm, p, opt)
	checkCodes(t, "teacher-forced codes are the teacher's", run.codes, teacher)
	wantLogits := c.F32("talker_logits")
	dl := golden.AssertClose(t, "bf16 talker_logits", flat(run.talkerLogits), wantLogits, golden.ActivationTol(wantLogits, 5e-2))
	wantCP := c.F32("code_predictor_logits_frame0")
	dc := golden.AssertClose(t, "bf16 code_predictor_logits_frame0", flat(run.cpLogits[0]), wantCP, golden.ActivationTol(wantCP, 5e-2))
	t.Logf("bf16 teacher-forced: talker_logits max diff %.3g (tol %.3g), cp_logits_f0 %.3g (tol %.3g)",
		dl, golden.ActivationTol(wantLogits, 5e-2), dc, golden.ActivationTol(wantCP, 5e-2))
	if math.IsInf(dl, 0) || math.IsInf(dc, 0) {
		t.Fatal("missing logits")
	}
}
