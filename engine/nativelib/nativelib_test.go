package nativelib

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindHonoursEnvDirAndFile(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libx.so")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, dir)
	if got, err := Find("libx.so", "native"); err != nil || got != lib {
		t.Fatalf("dir: %q %v", got, err)
	}
	// A file path of another library: look beside it.
	t.Setenv(EnvDir, filepath.Join(dir, "libother.so"))
	if got, err := Find("libx.so", "native"); err != nil || got != lib {
		t.Fatalf("beside a file: %q %v", got, err)
	}
	t.Setenv(EnvDir, t.TempDir())
	_, err := Find("libx.so", "native")
	if err == nil || !strings.Contains(err.Error(), "make native") || !strings.Contains(err.Error(), "looked at") {
		t.Fatalf("missing library: %v", err)
	}
}

func TestMissingLibraryIsUnavailable(t *testing.T) {
	for _, l := range []*Library{LM, Codec} {
		err := l.Open(filepath.Join(t.TempDir(), l.File))
		if !errors.Is(err, l.ErrUnavailable) || !strings.Contains(err.Error(), l.File) {
			t.Fatalf("%s: error %v does not wrap ErrUnavailable or name the file", l.File, err)
		}
	}
}

// A file that is not a shared library is refused the same way, and an
// earlier load is not disturbed.
func TestNotALibraryIsUnavailable(t *testing.T) {
	p := filepath.Join(t.TempDir(), LM.File)
	if err := os.WriteFile(p, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := LM.Open(p); !errors.Is(err, LM.ErrUnavailable) {
		t.Fatalf("error %v does not wrap ErrUnavailable", err)
	}
}
