package settings

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "settings.json")
	want := Settings{Model: "/models/Qwen--Qwen3-TTS-12Hz-0.6B-CustomVoice", Voice: "ryan", Language: "english",
		Instruct: "calm and slow", Draft: "Unsent text\nover two lines.", Width: 1300, Height: 900,
		HistoryMB: 120, ExportFormat: "flac", Theme: "dark", Volume: 135, Speed: 1.75,
		OutputDevice: "Built-in Audio Analog Stereo", Details: true, Precision: "f32"}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = version
	if got != want {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	// No temporary files are left next to it.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("folder holds %d files, want only settings.json", len(entries))
	}
}

func TestMissingFileGivesDefaults(t *testing.T) {
	got, err := Load(filepath.Join(t.TempDir(), "none.json"))
	if err != nil || got != Defaults() {
		t.Fatalf("Load of a missing file = %+v, %v; want the defaults", got, err)
	}
}

func TestCorruptFileReportedAndReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	damaged := []byte(`{"model": "/m", "draft": "half writ`)
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Load of a damaged file: err = %v, want *CorruptError", err)
	}
	if got != Defaults() {
		t.Fatalf("damaged file gave %+v, want the defaults", got)
	}
	kept, rerr := os.ReadFile(ce.Kept)
	if rerr != nil || string(kept) != string(damaged) {
		t.Fatalf("damaged file not kept aside (%q, %v)", ce.Kept, rerr)
	}
	// Saving again works and loads clean.
	s := Defaults()
	s.Voice = "vivian"
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path); err != nil || got.Voice != "vivian" {
		t.Fatalf("after recovery: %+v, %v", got, err)
	}
}

func TestOutOfRangeValuesFallBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"width": 5, "height": 99999, "history_mb": -3, "export_format": "mp3", "voice": "aiden",
		"volume": 151, "speed": 2.5, "precision": "f16"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if got.Width != d.Width || got.Height != d.Height || got.HistoryMB != d.HistoryMB || got.ExportFormat != d.ExportFormat ||
		got.Volume != d.Volume || got.Speed != d.Speed || got.Precision != d.Precision {
		t.Fatalf("out-of-range values kept: %+v", got)
	}
	if got.Voice != "aiden" || got.Language != "auto" {
		t.Fatalf("valid values lost: %+v", got)
	}
}

func TestDirHonoursEnv(t *testing.T) {
	t.Setenv(EnvConfig, "/tmp/tb-config")
	if p, err := Path(); err != nil || p != "/tmp/tb-config/settings.json" {
		t.Fatalf("Path = %q, %v", p, err)
	}
}

// The theme is kept when it is one the window knows, else dropped.
func TestThemeKeptOrDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	for in, want := range map[string]string{"dark": "dark", "light": "light", "": "", "purple": ""} {
		s := Defaults()
		s.Theme = in
		if err := Save(path, s); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if err != nil || got.Theme != want {
			t.Errorf("theme %q: loaded %q (%v), want %q", in, got.Theme, err, want)
		}
	}
}

// A file written before the player settings existed loads with full
// volume and normal speed (not 0, which would be silent or refused), the
// default device and the panel folded; a volume of 0 (muted) is kept.
func TestPlayerFieldsDefaultAndZero(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "voice": "ryan", "width": 1040, "height": 700}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Volume != DefaultVolume || got.Speed != 1 || got.OutputDevice != "" || got.Details || got.Precision != "" {
		t.Fatalf("old file: %+v", got)
	}
	got.Volume, got.Speed = 0, 0.5
	if err := Save(path, got); err != nil {
		t.Fatal(err)
	}
	if again, err := Load(path); err != nil || again.Volume != 0 || again.Speed != 0.5 {
		t.Fatalf("muted at half speed came back as %+v (%v)", again, err)
	}
}
