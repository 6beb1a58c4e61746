// The dlopen side of package cudacodec: function pointers into
// libtalkbox_codec.so and wrappers that copy the library's (thread-local)
// last error into the caller's buffer within the same C call, so the message
// cannot be lost to a goroutine moving between OS threads.

#include <dlfcn.h>
#include <stdio.h>
#include "api.h"

static struct {
	int (*abi_version)(void);
	const char *(*last_error)(void);
	int (*device_count)(void);
	int (*device_name)(int, char *, int);
	tbc_model *(*create)(const tbc_weights *, int);
	void (*destroy)(tbc_model *);
	int (*samples_per_frame)(const tbc_model *);
	tbc_stream *(*stream_create)(tbc_model *);
	void (*stream_destroy)(tbc_stream *);
	int (*push)(tbc_stream *, const int32_t *, int, float *);
	int (*reset)(tbc_stream *);
	int (*bench)(tbc_stream *, const int32_t *, int, int, float *);
} api;

int tbcgo_open(const char *path, char *err, int cap) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, cap, "%s", dlerror());
		return -1;
	}
#define SYM(f)                                                              \
	*(void **)(&api.f) = dlsym(h, "tbc_" #f);                               \
	if (!api.f) {                                                           \
		snprintf(err, cap, "%s: missing symbol tbc_" #f, path);             \
		dlclose(h);                                                         \
		return -1;                                                          \
	}
	SYM(abi_version) SYM(last_error) SYM(device_count) SYM(device_name) SYM(create) SYM(destroy)
	SYM(samples_per_frame) SYM(stream_create) SYM(stream_destroy) SYM(push) SYM(reset) SYM(bench)
#undef SYM
	return 0;
}

static void copy_err(char *err, int cap) { snprintf(err, cap, "%s", api.last_error()); }

int tbcgo_abi_version(void) { return api.abi_version(); }
int tbcgo_device_count(void) { return api.device_count(); }

int tbcgo_device_name(int d, char *name, int cap, char *err, int ecap) {
	int rc = api.device_name(d, name, cap);
	if (rc) copy_err(err, ecap);
	return rc;
}

tbc_model *tbcgo_create(const tbc_weights *w, int d, char *err, int cap) {
	tbc_model *m = api.create(w, d);
	if (!m) copy_err(err, cap);
	return m;
}

void tbcgo_destroy(tbc_model *m) { api.destroy(m); }
int tbcgo_samples_per_frame(const tbc_model *m) { return api.samples_per_frame(m); }

tbc_stream *tbcgo_stream_create(tbc_model *m, char *err, int cap) {
	tbc_stream *s = api.stream_create(m);
	if (!s) copy_err(err, cap);
	return s;
}

void tbcgo_stream_destroy(tbc_stream *s) { api.stream_destroy(s); }

int tbcgo_push(tbc_stream *s, const int32_t *codes, int n, float *out, char *err, int cap) {
	int rc = api.push(s, codes, n, out);
	if (rc) copy_err(err, cap);
	return rc;
}

int tbcgo_reset(tbc_stream *s, char *err, int cap) {
	int rc = api.reset(s);
	if (rc) copy_err(err, cap);
	return rc;
}

int tbcgo_bench(tbc_stream *s, const int32_t *codes, int n, int iters, float *ms, char *err, int cap) {
	int rc = api.bench(s, codes, n, iters, ms);
	if (rc) copy_err(err, cap);
	return rc;
}
