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
	"sync"
	"unsafe"

	"talkbox/engine/nativelib"
)

// ErrUnavailable is wrapped by every reason the GPU codec cannot run: no
// library, a library of another ABI, no driver, no GPU.
var ErrUnavailable = errors.New("cuda codec unavailable")

// LibraryName is the file `make native-codec` builds into native/build/.
const LibraryName = "libtalkbox_codec.so"

// EnvLibrary names a library file or a directory holding it (shared with
// engine/cuda, whose library sits in the same directory).
const EnvLibrary = nativelib.EnvDir

var (
	loadOnce sync.Once
	loadErr  error
	loadPath string
)

// errBuf is a C-side message buffer for one call.
type errBuf [512]C.char

func (b *errBuf) ptr() (*C.char, C.int) { return &b[0], C.int(len(b)) }
func (b *errBuf) String() string        { return C.GoString(&b[0]) }

// findAndOpen dlopens the library where nativelib finds it.
func findAndOpen() (string, error) {
	p, err := nativelib.Find(LibraryName, "native-codec")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return openLibrary(p)
}

// openLibrary dlopens the library file p.
func openLibrary(p string) (string, error) {
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

func load() error {
	loadOnce.Do(func() {
		loadPath, loadErr = findAndOpen()
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
