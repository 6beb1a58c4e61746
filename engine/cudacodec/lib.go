// Package cudacodec is the speech-tokenizer decoder on a CUDA GPU: a
// backend.Codec whose streams keep their whole decoder state on the device
// (conv histories, the transformer's K/V window, the RoPE position), so a
// push of n frames costs n frames of work and returns n·1920 samples.
//
// The kernels live in native/codec and are built into libtalkbox_codec.so
// (`make native-codec`), which this package loads at run time with dlopen:
// binaries link and run on machines with no CUDA toolkit, library or GPU,
// and every reason the GPU codec cannot run wraps ErrUnavailable.
package cudacodec

/*
#cgo CFLAGS: -I${SRCDIR}/../../native/codec
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "api.h"
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

// ErrUnavailable is wrapped by every reason the GPU codec cannot run: no
// library, a library of another ABI, no driver, no GPU.
var ErrUnavailable = errors.New("cuda codec unavailable")

// LibraryName is the file `make native-codec` builds into native/build/.
const LibraryName = "libtalkbox_codec.so"

// EnvLibrary names a library file or a directory holding it (shared with
// engine/cuda, whose library sits in the same directory).
const EnvLibrary = "TALKBOX_NATIVE"

var (
	loadOnce sync.Once
	loadErr  error
	loadPath string
)

// candidates lists where the library is looked for, in order: next to the
// executable, $TALKBOX_NATIVE, native/build/ under the working directory and
// under the nearest ancestor holding go.mod (tests run in package folders).
func candidates() []string {
	var out []string
	if exe, err := os.Executable(); err == nil {
		out = append(out, filepath.Join(filepath.Dir(exe), LibraryName))
	}
	if v := os.Getenv(EnvLibrary); v != "" {
		if st, err := os.Stat(v); err == nil && st.IsDir() {
			v = filepath.Join(v, LibraryName)
		} else if filepath.Base(v) != LibraryName {
			// A file path names engine/cuda's library: look beside it.
			v = filepath.Join(filepath.Dir(v), LibraryName)
		}
		out = append(out, v)
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, filepath.Join(wd, "native", "build", LibraryName))
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				out = append(out, filepath.Join(d, "native", "build", LibraryName))
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return out
}

// errBuf is a C-side message buffer for one call.
type errBuf [512]C.char

func (b *errBuf) ptr() (*C.char, C.int) { return &b[0], C.int(len(b)) }
func (b *errBuf) String() string        { return C.GoString(&b[0]) }

// openLibrary dlopens the first candidate that exists.
func openLibrary(paths []string) (string, error) {
	var tried []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			tried = append(tried, p)
			continue
		}
		var eb errBuf
		cp := C.CString(p)
		e, n := eb.ptr()
		rc := C.tbcgo_open(cp, e, n)
		C.free(unsafe.Pointer(cp))
		if rc != 0 {
			return "", fmt.Errorf("%w: %s", ErrUnavailable, eb.String())
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: %s not found (looked at %s; build it with `make native-codec` or set %s)",
		ErrUnavailable, LibraryName, strings.Join(tried, ", "), EnvLibrary)
}

func load() error {
	loadOnce.Do(func() {
		loadPath, loadErr = openLibrary(candidates())
		if loadErr != nil {
			return
		}
		if v := int(C.tbcgo_abi_version()); v != C.TBC_ABI_VERSION {
			loadErr = fmt.Errorf("%w: %s has ABI version %d, want %d (rebuild with `make native-codec`)",
				ErrUnavailable, loadPath, v, C.TBC_ABI_VERSION)
		}
	})
	return loadErr
}

// Available reports whether the GPU codec can run here: the library loads
// and at least one GPU is visible. The error wraps ErrUnavailable.
func Available() error {
	if err := load(); err != nil {
		return err
	}
	if n := int(C.tbcgo_device_count()); n <= 0 {
		return fmt.Errorf("%w: %s loaded but no CUDA device is visible (no driver or no GPU)", ErrUnavailable, loadPath)
	}
	return nil
}

// LibraryPath is the loaded library's path ("" before a successful load).
func LibraryPath() string { return loadPath }

// deviceName names GPU d.
func deviceName(d int) (string, error) {
	var name [256]C.char
	var eb errBuf
	e, n := eb.ptr()
	if C.tbcgo_device_name(C.int(d), &name[0], C.int(len(name)), e, n) != 0 {
		return "", fmt.Errorf("cudacodec: device %d: %s", d, eb.String())
	}
	return C.GoString(&name[0]), nil
}
