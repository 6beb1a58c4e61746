// See loader.h.
#include "loader.h"

#include <dlfcn.h>
#include <stdio.h>

// The functions of each library, in one list per library: X(return type,
// name, parameter types). nl_open resolves every name; the wrappers below
// call them.
#define NL_TB_FUNCS(X)                                                                     \
	X(int, tb_abi_version, (void))                                                         \
	X(const char *, tb_last_error, (void))                                                 \
	X(int, tb_device_count, (void))                                                        \
	X(int, tb_device_info, (int, char *, int, int *, int *, int *))                        \
	X(tb_params, tb_default_params, (void))                                                \
	X(tb_engine *, tb_create, (const tb_weights *, const tb_params *))                     \
	X(void, tb_destroy, (tb_engine *))                                                     \
	X(int, tb_reserve_sms, (tb_engine *, int))                                             \
	X(int, tb_leave_sms, (tb_engine *, int))                                               \
	X(int, tb_geometry, (tb_engine *, int *, int *, int *, int *))                         \
	X(int, tb_reset, (tb_engine *))                                                        \
	X(int, tb_set_sampling, (tb_engine *, const tb_sampler *, const tb_sampler *, uint64_t, int)) \
	X(int, tb_prefill, (tb_engine *, const float *, int, const float *, int, const float *, int32_t *)) \
	X(int, tb_frame_submit, (tb_engine *, const int32_t *))                                \
	X(int, tb_frame_codes, (tb_engine *, int32_t *))                                       \
	X(int, tb_frame_wait, (tb_engine *, int32_t *, int32_t *))                             \
	X(int, tb_project_text, (tb_engine *, const float *, int, float *))                    \
	X(int, tb_read_logits, (tb_engine *, float *, float *, float *))                       \
	X(int, tb_sample, (tb_engine *, const float *, int, int, int, int, int32_t *))         \
	X(int, tb_bench, (tb_engine *, int, int, float *))                                     \
	X(tb_batch *, tb_batch_create, (tb_engine *, int, int))                                \
	X(void, tb_batch_destroy, (tb_batch *))                                                \
	X(int, tb_batch_capacity, (const tb_batch *))                                          \
	X(int, tb_batch_remove, (tb_batch *, int))                                             \
	X(int, tb_batch_step, (tb_batch *, const int32_t *, int, const int32_t *, int32_t *))  \
	X(int, tb_batch_read_logits, (tb_batch *, int, float *, float *, float *))             \
	X(int, tb_batch_prepare, (tb_batch *))                                                 \
	X(int, tb_batch_add_many, (tb_batch *, const tb_batch_request *, int, int *, int32_t *))

#define NL_TBC_FUNCS(X)                                                                    \
	X(int, tbc_abi_version, (void))                                                        \
	X(const char *, tbc_last_error, (void))                                                \
	X(int, tbc_device_count, (void))                                                       \
	X(int, tbc_device_name, (int, char *, int))                                            \
	X(tbc_params, tbc_default_params, (void))                                              \
	X(tbc_model *, tbc_create, (const tbc_weights *, const tbc_params *))                  \
	X(void, tbc_destroy, (tbc_model *))                                                    \
	X(int, tbc_samples_per_frame, (const tbc_model *))                                     \
	X(int, tbc_max_pool_slots, (void))                                                     \
	X(tbc_pool *, tbc_pool_create, (tbc_model *, int))                                     \
	X(void, tbc_pool_destroy, (tbc_pool *))                                                \
	X(int, tbc_pool_push, (tbc_pool *, const int32_t *, int, const int32_t *, int, float *)) \
	X(int, tbc_pool_reset, (tbc_pool *, int))                                              \
	X(int, tbc_pool_warm, (tbc_pool *, int))                                               \
	X(int, tbc_pool_bench, (tbc_pool *, int, const int32_t *, int, int, float *))

#define NL_FIELD(ret, name, params) ret(*name) params;
static struct {
	NL_TB_FUNCS(NL_FIELD)
} tb;
static struct {
	NL_TBC_FUNCS(NL_FIELD)
} tbc;
#undef NL_FIELD

