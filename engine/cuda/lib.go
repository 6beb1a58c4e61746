// Package cuda is the GPU backend: it loads native/'s CUDA library at run
// time with dlopen, so bin/talkbox links and runs on machines with no CUDA
// toolkit, no library and no GPU; Available says why the backend cannot run.
package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../../native/include
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "native_api.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"talkbox/engine/nativelib"
)

// ErrUnavailable is wrapped by every reason the CUDA backend cannot run (no
// library, no driver, no GPU); the engine maps it to engine.ErrNoGPU.
var ErrUnavailable = errors.New("cuda backend unavailable")

// LibraryName is the file `make native` builds into native/build/.
const LibraryName = "libtalkbox_native.so"

// EnvLibrary names a library file or a directory holding it.
const EnvLibrary = nativelib.EnvDir

var (
	loadOnce sync.Once
	loadErr  error
	loadPath string
)

// findAndOpen dlopens the library where nativelib finds it.
func findAndOpen() (string, error) {
	p, err := nativelib.Find(LibraryName, "native")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return openLibrary(p)
}

// openLibrary dlopens the library file p.
func openLibrary(p string) (string, error) {
	cp := C.CString(p)
	rc := C.tb_open(cp)
	C.free(unsafe.Pointer(cp))
	if rc != 0 {
		return "", fmt.Errorf("%w: %s", ErrUnavailable, C.GoString(C.tb_dl_error()))
	}
	return p, nil
}

func load() error {
	loadOnce.Do(func() {
		loadPath, loadErr = findAndOpen()
		if loadErr != nil {
			return
		}
		if v := int(C.c_abi_version()); v != C.TB_ABI_VERSION {
			loadErr = fmt.Errorf("%w: %s has ABI version %d, want %d (rebuild with `make native`)", ErrUnavailable, loadPath, v, C.TB_ABI_VERSION)
		}
	})
	return loadErr
}

// Available reports whether the CUDA backend can run here: the library loads
// and at least one GPU is visible. The error wraps ErrUnavailable.
func Available() error {
	if err := load(); err != nil {
		return err
	}
	if n := int(C.c_device_count()); n <= 0 {
		return fmt.Errorf("%w: %s loaded but no CUDA device is visible (no driver or no GPU)", ErrUnavailable, loadPath)
	}
	return nil
}

// LibraryPath is the loaded library's path ("" before a successful Available).
func LibraryPath() string { return loadPath }

// lastError is the library's description of its last failure on this thread.
func lastError(what string) error {
	return fmt.Errorf("cuda: %s: %s", what, C.GoString(C.c_last_error()))
}

// deviceInfo names device d.
func deviceInfo(d int) (name string, sms, major, minor int, err error) {
	var buf [256]C.char
	var s, ma, mi C.int
	if C.c_device_info(C.int(d), &buf[0], C.int(len(buf)), &s, &ma, &mi) != 0 {
		return "", 0, 0, 0, lastError("device info")
	}
	return C.GoString(&buf[0]), int(s), int(ma), int(mi), nil
}
