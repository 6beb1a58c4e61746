package settings

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"talkbox/internal/regfile"
)

// FuzzLoad: any settings file loads without panic to usable values; a
// damaged one is a *CorruptError and is kept aside, never lost.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"width": 1040, "height": 700, "language": "auto", "export_format": "flac"}`))
	f.Add([]byte(`{"width": -1, "height": 1e12}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`{"volume": 150, "speed": 0.5, "output_device": "USB", "details": true, "precision": "f32"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "settings.json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(p)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a CorruptError: %v", err)
			}
			if got, _ := os.ReadFile(ce.Kept); string(got) != string(b) {
				t.Fatalf("damaged file not kept aside")
			}
		}
		if s.Width < minWidth || s.Width > maxSide || s.Height < minHeight || s.Height > maxSide || s.HistoryMB <= 0 ||
			s.Volume < 0 || s.Volume > MaxVolume || !(s.Speed >= MinSpeed && s.Speed <= MaxSpeed) ||
			(s.Precision != "" && s.Precision != "int8" && s.Precision != "f32") {
			t.Fatalf("unusable settings %+v", s)
		}
	})
}

// A FIFO in place of the settings file gives the defaults and an error at
// once; before, Load blocked the window's start forever.
func TestLoadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "settings.json")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(p); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, regfile.ErrNotRegular) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
