/*
 * talkbox_codec: the Qwen3-TTS-12Hz speech-tokenizer decoder on a CUDA GPU,
 * as a stateful streaming decoder. One push of n frames (16 codes each) gives
 * n*samples_per_frame float32 samples; every causal history (conv inputs,
 * transposed-conv previous input, transformer K/V of the last window-1
 * positions, RoPE position) stays on the device between pushes, so no frame
 * is decoded twice. fp32 activations, weights and sums throughout; the
 * products of a push of one stream are float32-accurate (3xTF32 on the tensor
 * cores), those of a push of several streams (a bucket of 2 or more, below)
 * take one TF32 pass on the larger products: operands rounded to 10-bit
 * mantissas, as PyTorch runs float32 convolutions on these GPUs by default.
 * A stream of such a push differs from its decode alone by about 1e-3 of the
 * signal (relative L2; engine/cudacodec's TestPoolStreamsMatchAlone), and a
 * launch of 16 streams takes a sixth less time, 64 a quarter (H100).
 *
 * C ABI, loaded with dlopen by engine/cudacodec (through engine/nativelib).
 * Weights are given as host float32 pointers in the layouts of engine/codec's
 * CPU decoder (see engine/codec/export.go) and copied to the device by
 * tbc_create; the caller may free them afterwards.
 *
 * Errors (the same in talkbox_native.h): a function that can fail returns 0
 * on success and -1 on failure, or NULL for a constructor; tbc_last_error()
 * then describes the failure. The message is thread-local, valid until the
 * next call on the same thread, so a caller copies it on the thread of the
 * failed call.
 *
 * Streams live in pools (tbc_pool): a pool holds the state of up to `slots`
 * streams, and one tbc_pool_push decodes the next frames of several of its
 * streams in one pass over the weights, which is how many streams share one
 * GPU (each stream alone would read every weight per push). Each pool has
 * its own non-blocking CUDA stream and captures one CUDA graph per (number
 * of streams, rounded up to a bucket: 1, 2, 3, 4, 6, 8, 12, 16, 24, ...) and
 * frames per push (1..8; larger pushes run in 8-frame steps), unless
 * tbc_params.cuda_graphs is 0. A push of fewer streams than its bucket
 * decodes the rest as zeros into a scratch slot. A pool's functions must not
 * be called concurrently.
 */
#ifndef TALKBOX_CODEC_H
#define TALKBOX_CODEC_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define TBC_ABI_VERSION 3
#define TBC_GROUPS 16
#define TBC_MAX_LAYERS 32
#define TBC_MAX_UP 4
#define TBC_MAX_BLOCKS 6

typedef struct {
	const float *w, *b; /* w [out][k][in]; b [out] or NULL */
	int in, out, k, dil;
} tbc_conv;

typedef struct {
	const float *w, *b; /* w [stride*out][taps*in]: tap for x[t], then tap for x[t-1]; b [stride*out] */
	int in, out, stride, taps;
} tbc_transconv;

typedef struct {
	const float *a, *ib; /* exp(alpha), 1/(exp(beta)+1e-9), [channels] */
} tbc_snake;

typedef struct {
	const float *in_norm, *post_norm, *attn_scale, *mlp_scale; /* [hidden] */
	const float *q, *k, *v;                                   /* [heads*head_dim][hidden], [kv_heads*head_dim][hidden] */
	const float *o;                                           /* [hidden][heads*head_dim] */
	const float *gate, *up;                                   /* [intermediate][hidden] */
	const float *down;                                        /* [hidden][intermediate] */
} tbc_layer;

typedef struct {
	tbc_transconv up;                 /* latent -> latent */
	const float *dw, *dw_b;           /* depthwise [latent][7], [latent] */
	const float *ln_w, *ln_b;         /* LayerNorm eps 1e-6 */
	const float *pw1_w, *pw1_b;       /* [4*latent][latent] */
	const float *pw2_w, *pw2_b;       /* [latent][4*latent] */
	const float *gamma;               /* [latent] */
	int pw_hidden;                    /* rows of pw1 (4*latent) */
} tbc_upsample;

typedef struct {
	tbc_snake act1, act2;
	tbc_conv conv1, conv2; /* conv1 k=7 dilated, conv2 k=1 */
} tbc_unit;

