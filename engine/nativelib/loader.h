// The one dlopen shim for Talkbox's native libraries (libtalkbox_native.so,
// libtalkbox_codec.so): nl_open fills a table of the library's functions,
// and every nl_<function> calls one. A wrapper of a function that can fail
// takes an nl_err and copies the library's thread-local message into it
// within the same C call, so the Go caller needs no LockOSThread: a
// goroutine may move to another OS thread between two cgo calls, never
// inside one. Packages engine/cuda and engine/cudacodec include this header
// and call the wrappers (package nativelib links them in).
#ifndef TALKBOX_NATIVELIB_LOADER_H
#define TALKBOX_NATIVELIB_LOADER_H
#include "talkbox_codec.h"
#include "talkbox_native.h"

enum { NL_LM = 0, NL_CODEC = 1 };

typedef struct {
	char msg[512];
} nl_err;

// nl_open dlopens path as library lib (NL_LM or NL_CODEC) and resolves all
// of its functions; on failure nothing changes and err says why.
int nl_open(int lib, const char *path, nl_err *err);
// nl_abi_version and nl_device_count of a library nl_open opened.
int nl_abi_version(int lib);
int nl_device_count(int lib);

// talkbox_native.h
int nl_tb_device_info(int device, char *name, int name_cap, int *sm_count, int *cc_major, int *cc_minor, nl_err *err);
tb_params nl_tb_default_params(void);
tb_engine *nl_tb_create(const tb_weights *w, const tb_params *p, nl_err *err);
void nl_tb_destroy(tb_engine *e);
int nl_tb_reserve_sms(tb_engine *e, int n, nl_err *err);
// nl_tb_leave_sms returns the grid the next launch takes, or -1.
int nl_tb_leave_sms(tb_engine *e, int leave, nl_err *err);
int nl_tb_geometry(tb_engine *e, int *grid, int *threads, int *smem_bytes, int *max_tokens_per_pass, nl_err *err);
int nl_tb_set_sampling(tb_engine *e, const tb_sampler *talker, const tb_sampler *predictor, uint64_t seed, int mask_eos,
                       nl_err *err);
int nl_tb_prefill(tb_engine *e, const float *rows, int n, const float *trailing, int n_trailing, const float *tts_pad,
                  int32_t *g0, nl_err *err);
int nl_tb_frame_submit(tb_engine *e, const int32_t *teacher, nl_err *err);
int nl_tb_frame_codes(tb_engine *e, int32_t *codes, nl_err *err);
int nl_tb_frame_wait(tb_engine *e, int32_t *codes, int32_t *next_g0, nl_err *err);
int nl_tb_project_text(tb_engine *e, const float *x, int rows, float *out, nl_err *err);
int nl_tb_read_logits(tb_engine *e, float *talker, float *hidden, float *predictor, nl_err *err);
int nl_tb_sample(tb_engine *e, const float *logits, int n, int frame, int group, int exact, int32_t *out, nl_err *err);
int nl_tb_bench(tb_engine *e, int what, int iters, float *ms, nl_err *err);
tb_batch *nl_tb_batch_create(tb_engine *e, int max_streams, int max_positions, nl_err *err);
void nl_tb_batch_destroy(tb_batch *b);
int nl_tb_batch_capacity(const tb_batch *b);
int nl_tb_batch_remove(tb_batch *b, int slot, nl_err *err);
int nl_tb_batch_step(tb_batch *b, const int32_t *slots, int n, const int32_t *teacher, int32_t *out, nl_err *err);
int nl_tb_batch_prepare(tb_batch *b, nl_err *err);
int nl_tb_batch_add_many(tb_batch *b, const tb_batch_request *req, int k, int *slots, int32_t *g0, nl_err *err);
int nl_tb_batch_read_logits(tb_batch *b, int slot, float *talker, float *hidden, float *predictor, nl_err *err);

// talkbox_codec.h
int nl_tbc_device_name(int device, char *name, int cap, nl_err *err);
tbc_params nl_tbc_default_params(void);
tbc_model *nl_tbc_create(const tbc_weights *w, const tbc_params *p, nl_err *err);
void nl_tbc_destroy(tbc_model *m);
int nl_tbc_samples_per_frame(const tbc_model *m);
int nl_tbc_max_pool_slots(void);
tbc_pool *nl_tbc_pool_create(tbc_model *m, int slots, nl_err *err);
void nl_tbc_pool_destroy(tbc_pool *p);
int nl_tbc_pool_push(tbc_pool *p, const int32_t *slots, int n, const int32_t *codes, int frames, float *out,
                     nl_err *err);
int nl_tbc_pool_reset(tbc_pool *p, int slot, nl_err *err);
int nl_tbc_pool_warm(tbc_pool *p, int frames, nl_err *err);
int nl_tbc_pool_bench(tbc_pool *p, int n, const int32_t *codes, int frames, int iters, float *ms, nl_err *err);
#endif
