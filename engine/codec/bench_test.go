package codec

import (
	"math"
	"path/filepath"
	"talkbox/engine/backendtest"
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// TestBenchStreamingReportsEveryStage runs the benchmark helper on random
// weights at the tiny golden shapes (not a timing test): every stage is
// reported once, in pipeline order, and the synthetic decoder's audio is
// finite and clamped.
func TestBenchStreamingReportsEveryStage(t *testing.T) {
	cfg, err := model.ReadCodecConfig(filepath.Join(golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), "speech_tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewSynthetic(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	res := BenchStreaming(d, 4, 1)
	want := []string{"quantizer", "pre_conv", "pre_transformer", "upsample0", "upsample1",
		"decoder0", "decoder1", "decoder2", "decoder3", "decoder4", "decoder5", "decoder6"}
	if len(res.StageOrder) != len(want) {
		t.Fatalf("stages %v, want %v", res.StageOrder, want)
	}
	for i, s := range want {
		if res.StageOrder[i] != s {
			t.Errorf("stage %d is %s, want %s", i, res.StageOrder[i], s)
		}
		if _, ok := res.StageMS[s]; !ok {
			t.Errorf("no time for stage %s", s)
		}
	}
	if res.MedianMS <= 0 || res.Frames != 4 {
		t.Errorf("result %+v", res)
	}
	wav, err := d.DecodeFull(backendtest.RandomCodes(5, 3, cfg.Decoder.CodebookSize))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range wav {
		if math.IsNaN(float64(v)) || v < -1 || v > 1 {
			t.Fatalf("sample %d = %v", i, v)
		}
	}
}