typedef struct {
	tbc_snake act;
	tbc_transconv up;
	tbc_unit units[3];
} tbc_block;

typedef struct {
	/* shapes */
	int codebook_size, cb_dim, codebook_dim; /* rows per codebook, row width (256), projected width (512) */
	int latent, hidden, heads, kv_heads, head_dim, intermediate, layers, window;
	double rms_eps;
	int n_up, n_blocks;
	/* quantizer */
	const float *codebooks[TBC_GROUPS];      /* [codebook_size][cb_dim] each */
	const float *proj_first, *proj_rest;     /* [codebook_dim][cb_dim] */
	tbc_conv pre_conv;                       /* codebook_dim -> latent, k=3 */
	/* transformer */
	const float *in_proj_w, *in_proj_b;      /* [hidden][latent] */
	const float *out_proj_w, *out_proj_b;    /* [latent][hidden] */
	const float *final_norm;                 /* [hidden] */
	const float *inv_freq;                   /* [head_dim/2] */
	tbc_layer layer[TBC_MAX_LAYERS];
	/* upsampler and vocoder */
	tbc_upsample up[TBC_MAX_UP];
	tbc_conv voc0;
	tbc_block block[TBC_MAX_BLOCKS];
	tbc_snake final_act;
	tbc_conv final_conv; /* out = 1 */
} tbc_weights;

/* Choices made at create time; start from tbc_default_params(). */
typedef struct {
	int device;      /* CUDA device index (0) */
	int cuda_graphs; /* 1: each pool replays one CUDA graph per push shape (the default); 0: direct launches */
} tbc_params;

typedef struct tbc_model tbc_model; /* device weights, shared by pools */
typedef struct tbc_pool tbc_pool;   /* the decoder state of several streams, decoded together */

int tbc_abi_version(void);
const char *tbc_last_error(void);
int tbc_device_count(void);
int tbc_device_name(int device, char *name, int cap);

/* The defaults of every tbc_params field (documented there). */
tbc_params tbc_default_params(void);
/* Uploads w (which may be released afterwards) with params p (NULL: the defaults). */
tbc_model *tbc_create(const tbc_weights *w, const tbc_params *p);
void tbc_destroy(tbc_model *m);
int tbc_samples_per_frame(const tbc_model *m);

/* The largest pool (256 slots). */
int tbc_max_pool_slots(void);
/* tbc_pool_create allocates the state of `slots` streams (1..256), each at
 * frame 0 with zero history: per slot ~6 MB per frame of the largest push (8)
 * at the released shapes, plus the buffers of one push of every slot. Fails
 * (NULL) when the GPU lacks the memory. */
tbc_pool *tbc_pool_create(tbc_model *m, int slots);
void tbc_pool_destroy(tbc_pool *p);
int tbc_pool_slots(const tbc_pool *p);
/* tbc_pool_push decodes `frames` frames for each of n streams: slots [n]
 * (distinct, each 0..slots-1), codes [n][frames][16] (each
 * 0..codebook_size-1), out [n][frames*samples_per_frame]. A bad slot or code
 * fails the push before anything runs. */
int tbc_pool_push(tbc_pool *p, const int32_t *slots, int n, const int32_t *codes, int frames, float *out);
/* tbc_pool_reset returns one slot to frame 0 with zero history. */
int tbc_pool_reset(tbc_pool *p, int slot);
/* tbc_pool_warm captures the graphs of pushes of `frames` frames (1..8) for
 * every bucket of the pool now, so that the first such push of each size
 * does not (captured, not run: no slot changes). */
int tbc_pool_warm(tbc_pool *p, int frames);
/* ---------------------------------------------------------------------------
 * Benchmark hook (`talkbox bench`): not needed to decode. */

/* tbc_pool_bench times iters pushes of `frames` frames (1..8) for streams in
 * slots 0..n-1 (codes [iters][n][frames][16]) with CUDA events around each
 * graph launch (codes upload, decode, samples download), writing iters
 * times in ms. */
int tbc_pool_bench(tbc_pool *p, int n, const int32_t *codes, int frames, int iters, float *ms);

#ifdef __cplusplus
}
#endif
#endif
