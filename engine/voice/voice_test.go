package voice

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

func TestValidName(t *testing.T) {
	for _, ok := range []string{"Anna", "my voice 2", "Zoë", "日本語", "o'neil (take-2)", "a.b"} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a/b", `a\b`, "../x", "..", ".hidden", " lead", "trail ", "a:b", "nul\x00", "tab\t",
		"a*b", strings.Repeat("x", 65), "\xff\xfe"} {
		if err := ValidName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func tone(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(0.3 * math.Sin(float64(i)/9))
	}
	return x
}

func TestSaveLoadListRemove(t *testing.T) {
	lib := &Library{Dir: filepath.Join(t.TempDir(), "voices")}
	if vs, errs := lib.List(); len(vs) != 0 || len(errs) != 0 {
		t.Fatalf("missing folder: %v %v", vs, errs)
	}
	v := &Voice{Name: "Anna K", Transcript: "Hello there.", Audio: tone(48000), Source: "anna.wav",
		Derived: map[string]Derived{"06b-abc": {XVector: []float32{1, 2, 3}, Codes: []backend.Codes{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 2047}}}}}
	if err := lib.Save(v); err != nil {
		t.Fatal(err)
	}
	if err := lib.Save(&Voice{Name: "bob", Audio: tone(30000)}); err != nil {
		t.Fatal(err)
	}
	got, err := lib.Load("anna k") // names match case-insensitively
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Anna K" || got.Transcript != v.Transcript || got.Mode() != "icl" || got.Source != "anna.wav" ||
		len(got.Audio) != 48000 || got.Audio[100] != v.Audio[100] || got.Created.IsZero() {
		t.Fatalf("loaded %+v", got)
	}
	d := got.Derived["06b-abc"]
	if len(d.XVector) != 3 || d.XVector[2] != 3 || len(d.Codes) != 1 || d.Codes[0][15] != 2047 {
		t.Fatalf("derived %+v", d)
	}
	// A damaged file and an unrelated file: reported / ignored, never fatal.
	os.WriteFile(filepath.Join(lib.Dir, "broken.voice"), []byte("garbage"), 0o644)
	os.WriteFile(filepath.Join(lib.Dir, "notes.txt"), []byte("hi"), 0o644)
	b, _ := os.ReadFile(filepath.Join(lib.Dir, "bob.voice"))
	os.WriteFile(filepath.Join(lib.Dir, "cut.voice"), b[:len(b)/2], 0o644)
	vs, errs := lib.List()
	if len(vs) != 2 || vs[0].Name != "Anna K" || vs[1].Name != "bob" || vs[1].Mode != "x-vector" || len(errs) != 2 {
		t.Fatalf("list: %+v, errors %v", vs, errs)
	}
	for _, e := range errs {
		if !errors.Is(e, ErrCorrupt) {
			t.Errorf("damaged file error %v is not ErrCorrupt", e)
		}
	}
	if _, err := lib.Load("cut"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("load of a truncated voice: %v", err)
	}
	if _, err := lib.Load("nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("load missing: %v", err)
	}
	if err := lib.Remove("BOB"); err != nil {
		t.Fatal(err)
	}
	if err := lib.Remove("bob"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second remove: %v", err)
	}
	if err := lib.Save(&Voice{Name: "../x", Audio: tone(10)}); !errors.Is(err, ErrBadName) {
		t.Errorf("save with a path name: %v", err)
	}
	// No temporary files left behind.
	ents, _ := os.ReadDir(lib.Dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
}

// TestDeriveGolden: the encoders of the tiny Base checkpoint give the golden
// x-vector and codes, store them under the model key, and a second Derive
// reuses them.
func TestDeriveGolden(t *testing.T) {
	c := golden.OpenCase(t, "speaker_encoder_and_speech_encode")
	m, err := model.Load(golden.Checkpoint(t, "qwen3-tts-tiny-base"), model.Options{RequireCodec: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	enc, err := NewEncoders(m)
	if err != nil {
		t.Fatal(err)
	}
	v := &Voice{Name: "g", Transcript: "ref", Audio: c.F32("ref_audio")}
	d, added, err := enc.Derive(v)
	if err != nil || !added {
		t.Fatalf("derive: %v (added %v)", err, added)
	}
	spk := c.F32("spk_embedding")
	golden.AssertClose(t, "x-vector", d.XVector, spk, golden.ActivationTol(spk, 1e-4))
	golden.AssertCodes(t, "reference codes", d.Codes, c.I64("encode_codes"))
	if _, added, _ := enc.Derive(v); added {
		t.Error("second derive recomputed")
	}
	if !strings.HasPrefix(enc.Key(), "06b-") || len(v.Derived) != 1 {
		t.Errorf("key %q, derived %d", enc.Key(), len(v.Derived))
	}
	cv, err := model.Load(golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), model.Options{RequireCodec: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	if _, err := NewEncoders(cv); err == nil || !strings.Contains(err.Error(), "only Base") {
		t.Errorf("CustomVoice encoders: %v", err)
	}
}