int nl_open(int lib, const char *path, nl_err *err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err->msg, sizeof err->msg, "%s", dlerror());
		return -1;
	}
	// Resolved into a copy: a library missing a symbol leaves the table as it was.
#define NL_SYM(ret, name, params)                                                            \
	if (!(*(void **)(&t.name) = dlsym(h, #name))) {                                          \
		snprintf(err->msg, sizeof err->msg, "%s: missing symbol %s (rebuild it)", path, #name); \
		dlclose(h);                                                                          \
		return -1;                                                                           \
	}
	if (lib == NL_LM) {
		__typeof__(tb) t;
		NL_TB_FUNCS(NL_SYM)
		tb = t;
	} else {
		__typeof__(tbc) t;
		NL_TBC_FUNCS(NL_SYM)
		tbc = t;
	}
#undef NL_SYM
	return 0;
}

int nl_abi_version(int lib) { return lib == NL_LM ? tb.tb_abi_version() : tbc.tbc_abi_version(); }
int nl_device_count(int lib) { return lib == NL_LM ? tb.tb_device_count() : tbc.tbc_device_count(); }

// A failed call's message, copied on the thread that made the call.
static int lm_failed(nl_err *err) {
	snprintf(err->msg, sizeof err->msg, "%s", tb.tb_last_error());
	return -1;
}
static int codec_failed(nl_err *err) {
	snprintf(err->msg, sizeof err->msg, "%s", tbc.tbc_last_error());
	return -1;
}
#define LM_RC(call) return (call) ? lm_failed(err) : 0
#define CODEC_RC(call) return (call) ? codec_failed(err) : 0

int nl_tb_device_info(int device, char *name, int name_cap, int *sm_count, int *cc_major, int *cc_minor, nl_err *err) {
	LM_RC(tb.tb_device_info(device, name, name_cap, sm_count, cc_major, cc_minor));
}
tb_params nl_tb_default_params(void) { return tb.tb_default_params(); }
tb_engine *nl_tb_create(const tb_weights *w, const tb_params *p, nl_err *err) {
	tb_engine *e = tb.tb_create(w, p);
	if (!e) lm_failed(err);
	return e;
}
void nl_tb_destroy(tb_engine *e) { tb.tb_destroy(e); }
int nl_tb_reserve_sms(tb_engine *e, int n, nl_err *err) { LM_RC(tb.tb_reserve_sms(e, n)); }
int nl_tb_leave_sms(tb_engine *e, int leave, nl_err *err) {
	const int grid = tb.tb_leave_sms(e, leave);
	return grid < 0 ? lm_failed(err) : grid;
}
int nl_tb_geometry(tb_engine *e, int *grid, int *threads, int *smem_bytes, int *max_tokens_per_pass, nl_err *err) {
	LM_RC(tb.tb_geometry(e, grid, threads, smem_bytes, max_tokens_per_pass));
}
int nl_tb_set_sampling(tb_engine *e, const tb_sampler *talker, const tb_sampler *predictor, uint64_t seed, int mask_eos,
                       nl_err *err) {
	LM_RC(tb.tb_set_sampling(e, talker, predictor, seed, mask_eos));
}
int nl_tb_prefill(tb_engine *e, const float *rows, int n, const float *trailing, int n_trailing, const float *tts_pad,
                  int32_t *g0, nl_err *err) {
	LM_RC(tb.tb_prefill(e, rows, n, trailing, n_trailing, tts_pad, g0));
}
int nl_tb_frame_submit(tb_engine *e, const int32_t *teacher, nl_err *err) { LM_RC(tb.tb_frame_submit(e, teacher)); }
int nl_tb_frame_codes(tb_engine *e, int32_t *codes, nl_err *err) { LM_RC(tb.tb_frame_codes(e, codes)); }
int nl_tb_frame_wait(tb_engine *e, int32_t *codes, int32_t *next_g0, nl_err *err) {
	LM_RC(tb.tb_frame_wait(e, codes, next_g0));
}
int nl_tb_project_text(tb_engine *e, const float *x, int rows, float *out, nl_err *err) {
	LM_RC(tb.tb_project_text(e, x, rows, out));
}
int nl_tb_read_logits(tb_engine *e, float *talker, float *hidden, float *predictor, nl_err *err) {
	LM_RC(tb.tb_read_logits(e, talker, hidden, predictor));
}
int nl_tb_sample(tb_engine *e, const float *logits, int n, int frame, int group, int exact, int32_t *out, nl_err *err) {
	LM_RC(tb.tb_sample(e, logits, n, frame, group, exact, out));
}
tb_batch *nl_tb_batch_create(tb_engine *e, int max_streams, int max_positions, nl_err *err) {
	tb_batch *b = tb.tb_batch_create(e, max_streams, max_positions);
	if (!b) lm_failed(err);
	return b;
}
void nl_tb_batch_destroy(tb_batch *b) { tb.tb_batch_destroy(b); }
int nl_tb_batch_capacity(const tb_batch *b) { return tb.tb_batch_capacity(b); }
int nl_tb_batch_remove(tb_batch *b, int slot, nl_err *err) { LM_RC(tb.tb_batch_remove(b, slot)); }
int nl_tb_batch_step(tb_batch *b, const int32_t *slots, int n, const int32_t *teacher, int32_t *out, nl_err *err) {
	LM_RC(tb.tb_batch_step(b, slots, n, teacher, out));
}
int nl_tb_batch_prepare(tb_batch *b, nl_err *err) { LM_RC(tb.tb_batch_prepare(b)); }
int nl_tb_batch_add_many(tb_batch *b, const tb_batch_request *req, int k, int *slots, int32_t *g0, nl_err *err) {
	LM_RC(tb.tb_batch_add_many(b, req, k, slots, g0));
}
int nl_tb_batch_read_logits(tb_batch *b, int slot, float *talker, float *hidden, float *predictor, nl_err *err) {
	LM_RC(tb.tb_batch_read_logits(b, slot, talker, hidden, predictor));
}
int nl_tb_bench(tb_engine *e, int what, int iters, float *ms, nl_err *err) { LM_RC(tb.tb_bench(e, what, iters, ms)); }

int nl_tbc_device_name(int device, char *name, int cap, nl_err *err) {
	CODEC_RC(tbc.tbc_device_name(device, name, cap));
}
tbc_params nl_tbc_default_params(void) { return tbc.tbc_default_params(); }
tbc_model *nl_tbc_create(const tbc_weights *w, const tbc_params *p, nl_err *err) {
	tbc_model *m = tbc.tbc_create(w, p);
	if (!m) codec_failed(err);
	return m;
}
void nl_tbc_destroy(tbc_model *m) { tbc.tbc_destroy(m); }
int nl_tbc_samples_per_frame(const tbc_model *m) { return tbc.tbc_samples_per_frame(m); }
int nl_tbc_max_pool_slots(void) { return tbc.tbc_max_pool_slots(); }
tbc_pool *nl_tbc_pool_create(tbc_model *m, int slots, nl_err *err) {
	tbc_pool *p = tbc.tbc_pool_create(m, slots);
	if (!p) codec_failed(err);
	return p;
}
void nl_tbc_pool_destroy(tbc_pool *p) { tbc.tbc_pool_destroy(p); }
int nl_tbc_pool_push(tbc_pool *p, const int32_t *slots, int n, const int32_t *codes, int frames, float *out,
                     nl_err *err) {
	CODEC_RC(tbc.tbc_pool_push(p, slots, n, codes, frames, out));
}
int nl_tbc_pool_reset(tbc_pool *p, int slot, nl_err *err) { CODEC_RC(tbc.tbc_pool_reset(p, slot)); }
int nl_tbc_pool_warm(tbc_pool *p, int frames, nl_err *err) { CODEC_RC(tbc.tbc_pool_warm(p, frames)); }
int nl_tbc_pool_bench(tbc_pool *p, int n, const int32_t *codes, int frames, int iters, float *ms, nl_err *err) {
	CODEC_RC(tbc.tbc_pool_bench(p, n, codes, frames, iters, ms));
}
