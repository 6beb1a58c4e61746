package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open blocked on a FIFO")
	}
	for _, p := range []string{"/dev/zero", dir} {
		if _, err := ReadFile(p, 10); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestReadFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	if b, err := ReadFile(p, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ReadFile(p, 9); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "at most 9") {
		t.Fatalf("over the limit: %v", err)
	}
	link := filepath.Join(t.TempDir(), "l")
	os.Symlink(p, link)
	if _, err := ReadFile(link, 10); err != nil {
		t.Fatalf("link to a regular file: %v", err)
	}
}
