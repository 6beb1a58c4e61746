// The dlopen side of the CUDA backend: function pointers into the library
// and plain C wrappers that cgo can call from every Go file of the package.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "native_api.h"

typedef struct {
	int (*abi_version)(void);
	const char *(*last_error)(void);
	int (*device_count)(void);
	int (*device_info)(int, char *, int, int *, int *, int *);
	tb_engine *(*create)(const tb_weights *, int);
	void (*destroy)(tb_engine *);
	int (*geometry)(tb_engine *, int *, int *, int *, int *);
	int (*reserve_sms)(tb_engine *, int);
	int (*reset)(tb_engine *);
	int (*set_sampling)(tb_engine *, const tb_sampler *, const tb_sampler *, uint64_t, int);
	int (*prefill)(tb_engine *, const float *, int, const float *, int, const float *, int32_t *);
	int (*frame_submit)(tb_engine *, const int32_t *);
	int (*frame_wait)(tb_engine *, int32_t *, int32_t *);
	int (*frame_codes)(tb_engine *, int32_t *);
	int (*read_logits)(tb_engine *, float *, float *, float *);
	int (*bench)(tb_engine *, int, int, float *);
	int (*sample)(tb_engine *, const float *, int, int, int, int, int32_t *);
	int (*project_text)(tb_engine *, const float *, int, float *);
} tb_api;

static tb_api api;
static char dl_err[1024];

int tb_open(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(dl_err, sizeof dl_err, "%s", dlerror());
		return -1;
	}
#define SYM(f)                                                                  \
	*(void **)(&api.f) = dlsym(h, "tb_" #f);                                    \
	if (!api.f) {                                                               \
		snprintf(dl_err, sizeof dl_err, "%s: missing symbol tb_" #f, path);     \
		dlclose(h);                                                             \
		return -1;                                                              \
	}
	SYM(abi_version) SYM(last_error) SYM(device_count) SYM(device_info) SYM(create) SYM(destroy)
	SYM(geometry) SYM(reserve_sms) SYM(reset) SYM(set_sampling) SYM(prefill) SYM(frame_submit) SYM(frame_wait) SYM(frame_codes)
	SYM(read_logits) SYM(bench) SYM(sample) SYM(project_text)
#undef SYM
	return 0;
}
const char *tb_dl_error(void) { return dl_err; }

int c_abi_version(void) { return api.abi_version(); }
const char *c_last_error(void) { return api.last_error(); }
int c_device_count(void) { return api.device_count(); }
int c_device_info(int d, char *n, int cap, int *sm, int *ma, int *mi) { return api.device_info(d, n, cap, sm, ma, mi); }
tb_engine *c_create(const tb_weights *w, int d) { return api.create(w, d); }
void c_destroy(tb_engine *e) { api.destroy(e); }
int c_geometry(tb_engine *e, int *g, int *t, int *s, int *m) { return api.geometry(e, g, t, s, m); }
int c_reset(tb_engine *e) { return api.reset(e); }
int c_reserve_sms(tb_engine *e, int n) { return api.reserve_sms(e, n); }
int c_set_sampling(tb_engine *e, const tb_sampler *t, const tb_sampler *p, uint64_t seed, int mask) { return api.set_sampling(e, t, p, seed, mask); }
int c_prefill(tb_engine *e, const float *r, int n, const float *tr, int nt, const float *pad, int32_t *g0) { return api.prefill(e, r, n, tr, nt, pad, g0); }
int c_frame_submit(tb_engine *e, const int32_t *t) { return api.frame_submit(e, t); }
int c_frame_wait(tb_engine *e, int32_t *c, int32_t *g) { return api.frame_wait(e, c, g); }
int c_frame_codes(tb_engine *e, int32_t *c) { return api.frame_codes(e, c); }
int c_read_logits(tb_engine *e, float *t, float *h, float *p) { return api.read_logits(e, t, h, p); }
int c_bench(tb_engine *e, int what, int iters, float *ms) { return api.bench(e, what, iters, ms); }
int c_sample(tb_engine *e, const float *l, int n, int f, int g, int x, int32_t *o) { return api.sample(e, l, n, f, g, x, o); }
int c_project_text(tb_engine *e, const float *x, int rows, float *out) { return api.project_text(e, x, rows, out); }
