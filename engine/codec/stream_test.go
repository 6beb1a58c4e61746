package codec

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/backendtest"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

// TestBackendSuite: the codec contract (golden waveforms at waveTol, pushes
// of any sizes equal to one push at 1e-5, bad codes, several streams).
func TestBackendSuite(t *testing.T) {
	backendtest.CodecSuite{
		Open: func(t *testing.T, dir string) backend.Codec { return goldenDecoder(t, dir) },
		Checkpoints: []string{"qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-base", "qwen3-tts-tiny-customvoice-1b7",
			"qwen3-tts-tiny-voicedesign-1b7"},
		WaveTol:  waveTol,
		SplitTol: 1e-5,
		BadCode:  ErrBadCode,
		MinCases: 10,
	}.Run(t)
}

// TestStreamingEqualsFullPass: a stream pushed frame by frame equals one
// decoder pass over all frames. 100 frames cross the 72-frame attention
// window, so the K/V trimming and the RoPE positions carried between pushes
// are exercised.
func TestStreamingEqualsFullPass(t *testing.T) {
	d := goldenDecoder(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	codes := backendtest.RandomCodes(2024, 100, d.cfg.CodebookSize)
	full, err := d.DecodeFull(codes)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != len(codes)*d.SamplesPerFrame() {
		t.Fatalf("full pass gave %d samples, want %d", len(full), len(codes)*d.SamplesPerFrame())
	}
	got := backendtest.Decode(t, d, codes, 1)
	if diff := golden.MaxAbsDiff(got, full); diff > 1e-5 {
		t.Errorf("frame by frame: max abs diff %.3g vs the full pass", diff)
	}
}

// TestBadCodes: out-of-range codes and empty input are errors of the
// one-shot decodes too, never panics (the suite covers streams).
func TestBadCodes(t *testing.T) {
	d := goldenDecoder(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	good := backend.Codes{}
	for _, bad := range []int32{-1, 2048, 2150, 1 << 30} {
		fr := good
		fr[7] = bad
		frames := []backend.Codes{good, fr}
		if _, err := d.DecodeOfficial(frames); !errors.Is(err, ErrBadCode) || !strings.Contains(err.Error(), "frame 1 group 7") {
			t.Errorf("code %d: DecodeOfficial error %v, want ErrBadCode naming frame 1 group 7", bad, err)
		}
	}
	if _, err := d.DecodeOfficial(nil); !errors.Is(err, ErrNoFrames) {
		t.Errorf("no frames: %v, want ErrNoFrames", err)
	}
	if _, err := d.DecodeChunked([]backend.Codes{good}, 0, 3); err == nil {
		t.Error("chunk size 0 accepted")
	}
}

// TestMismatchedCheckpoint: a codec file with a missing and a mis-shaped
// tensor is rejected with model.ErrIncompleteCheckpoint naming both.
func TestMismatchedCheckpoint(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	cfg, err := model.ReadCodecConfig(filepath.Join(dir, "speech_tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := safetensors.Open(filepath.Join(dir, "speech_tokenizer", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const missing = "decoder.pre_conv.conv.bias"
	const reshaped = "decoder.pre_transformer.norm.weight"
	var ts []safetensors.WriteTensor
	for _, name := range src.Names() {
		info, raw, err := src.Raw(name)
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case missing:
			continue
		case reshaped:
			ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: []int{1, len(raw) / 4}, Data: raw})
			continue
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = NewFromFile(cfg, f)
	if !errors.Is(err, model.ErrIncompleteCheckpoint) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), reshaped) {
		t.Fatalf("error %v: want ErrIncompleteCheckpoint naming %s and %s", err, missing, reshaped)
	}
	if _, err := New(&model.Model{}); !errors.Is(err, model.ErrIncompleteCheckpoint) {
		t.Errorf("model without codec: %v", err)
	}
}
