package model

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"talkbox/engine/golden"
	"talkbox/engine/safetensors"
	"talkbox/internal/regfile"
)

// setConfig rewrites one key path of dir/config.json.
func setConfig(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.Marshal(m)
	os.WriteFile(p, b, 0o644)
}

// num_hidden_layers 10^6 used to build a tensor list of 11 million names and
// a 567 MB error line; now the config is refused, naming the limit, before
// anything is sized from it.
func TestHugeLayerCountRefused(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := copyCheckpoint(t, src)
	os.Symlink(filepath.Join(src, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
	setConfig(t, dir, func(m map[string]any) { m["talker_config"].(map[string]any)["num_hidden_layers"] = 1000000 })
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load(dir, Options{})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "num_hidden_layers is 1000000, more than the 512") {
		t.Fatalf("got %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("loading allocated %d MB", grew>>20)
	}
}

func TestCodecConfigLimits(t *testing.T) {
	src := filepath.Join(golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), "speech_tokenizer")
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		val  any
		want string
	}{
		{"num_hidden_layers", 1 << 30, "decoder num_hidden_layers"},
		{"upsample_rates", []int{64, 64, 64, 64}, "samples per frame"},
		{"upsampling_ratios", []int{0}, "upsampling factor 0"},
		{"upsample_rates", make([]int, 100), "upsample_rates entries"},
	} {
		var m map[string]any
		json.Unmarshal(b, &m)
		m["decoder_config"].(map[string]any)[tc.key] = tc.val
		nb, _ := json.Marshal(m)
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), nb, 0o644)
		if _, err := ReadCodecConfig(dir); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%v: %v", tc.key, tc.val, err)
		}
	}
}

// Thousands of missing tensors make an error of a few lines: the first few
// names and a count.
func TestMissingTensorsErrorIsCapped(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := copyCheckpoint(t, src)
	setConfig(t, dir, func(m map[string]any) { m["talker_config"].(map[string]any)["num_hidden_layers"] = 500 })
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), []safetensors.WriteTensor{{Name: "x", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)}}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, Options{})
	if !errors.Is(err, ErrIncompleteCheckpoint) {
		t.Fatalf("got %v", err)
	}
	if len(err.Error()) > 1000 || !strings.Contains(err.Error(), "more") {
		t.Fatalf("error of %d bytes: %.300s", len(err.Error()), err)
	}
}

// A FIFO or a device in place of a checkpoint file is refused with its path
// instead of blocking the load forever.
func TestSpecialFilesRefused(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	for _, which := range []string{"config.json", "model.safetensors"} {
		dir := copyCheckpoint(t, src)
		os.Symlink(filepath.Join(src, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
		p := filepath.Join(dir, which)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skip("mkfifo:", err)
		}
		done := make(chan error, 1)
		go func() { _, err := Load(dir, Options{}); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s as a FIFO: %v", which, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load blocked on a FIFO %s", which)
		}
	}
	dir := copyCheckpoint(t, src)
	os.Symlink("/dev/zero", filepath.Join(dir, "model.safetensors"))
	if _, err := Load(dir, Options{}); !errors.Is(err, regfile.ErrNotRegular) {
		t.Errorf("/dev/zero as weights: %v", err)
	}
}

// A NaN or Inf in a weight is reported at load, naming the tensor; before,
// the checkpoint loaded and synthesis failed later with "no finite logit".
func TestNonFiniteWeightsNamed(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	orig, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	const victim = "talker.model.layers.0.mlp.up_proj.weight"
	var ts []safetensors.WriteTensor
	for _, name := range orig.Names() {
		info, raw, _ := orig.Raw(name)
		data := raw
		if name == victim {
			data = append([]byte(nil), raw...)
			v := make([]float32, info.Elements())
			v[7] = float32(math.NaN())
			switch info.DType {
			case safetensors.BF16:
				copy(data, safetensors.BF16Bytes(v[:8]))
			case safetensors.F32:
				copy(data, safetensors.F32Bytes(v[:8]))
			default:
				t.Fatalf("dtype %s", info.DType)
			}
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: info.Shape, Data: data})
	}
	dir := copyCheckpoint(t, src)
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(src, "speech_tokenizer"), filepath.Join(dir, "speech_tokenizer"))
	_, err = Load(dir, Options{RequireCodec: true})
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), victim+" (element 7)") {
		t.Fatalf("got %v", err)
	}
}
