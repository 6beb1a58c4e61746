/*
 * talkbox_native.h: the C ABI of Talkbox's CUDA language-model engine.
 *
 * Opaque handles and plain C types only, so the Go backend can dlopen the
 * library (no link-time dependency on CUDA; engine/nativelib loads it).
 *
 * Errors (the same in talkbox_codec.h): a function that can fail returns 0
 * on success and -1 on failure, or NULL for a constructor; tb_last_error()
 * then describes the failure. The message is thread-local, valid until the
 * next call on the same thread, so a caller copies it on the thread of the
 * failed call.
 *
 * Use: fill tb_weights, start from tb_default_params(), change what you
 * need, tb_create; per utterance tb_set_sampling, tb_prefill, then
 * tb_frame_submit / tb_frame_codes / tb_frame_wait. The test and benchmark
 * hooks are in their own section at the end.
 *
 * Weights are bf16 (uint16_t bit patterns), row-major [out][in] as stored in
 * the checkpoint. They are copied to the device by tb_create; the host
 * buffers may be released afterwards.
 *
 * Sampling semantics are those of the Go package talkbox/engine/sample:
 *   u(seed, frame, group) = (mix(mix(seed) ^ (frame<<8 | group)) >> 11) * 2^-53,
 *   mix = splitmix64 finaliser; processed logits (penalty in float32, EOS
 *   mask, suppression), scaled = logit / (float)temperature, top-k keeps
 *   values >= the k-th largest, top-p drops the low tail whose ascending
 *   cumulative probability is <= 1 - top_p, then softmax in double over the
 *   kept ids in ascending id order and an inverse-CDF draw with u.
 *   Greedy: first index of the largest finite logit.
 */
#ifndef TALKBOX_NATIVE_H
#define TALKBOX_NATIVE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TB_ABI_VERSION 8

typedef struct tb_engine tb_engine;

/* Sizes of one transformer stack (talker or code predictor). head_dim must be 128. */
typedef struct {
    int hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
    float rms_eps, rope_theta;
} tb_stack_dims;

/* One decoder layer's tensors (host pointers to bf16). */
typedef struct {
    const uint16_t *input_norm, *post_norm;      /* [hidden] */
    const uint16_t *q, *k, *v, *o;               /* [heads*128][hidden], [kv*128][hidden] x2, [hidden][heads*128] */
    const uint16_t *q_norm, *k_norm;             /* [128] */
    const uint16_t *gate, *up, *down;            /* [inter][hidden] x2, [hidden][inter] */
} tb_layer;

typedef struct {
    tb_stack_dims talker, predictor;
    int num_groups;            /* codes per frame (16) */
    int codec_eos;             /* 2150 */
    int suppress_from;         /* first suppressed group-0 id (vocab - 1024) */
    int min_new_tokens;        /* EOS masked while fewer group-0 tokens were generated (2) */
    const tb_layer *talker_layers;      /* [talker.layers] */
    const tb_layer *predictor_layers;   /* [predictor.layers] */
    const uint16_t *talker_norm;        /* [H] */
    const uint16_t *codec_head;         /* [vocab][H] */
    const uint16_t *codec_embedding;    /* [vocab][H] */
    const uint16_t *predictor_norm;     /* [Hp] */
    const uint16_t *const *predictor_heads;      /* [groups-1] x [pvocab][Hp] */
    const uint16_t *const *predictor_embeddings; /* [groups-1] x [pvocab][H] */
    const uint16_t *mtp_proj_weight;    /* [Hp][H] or NULL when H == Hp */
    const uint16_t *mtp_proj_bias;      /* [Hp] or NULL */
    /* Optional text projection for tb_project_text (all four or none; NULL: not provided). */
    int text_hidden;                    /* textH (0 when not provided) */
    const uint16_t *text_fc1, *text_fc1_bias;  /* linear_fc1 [textH][textH], [textH] */
    const uint16_t *text_fc2, *text_fc2_bias;  /* linear_fc2 [H][textH], [H] */
} tb_weights;

typedef struct {
    int do_sample;             /* 0: greedy */
    float temperature;
    int top_k;                 /* 0: off */
    float top_p;               /* 1: off */
    float repetition_penalty;  /* 1: off (talker only) */
} tb_sampler;

/* How tb_prefill runs the prompt through the talker. */
enum {
    TB_PREFILL_TENSOR_CORES = 0, /* all rows at once with tensor-core GEMMs (the default) */
    TB_PREFILL_PASSES = 1        /* the cooperative decode kernel, a few rows a pass (the reference path) */
};

