package audio

// ALSA's library prints its own diagnostics straight to stderr (about thirty
// "ALSA lib confmisc.c… cannot find card '0'" lines on a machine without a
// sound card) while miniaudio probes it; miniaudio already turns the failure
// into an error that Open reports. So before probing, libasound's error
// handler is replaced by one that drops the lines. miniaudio loads the same
// libasound.so.2 with dlopen, which returns this already loaded copy, so the
// handler applies to it. Where libasound is missing nothing happens.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdarg.h>

static void talkbox_alsa_silent(const char *file, int line, const char *function, int err, const char *fmt, ...) {}

static int talkbox_alsa_quiet(void) {
	void *lib = dlopen("libasound.so.2", RTLD_NOW | RTLD_GLOBAL);
	if (lib == NULL) {
		return 0;
	}
	typedef void (*handler_t)(const char *, int, const char *, int, const char *, ...);
	int (*set)(handler_t) = (int (*)(handler_t))dlsym(lib, "snd_lib_error_set_handler");
	if (set == NULL) {
		return 0;
	}
	set(talkbox_alsa_silent);
	return 1; // the library stays loaded, so the handler stays in place
}
*/
import "C"

import "sync"

var alsaQuiet sync.Once

// quietALSA silences libasound's stderr diagnostics; see above.
func quietALSA() { alsaQuiet.Do(func() { C.talkbox_alsa_quiet() }) }
