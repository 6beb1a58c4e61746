package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/safetensors"
)

var tinyCheckpoints = []string{"qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-base", "qwen3-tts-tiny-customvoice-1b7", "qwen3-tts-tiny-voicedesign-1b7"}

func TestLoadGoldenCheckpoints(t *testing.T) {
	for _, name := range tinyCheckpoints {
		t.Run(name, func(t *testing.T) {
			m, err := Load(golden.Checkpoint(t, name), Options{RequireCodec: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Config.Talker.RopeTheta; got != 1e6 {
				t.Errorf("rope_theta %v, want the file's 1e6", got)
			}
			if m.Config.Talker.CodecEosID != 2150 || m.Config.Talker.CodecPadID != 2148 {
				t.Errorf("codec ids not read from the file: %+v", m.Config.Talker)
			}
			if m.Generation.RepetitionPenalty != 1.05 || m.Generation.TopK != 50 || m.Generation.MaxNewTokens != 8192 {
				t.Errorf("generation config %+v", m.Generation)
			}
			if got := m.Codec.Decoder.SamplesPerFrame(); got != 1920 {
				t.Errorf("samples per frame %d", got)
			}
			if m.Codec.Decoder.SlidingWindow != 72 {
				t.Errorf("sliding window %d", m.Codec.Decoder.SlidingWindow)
			}
		})
	}
}

func TestSpeakersAndLanguages(t *testing.T) {
	cfg, err := ReadConfig(golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	if err != nil {
		t.Fatal(err)
	}
	sp := cfg.Speakers()
	if len(sp) != 9 {
		t.Fatalf("%d speakers, want 9", len(sp))
	}
	found := false
	for _, s := range sp {
		if s.Name == "eric" {
			found = true
			if s.Dialect != "sichuan_dialect" || s.CodecID != 2875 {
				t.Errorf("eric = %+v", s)
			}
		}
	}
	if !found {
		t.Error("eric missing")
	}
	langs := cfg.Languages()
	if langs[0] != "auto" || len(langs) != 11 {
		t.Errorf("languages %v", langs)
	}
	for _, l := range langs {
		if strings.Contains(l, "dialect") {
			t.Errorf("dialect %q offered as a language", l)
		}
	}
	if cfg.SupportsInstruct() {
		t.Error("0.6B CustomVoice must not take instruct text")
	}
	vd, err := ReadConfig(golden.Checkpoint(t, "qwen3-tts-tiny-voicedesign-1b7"))
	if err != nil {
		t.Fatal(err)
	}
	if !vd.SupportsInstruct() || len(vd.Speakers()) != 0 {
		t.Error("VoiceDesign: instruct yes, speakers none")
	}
}

// copyCheckpoint copies the small files of a checkpoint and lets the caller
// replace model.safetensors.
func copyCheckpoint(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestWrongAndMissingTensorsNamed(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	orig, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	var ts []safetensors.WriteTensor
	for _, name := range orig.Names() {
		info, raw, _ := orig.Raw(name)
		switch name {
		case "talker.codec_head.weight", "talker.model.layers.1.mlp.up_proj.weight":
			continue // drop two
		case "talker.model.norm.weight":
			// wrong shape: one element short
			ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: []int{info.Shape[0] - 1}, Data: raw[:len(raw)-2]})
			continue
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	dir := copyCheckpoint(t, src)
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, Options{})
	if !errors.Is(err, ErrIncompleteCheckpoint) {
		t.Fatalf("want ErrIncompleteCheckpoint, got %v", err)
	}
	for _, want := range []string{"model.safetensors", "2 missing", "talker.codec_head.weight", "talker.model.layers.1.mlp.up_proj.weight", "talker.model.norm.weight has shape [63], want [64]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestTruncatedCheckpoint(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	b, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	dir := copyCheckpoint(t, src)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, Options{})
	if !errors.Is(err, safetensors.ErrFormat) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("want a truncation error naming the file, got %v", err)
	}
}

func TestMissingSpeechTokenizer(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := copyCheckpoint(t, src)
	if err := os.Symlink(filepath.Join(src, "model.safetensors"), filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, Options{}); err != nil {
		t.Fatalf("LM-only load: %v", err)
	}
	if _, err := Load(dir, Options{RequireCodec: true}); !errors.Is(err, ErrIncompleteCheckpoint) {
		t.Fatalf("want ErrIncompleteCheckpoint, got %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	if _, err := Load(dir, Options{}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("want ErrBadConfig, got %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{not json`), 0o644)
	if _, err := Load(dir, Options{}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("want ErrBadConfig, got %v", err)
	}
}