/* Choices made at create time; start from tb_default_params(). */
typedef struct {
    int device;          /* CUDA device index (0) */
    int max_positions;   /* talker KV-cache length, prefill + frames (8192; 112 KiB of GPU memory each) */
    /* The talker step fuses attention with the O projection (decode_kernel<true>)
     * while its context is at most fused_max_len positions, and runs five phases a
     * layer (decode_kernel<false>) past it; 0: never fused. Default 224, from the
     * H100 context sweep in docs/dev/LATENCY.md. */
    int fused_max_len;
    int prefill;         /* TB_PREFILL_TENSOR_CORES or TB_PREFILL_PASSES (TB_PREFILL_TENSOR_CORES) */
} tb_params;

int tb_abi_version(void);
const char *tb_last_error(void);
/* Number of CUDA devices (0 when there is no driver or no GPU; never fails). */
int tb_device_count(void);
/* Name, SM count and compute capability of a device. */
int tb_device_info(int device, char *name, int name_cap, int *sm_count, int *cc_major, int *cc_minor);

/* The defaults of every tb_params field (documented there). */
tb_params tb_default_params(void);
/* Uploads w (which may be released afterwards) with params p (NULL: the defaults). */
tb_engine *tb_create(const tb_weights *w, const tb_params *p);
void tb_destroy(tb_engine *e);
/*
 * Leave n SMs free for other work (the GPU codec) by launching fewer CTAs;
 * n <= SMs/2, no frame pending. n may be raised, by up to half, to the
 * nearest count at which the launches can switch between both grids
 * (tb_leave_sms; 132 SMs: 33 -> 44); tb_geometry reports the grid. Every
 * launch leaves them until tb_leave_sms says otherwise.
 */
int tb_reserve_sms(tb_engine *e, int n);
/*
 * Whether the next launches leave the reserved SMs free (leave != 0: the
 * codec decodes beside them) or take every SM. Either grid gives the same
 * results bit for bit: the kernels split their sums the same way on both.
 * Where the SM count allows no such split the launches always leave them.
 * Returns the grid (CTAs) the next launch takes, or -1.
 */
int tb_leave_sms(tb_engine *e, int leave);
/* Launch geometry chosen at create time (for logs). */
int tb_geometry(tb_engine *e, int *grid, int *threads, int *smem_bytes, int *max_tokens_per_pass);

/* Start a new utterance: forget positions, history and pending frames. */
int tb_reset(tb_engine *e);
/* Sampling for the next utterance. mask_eos != 0 keeps EOS at -inf (exact frame counts). */
int tb_set_sampling(tb_engine *e, const tb_sampler *talker, const tb_sampler *predictor, uint64_t seed, int mask_eos);

/*
 * Batched prefill of n rows (n x H floats) plus the per-step text rows
 * (n_trailing x H) and tts_pad (H). Runs the talker over all rows, samples
 * group 0 of frame 0 and returns it in *g0 (one host sync).
 */
int tb_prefill(tb_engine *e, const float *rows, int n, const float *trailing, int n_trailing,
               const float *tts_pad, int32_t *g0);

/*
 * Enqueue one frame: the code predictor (15 steps with sampling) for the
 * current group-0 code, the next talker input embedding and the talker step
 * that samples the next group-0 code. No host synchronisation. teacher (16
 * codes or NULL) replaces the codes fed back. Up to 4 frames may be pending.
 */
int tb_frame_submit(tb_engine *e, const int32_t *teacher);
/*
 * The codes[16] of the oldest pending frame as soon as its code predictor is
 * done, before the talker step of the same launch (the first audio chunk
 * need not wait for it). Spins on host memory the kernel writes; does not
 * retire the frame: tb_frame_wait still follows, with the same codes.
 */
int tb_frame_codes(tb_engine *e, int32_t *codes);
/*
 * Wait for the oldest pending frame: codes[16] receives its codes (group 0 is
 * the one sampled before it), *next_g0 the group-0 code the talker sampled
 * for the following frame.
 */
int tb_frame_wait(tb_engine *e, int32_t *codes, int32_t *next_g0);

/*
 * The talker's text projection: out (rows x H floats) = fc2(SiLU(fc1 x + b1)) + b2
 * for x (rows x text_hidden floats, looked-up text-embedding rows), in fp32
 * with fp32 accumulation. Runs on its own stream and buffers, so it may be
 * called while another thread drives frames; calls must not overlap each
 * other. Fails when tb_create got no text projection or rows <= 0.
 */
int tb_project_text(tb_engine *e, const float *x, int rows, float *out);

