package codec

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 99)) }

func randomCodes(r *rand.Rand, n, size int) []backend.Codes {
	out := make([]backend.Codes, n)
	for i := range out {
		for g := range out[i] {
			out[i][g] = int32(r.IntN(size))
		}
	}
	return out
}

// TestStreamingEqualsFullPass pushes the same frames in random splits (seeded)
// and requires the concatenated output to equal one decoder pass. 100 frames
// cross the 72-frame attention window, so the K/V trimming and the RoPE
// positions carried between pushes are exercised.
func TestStreamingEqualsFullPass(t *testing.T) {
	d := goldenDecoder(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	r := rand.New(rand.NewPCG(2024, 7))
	codes := randomCodes(r, 100, d.cfg.CodebookSize)
	full, err := d.DecodeFull(codes)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != len(codes)*d.SamplesPerFrame() {
		t.Fatalf("full pass gave %d samples, want %d", len(full), len(codes)*d.SamplesPerFrame())
	}
	for trial := 0; trial < 4; trial++ {
		cs, err := d.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		var got []float32
		var sizes []int
		for i := 0; i < len(codes); {
			n := r.IntN(12) // 0 is allowed: an empty push must be harmless
			if trial == 0 {
				n = 1 // frame by frame, the real-time case
			}
			n = min(n, len(codes)-i)
			w, err := cs.Push(codes[i : i+n])
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != n*d.SamplesPerFrame() {
				t.Fatalf("push of %d frames gave %d samples", n, len(w))
			}
			got = append(got, w...)
			sizes = append(sizes, n)
			i += n
		}
		diff := golden.MaxAbsDiff(got, full)
		if diff > 1e-5 {
			t.Errorf("split %v: max abs diff %.3g vs the full pass", sizes, diff)
		}
		t.Logf("trial %d: %d pushes, max abs diff %.3g", trial, len(sizes), diff)
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Push(codes[:1]); !errors.Is(err, ErrClosed) {
			t.Errorf("push after close: %v, want ErrClosed", err)
		}
	}
}

// TestBadCodes: out-of-range codes and empty input are errors, never panics.
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
		s, _ := d.NewStream()
		if _, err := s.Push(frames); !errors.Is(err, ErrBadCode) {
			t.Errorf("code %d: Push error %v, want ErrBadCode", bad, err)
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
