package voice

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"talkbox/engine/backend"
)

// FuzzReadFile: any bytes in a voice file load without panic, or fail with
// ErrCorrupt; what loads has audio and codes in range.
func FuzzReadFile(f *testing.F) {
	lib := &Library{Dir: f.TempDir()}
	seed := &Voice{Name: "Seed", Transcript: "hello", Audio: []float32{0.1, -0.2, 0.3}, Source: "test",
		Derived: map[string]Derived{"k": {XVector: []float32{1, 2}, Codes: []backend.Codes{{1, 2, 3}}}}}
	if err := lib.Save(seed); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(lib.Dir, "seed"+Ext))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "seed"+Ext)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := readFile(p)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if len(v.Audio) == 0 || len(v.Audio) > len(b)/4 {
			t.Fatalf("%d samples from %d bytes", len(v.Audio), len(b))
		}
		for _, d := range v.Derived {
			for _, row := range d.Codes {
				for _, c := range row {
					if c < 0 || c > 1<<20 {
						t.Fatalf("code %d", c)
					}
				}
			}
		}
	})
}

// A FIFO named like a voice file is reported as a damaged voice at once;
// before, List and Load blocked on it forever.
func TestSpecialVoiceFileRefused(t *testing.T) {
	lib := &Library{Dir: t.TempDir()}
	if err := syscall.Mkfifo(filepath.Join(lib.Dir, "pipe"+Ext), 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := lib.Load("pipe"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
