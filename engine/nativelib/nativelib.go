// Package nativelib loads Talkbox's native libraries (built by `make native`
// into native/build/) at run time: it finds them the same way wherever a
// binary runs, dlopens them, checks their ABI version, and holds the one C
// shim (loader.h, loader.c) through which engine/cuda and engine/cudacodec
// call them. Binaries therefore link and run with no CUDA toolkit, library
// or GPU; a missing piece is an error wrapping the library's ErrUnavailable.
package nativelib

/*
#cgo CFLAGS: -I${SRCDIR}/../../native/include
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "loader.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// Library is one native library: where it is built, which ABI this tree's
// headers describe, and its load state (loaded once per process).
type Library struct {
	// File is the library's file name (in native/build/ or beside the binary).
	File string
	// MakeTarget builds it.
	MakeTarget string
	// ErrUnavailable is wrapped by every reason the library cannot be used
	// (missing, another ABI, no driver, no GPU).
	ErrUnavailable error

	id   C.int
	abi  int
	once sync.Once
	path string
	err  error
}

// The two libraries. Their wrappers are the nl_tb_* and nl_tbc_* functions
// of loader.h, valid once Load has succeeded.
var (
	LM = &Library{File: "libtalkbox_native.so", MakeTarget: "native",
		ErrUnavailable: errors.New("cuda backend unavailable"), id: C.NL_LM, abi: C.TB_ABI_VERSION}
	Codec = &Library{File: "libtalkbox_codec.so", MakeTarget: "native-codec",
		ErrUnavailable: errors.New("cuda codec unavailable"), id: C.NL_CODEC, abi: C.TBC_ABI_VERSION}
)

// Load finds and dlopens the library once, and checks that its ABI version
// is the one this tree's headers describe.
func (l *Library) Load() error {
	l.once.Do(func() {
		p, err := Find(l.File, l.MakeTarget)
		if err != nil {
			l.err = fmt.Errorf("%w: %v", l.ErrUnavailable, err)
			return
		}
		if l.err = l.Open(p); l.err != nil {
			return
		}
		if v := int(C.nl_abi_version(l.id)); v != l.abi {
			l.err = fmt.Errorf("%w: %s has ABI version %d, want %d (rebuild with `make %s`)", l.ErrUnavailable, p, v, l.abi, l.MakeTarget)
			return
		}
		l.path = p
	})
	return l.err
}

// Open dlopens the library file p and resolves every function (Load uses
// it; tests call it with paths that do not exist). A failure leaves the
// functions of an earlier successful Open in place.
func (l *Library) Open(p string) error {
	var e C.nl_err
	cp := C.CString(p)
	defer C.free(unsafe.Pointer(cp))
	if C.nl_open(l.id, cp, &e) != 0 {
		return fmt.Errorf("%w: %s", l.ErrUnavailable, C.GoString(&e.msg[0]))
	}
	return nil
}

// Available reports whether the library can run here: it loads and at least
// one GPU is visible. The error wraps ErrUnavailable.
func (l *Library) Available() error {
	if err := l.Load(); err != nil {
		return err
	}
	if n := int(C.nl_device_count(l.id)); n <= 0 {
		return fmt.Errorf("%w: %s loaded but no CUDA device is visible (no driver or no GPU)", l.ErrUnavailable, l.path)
	}
	return nil
}

// Path is the loaded library's path ("" before a successful Load).
func (l *Library) Path() string { return l.path }

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
