// Package nativelib finds Talkbox's native libraries (built by `make native`
// into native/build/) for the packages that dlopen them, so a binary finds
// them the same way wherever it runs.
package nativelib

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvDir names a directory holding the libraries, or one library file (its
// directory is then searched for the others).
const EnvDir = "TALKBOX_NATIVE"

// Candidates lists where the library file name is looked for, in order: next
// to the executable, $TALKBOX_NATIVE, native/build/ under the working
// directory and under the nearest ancestor holding go.mod (tests run in
// package folders).
func Candidates(name string) []string {
	var out []string
	if exe, err := os.Executable(); err == nil {
		out = append(out, filepath.Join(filepath.Dir(exe), name))
	}
	if v := os.Getenv(EnvDir); v != "" {
		if st, err := os.Stat(v); err == nil && st.IsDir() {
			v = filepath.Join(v, name)
		} else if filepath.Base(v) != name {
			v = filepath.Join(filepath.Dir(v), name)
		}
		out = append(out, v)
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, filepath.Join(wd, "native", "build", name))
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				out = append(out, filepath.Join(d, "native", "build", name))
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return out
}

// Find returns the first candidate that exists, or an error naming every
// place looked at and how to build the library.
func Find(name, makeTarget string) (string, error) {
	paths := Candidates(name)
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (looked at %s; build it with `make %s` or set %s)",
		name, strings.Join(paths, ", "), makeTarget, EnvDir)
}
