// Declarations of native_api.c for the Go files of package cuda.
#ifndef TALKBOX_NATIVE_API_H
#define TALKBOX_NATIVE_API_H
#include "talkbox_native.h"
int tb_open(const char *path);
const char *tb_dl_error(void);
int c_abi_version(void);
const char *c_last_error(void);
int c_device_count(void);
int c_device_info(int d, char *n, int cap, int *sm, int *ma, int *mi);
tb_engine *c_create(const tb_weights *w, int d);
void c_destroy(tb_engine *e);
int c_geometry(tb_engine *e, int *g, int *t, int *s, int *m);
int c_reset(tb_engine *e);
int c_reserve_sms(tb_engine *e, int n);
int c_set_sampling(tb_engine *e, const tb_sampler *t, const tb_sampler *p, uint64_t seed, int mask);
int c_prefill(tb_engine *e, const float *r, int n, const float *tr, int nt, const float *pad, int32_t *g0);
int c_frame_submit(tb_engine *e, const int32_t *t);
int c_frame_wait(tb_engine *e, int32_t *c, int32_t *g);
int c_frame_codes(tb_engine *e, int32_t *c);
int c_read_logits(tb_engine *e, float *t, float *h, float *p);
int c_bench(tb_engine *e, int what, int iters, float *ms);
int c_sample(tb_engine *e, const float *l, int n, int f, int g, int x, int32_t *o);
int c_project_text(tb_engine *e, const float *x, int rows, float *out);
#endif