/* ---------------------------------------------------------------------------
 * Batched decode: many utterances on one engine's weights at once, each a
 * stream in a slot. A step makes one frame for every stream it lists, reading
 * each weight once for all of them (tensor-core GEMMs over one row a stream),
 * so B streams cost far less than B single-stream frames. Streams join
 * (tb_batch_add_many: the prompts' prefill) and leave (tb_batch_remove) between
 * steps; a step may list any subset of the streams. Each stream keeps its
 * own KV cache, position, sampling parameters, seed, EOS mask and
 * repetition history; its codes are those the single-stream engine gives,
 * up to bf16 summation order. The batch shares the engine's device stream:
 * calls on one batch must not overlap each other.
 */
typedef struct tb_batch tb_batch;

#define TB_BATCH_MAX_STREAMS 64

/*
 * A batch of up to max_streams streams (0: TB_BATCH_MAX_STREAMS) of
 * max_positions talker positions each (prefill + frames, <= the engine's).
 * Slots are sized from the free GPU memory (112 KiB a position a slot for
 * the 0.6B): tb_batch_capacity says how many fit. Fails when not one does.
 */
tb_batch *tb_batch_create(tb_engine *e, int max_streams, int max_positions);
void tb_batch_destroy(tb_batch *b);
int tb_batch_capacity(const tb_batch *b);
/*
 * One stream's admission: its n prompt rows (n x H) to prefill, its text rows
 * (n_trailing x H) and tts_pad (H) kept for its steps, its sampling, seed and
 * EOS mask (as tb_set_sampling).
 */
typedef struct {
    const float *rows;
    int n;
    const float *trailing;   /* NULL when n_trailing is 0 */
    int n_trailing;
    const float *tts_pad;
    tb_sampler talker, predictor;
    uint64_t seed;
    int mask_eos;
} tb_batch_request;
/*
 * Admit k streams at once: their prompts run through the talker together
 * (one pass over the weights, each prompt attending only to itself), as if
 * admitted one by one. slots[i] and g0[i] receive stream i's slot and first
 * group 0. All or none: fails with "batch full" when fewer than k slots are
 * free.
 */
int tb_batch_add_many(tb_batch *b, const tb_batch_request *req, int k, int *slots, int32_t *g0);
/* Free a stream's slot (finished or cancelled); the other streams go on. */
int tb_batch_remove(tb_batch *b, int slot);
/*
 * One frame for each of the n streams in slots[0..n): row r of out (18
 * ints) receives slot r's 16 codes, the group 0 its talker sampled for the
 * next frame, and a flag set when some group had no finite logit. teacher
 * (n x 16 or NULL) feeds row r's codes back instead of the sampled ones
 * when teacher[16 r] >= 0. One host synchronisation, at the end.
 */
int tb_batch_step(tb_batch *b, const int32_t *slots, int n, const int32_t *teacher, int32_t *out);
/*
 * Prepare every step size (1..capacity streams) now rather than on its first
 * use: a step's launches are captured once per size (a few ms each).
 */
int tb_batch_prepare(tb_batch *b);
/*
 * A stream's raw logits of its last step (or of its prefill: no predictor
 * rows then), as tb_read_logits. Any pointer may be NULL.
 */
int tb_batch_read_logits(tb_batch *b, int slot, float *talker, float *hidden, float *predictor);

/* ---------------------------------------------------------------------------
 * Test and benchmark hooks: not needed to synthesise speech. The tests
 * compare logits and sampler picks with the CPU engine through them, and
 * `talkbox bench` times launches with tb_bench.
 */

/*
 * Raw logits of the last completed work (prefill or the last waited frame,
 * valid only when no other frame is pending): talker [vocab], hidden [H]
 * (final-normed state that produced them), predictor [(groups-1) x pvocab]
 * (frames only). Any pointer may be NULL.
 */
int tb_read_logits(tb_engine *e, float *talker, float *hidden, float *predictor);

/*
 * The GPU sampler alone, for tests: draws from n raw logits with the
 * code-predictor sampler and seed of tb_set_sampling (no talker processing),
 * as draw (frame, group); *out receives the id (-1: no finite logit).
 * exact = 1 runs the reference forms of the top-k select and the draw that
 * the fast paths fall back to (radix select, serial float64 chain): the
 * picks must be the same either way.
 */
int tb_sample(tb_engine *e, const float *logits, int n, int frame, int group, int exact, int32_t *out);

/* What tb_bench times. */
enum { TB_BENCH_TALKER_STEP = 0, TB_BENCH_PREDICTOR_STEP = 1, TB_BENCH_FRAME = 2, TB_BENCH_PREFILL = 3 };

/* Time `iters` launches of one kind with CUDA events (after a prefill); ms[i] per launch. */
int tb_bench(tb_engine *e, int what, int iters, float *ms);

#ifdef __cplusplus
}
#endif
#endif
