package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRepo(t *testing.T) {
	cases := map[string]string{
		"":                                      DefaultRepo,
		"0.6b-customvoice":                      "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
		"0.6B-Base":                             "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
		"1.7b":                                  "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
		"1.7b-voicedesign":                      "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign",
		"qwen/qwen3-tts-12hz-1.7b-base":         "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
		"Qwen3-TTS-12Hz-1.7B-CustomVoice":       "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
		"Qwen--Qwen3-TTS-12Hz-0.6B-Base":        "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
		"someone/my-finetune":                   "someone/my-finetune",
		" Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice": "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
	}
	for in, want := range cases {
		got, err := ParseRepo(in)
		if err != nil || got != want {
			t.Errorf("ParseRepo(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"nonsense", "../etc/passwd", "a/b/c", "a/..", "/abs"} {
		if _, err := ParseRepo(bad); err == nil {
			t.Errorf("ParseRepo(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "0.6b-customvoice") {
			t.Errorf("ParseRepo(%q) error lists no known names: %v", bad, err)
		}
	}
}

func TestDefaultModelsDir(t *testing.T) {
	t.Setenv(EnvModels, "")
	t.Setenv("XDG_DATA_HOME", "/data/x")
	if d, _ := DefaultModelsDir(); d != "/data/x/talkbox/models" {
		t.Fatalf("XDG_DATA_HOME: %s", d)
	}
	t.Setenv("XDG_DATA_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/u")
	if d, _ := DefaultModelsDir(); d != "/home/u/.local/share/talkbox/models" {
		t.Fatalf("HOME fallback: %s", d)
	}
	t.Setenv(EnvModels, "/m")
	if d, _ := DefaultModelsDir(); d != "/m" {
		t.Fatalf("%s: %s", EnvModels, d)
	}
}

// TestResolveAndList pulls one model, fakes a broken one, and checks that
// names, aliases and paths resolve and that the listing says what is wrong.
func TestResolveAndList(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	dir, err := s.Pull(context.Background(), testRepo, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A half-copied 1.7B model: configs and weights but no speech tokenizer.
	broken := s.ModelDir("Qwen/Qwen3-TTS-12Hz-1.7B-Base")
	os.MkdirAll(broken, 0o755)
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer_config.json"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		os.WriteFile(filepath.Join(broken, f), b, 0o644)
	}

	for _, name := range []string{"", "0.6b-customvoice", testRepo, "qwen3-tts-12hz-0.6b-customvoice", "Qwen--Qwen3-TTS-12Hz-0.6B-CustomVoice", dir} {
		got, err := s.Resolve(name)
		if err != nil || got != dir {
			t.Errorf("Resolve(%q) = %q, %v; want %s", name, got, err, dir)
		}
	}
	// A relative path resolves to an absolute folder.
	t.Chdir(s.Dir)
	if got, err := s.Resolve("./" + filepath.Base(dir)); err != nil || got != dir {
		t.Errorf("relative path: %q, %v", got, err)
	}
	if got, err := s.Resolve("1.7b-base"); err != nil || got != broken {
		t.Errorf("broken model by alias: %q, %v", got, err)
	}

	_, err = s.Resolve("1.7b-voicedesign")
	if !errors.Is(err, ErrNoModel) {
		t.Fatalf("not installed: %v", err)
	}
	for _, want := range []string{"0.6b-customvoice", "1.7b-base (incomplete)", "talkbox pull 1.7b-voicedesign"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("not-found error %q lacks %q", err, want)
		}
	}
	if _, err := s.Resolve("/no/such/folder"); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing path: %v", err)
	}

	list, err := s.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v, %+v", err, list)
	}
	byAlias := map[string]Installed{}
	for _, in := range list {
		byAlias[in.Alias] = in
	}
	good, bad := byAlias["0.6b-customvoice"], byAlias["1.7b-base"]
	if !good.Complete || good.Problem != "" || good.SizeName != "0.6B" {
		t.Errorf("complete model listed as %+v", good)
	}
	if bad.Complete || !strings.Contains(bad.Problem, "speech_tokenizer") {
		t.Errorf("model without speech_tokenizer listed as %+v", bad)
	}

	// With no complete model, "" names the fix.
	empty := &Store{Dir: t.TempDir()}
	if _, err := empty.Resolve(""); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "talkbox pull") {
		t.Errorf("empty store: %v", err)
	}
}
