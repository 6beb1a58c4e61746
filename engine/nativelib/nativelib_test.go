package nativelib

import (
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
