// Package cuda is the GPU backend: it calls native/'s CUDA library, which
// engine/nativelib loads at run time with dlopen, so bin/talkbox links and
// runs on machines with no CUDA toolkit, no library and no GPU; Available
// says why the backend cannot run.
package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../../native/include -I${SRCDIR}/../nativelib
#include "loader.h"
*/
import "C"

import (
	"fmt"

	"talkbox/engine/nativelib"
)

// ErrUnavailable is wrapped by every reason the CUDA backend cannot run (no
// library, no driver, no GPU); the engine maps it to engine.ErrNoGPU.
var ErrUnavailable = nativelib.LM.ErrUnavailable

// LibraryName is the file `make native` builds into native/build/.
var LibraryName = nativelib.LM.File

// EnvLibrary names a library file or a directory holding it.
const EnvLibrary = nativelib.EnvDir

// Available reports whether the CUDA backend can run here: the library loads
// and at least one GPU is visible. The error wraps ErrUnavailable.
func Available() error { return nativelib.LM.Available() }

// LibraryPath is the loaded library's path ("" before a successful Available).
func LibraryPath() string { return nativelib.LM.Path() }

// failed is the library's description of the failure e holds.
func failed(what string, e *C.nl_err) error {
	return fmt.Errorf("cuda: %s: %s", what, C.GoString(&e.msg[0]))
}

// deviceInfo names device d.
func deviceInfo(d int) (name string, sms, major, minor int, err error) {
	var buf [256]C.char
	var s, ma, mi C.int
	var e C.nl_err
	if C.nl_tb_device_info(C.int(d), &buf[0], C.int(len(buf)), &s, &ma, &mi, &e) != 0 {
		return "", 0, 0, 0, failed("device info", &e)
	}
	return C.GoString(&buf[0]), int(s), int(ma), int(mi), nil
}
