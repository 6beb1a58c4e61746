// Package cudacodec is the speech-tokenizer decoder on a CUDA GPU: a
// backend.Codec whose streams keep their whole decoder state on the device
// (conv histories, the transformer's K/V window, the RoPE position), so a
// push of n frames costs n frames of work and returns n·1920 samples.
//
// The kernels live in native/codec and are built into libtalkbox_codec.so
// (`make native-codec`), which engine/nativelib loads at run time with
// dlopen: binaries link and run on machines with no CUDA toolkit, library or
// GPU, and every reason the GPU codec cannot run wraps ErrUnavailable.
package cudacodec

/*
#cgo CFLAGS: -I${SRCDIR}/../../native/include -I${SRCDIR}/../nativelib
#include "loader.h"
*/
import "C"

import (
	"fmt"

	"talkbox/engine/nativelib"
)

// ErrUnavailable is wrapped by every reason the GPU codec cannot run: no
// library, a library of another ABI, no driver, no GPU.
var ErrUnavailable = nativelib.Codec.ErrUnavailable

// LibraryName is the file `make native-codec` builds into native/build/.
var LibraryName = nativelib.Codec.File

// EnvLibrary names a library file or a directory holding it (shared with
// engine/cuda, whose library sits in the same directory).
const EnvLibrary = nativelib.EnvDir

// Available reports whether the GPU codec can run here: the library loads
// and at least one GPU is visible. The error wraps ErrUnavailable.
func Available() error { return nativelib.Codec.Available() }

// LibraryPath is the loaded library's path ("" before a successful load).
func LibraryPath() string { return nativelib.Codec.Path() }

// message is the library's description of the failure e holds.
func message(e *C.nl_err) string { return C.GoString(&e.msg[0]) }

// deviceName names GPU d.
func deviceName(d int) (string, error) {
	var name [256]C.char
	var e C.nl_err
	if C.nl_tbc_device_name(C.int(d), &name[0], C.int(len(name)), &e) != 0 {
		return "", fmt.Errorf("cudacodec: device %d: %s", d, message(&e))
	}
	return C.GoString(&name[0]), nil
}
