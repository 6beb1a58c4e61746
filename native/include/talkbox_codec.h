/*
 * talkbox_codec: the Qwen3-TTS-12Hz speech-tokenizer decoder on a CUDA GPU,
 * as a stateful streaming decoder. One push of n frames (16 codes each) gives
 * n*samples_per_frame float32 samples; every causal history (conv inputs,
 * transposed-conv previous input, transformer K/V of the last window-1
 * positions, RoPE position) stays on the device between pushes, so no frame
 * is decoded twice. fp32 throughout.
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
 * Each stream has its own non-blocking CUDA stream and captures one CUDA
 * graph per push size (1..8 frames; larger pushes run in 8-frame steps),
 * unless tbc_params.cuda_graphs is 0.
 */
#ifndef TALKBOX_CODEC_H
#define TALKBOX_CODEC_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define TBC_ABI_VERSION 2
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
	int cuda_graphs; /* 1: each stream replays one CUDA graph per push size (the default); 0: direct launches */
} tbc_params;

typedef struct tbc_model tbc_model;   /* device weights, shared by streams */
typedef struct tbc_stream tbc_stream; /* one utterance's state and buffers */

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

tbc_stream *tbc_stream_create(tbc_model *m);
void tbc_stream_destroy(tbc_stream *s);
/* tbc_push decodes n frames (codes [n][16], each 0..codebook_size-1) and
 * writes n*samples_per_frame samples to out. */
int tbc_push(tbc_stream *s, const int32_t *codes, int n, float *out);
/* tbc_reset returns the stream to frame 0 with zero history. */
int tbc_reset(tbc_stream *s);
/* tbc_frames is the number of frames decoded since the last reset. */
int64_t tbc_frames(const tbc_stream *s);
/* ---------------------------------------------------------------------------
 * Benchmark hook (`talkbox bench`): not needed to decode. */

/* tbc_bench times iters pushes of n frames each (codes [iters*n][16]) with
 * CUDA events around each graph launch, writing iters times in ms. */
int tbc_bench(tbc_stream *s, const int32_t *codes, int n, int iters, float *ms);

#ifdef __cplusplus
}
#endif
#endif
