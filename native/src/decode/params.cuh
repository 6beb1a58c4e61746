// Compile-time sizes, launch modes, and the kernels' parameter block (Params) with
// the device views of weights, caches and buffers it points to.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include <cstdint>

// Debug build switch (build.sh passes TB_DEFS): per-phase cycle counts of
// CTA 0, printed by tb_bench.
#ifndef TB_PROF
#define TB_PROF 0
#endif

namespace tb {

constexpr int NT = 512;          // threads per CTA
constexpr int NW = NT / 32;      // warps per CTA
// Copies of the fused residual rows that gate_up_down's red.add spreads over
// (CTA b adds into copy b % NCOPY; readers add the copies as integers). Two
// halve the 132-way contention on each sum (H100: talker step -10 us); four
// made every prelude read four rows and lost (talker +60 us).
constexpr int NCOPY = 2;
static_assert((NCOPY & (NCOPY - 1)) == 0, "NCOPY: a power of two");
constexpr int HD = 128;          // head_dim (checked at create)
constexpr int TILE = 256;        // attention positions per softmax tile
constexpr int MAXG = 16;         // codes per frame
constexpr int EARLYW = 2 + MAXG;  // early codes: sequence, codes[MAXG], bad flag
constexpr int PSTRIDE = HD + 4;  // one attention partial: 128 sums, max, sum of weights, pad (16-byte rows)

enum Mode { MODE_PREFILL = 0, MODE_FRAME = 1, MODE_TALKER = 2, MODE_PREDICTOR = 3 };

// Profiled phases (TB_PROF): [stack][phase][0 = work, 1 = barrier wait] in
// cycles of CTA 0, then launch cycles, launch ns and launch count.
// The sampler's parts: s-load (logits in, processed), s-kth (top-k
// threshold), s-comp (kept ids and their exp); "sample" is what follows.
// The fused attention's parts: a-rope (q, k and v to the first CTA barrier),
// a-kv (each warp's scores and weighted values), a-ctx (the warps merged);
// "o" is what follows (the O rows).
enum Phase { PH_QKV, PH_ATTN, PH_O, PH_GU, PH_DOWN, PH_HEAD, PH_SAMPLE, PH_PROJ, PH_OTHER, PH_SLOAD, PH_SKTH, PH_SCOMP,
             PH_AROPE, PH_AKV, PH_ACTX, NPH };
constexpr int PROF_WORDS = 2 * NPH * 2 + 3;

// Shared-memory layout of the fixed part (bytes): red, sf, sint, codes; then
// the layer-pointer table (layer_table_bytes), then xs.
constexpr int SM_XS = 3072;  // red 256 B, sf 256 B, sint (64 + 512 ints), codes 64 B; 128-byte aligned

struct LayerD {
  const uint16_t *in_norm, *post_norm, *qkv, *o, *q_norm, *k_norm, *gate, *up, *down;
  const uint16_t* down_t;  // W_down transposed, [I][H]: the one-phase MLP's split-K rows
};

// Bytes of shared memory for every layer's pointers (decode and prefill
// kernels: the talker's layers, then the predictor's), between the fixed part
// and xs.
__host__ __device__ constexpr size_t layer_table_bytes(int layers) {
  return ((size_t)layers * sizeof(LayerD) + 127) & ~(size_t)127;
}

struct StackD {
  const LayerD* layers;
  int L, H, I, nh, nkv;
  float eps;
  const uint16_t* final_norm;
  uint16_t *kc, *vc;  // [L][nkv][cap][HD]
  int cap;
  const float2* rope;  // [cap][HD/2]: cos and sin of position x inv_freq (rope_table)
};

struct SamplerD {
  int do_sample;
  float temperature;
  int top_k;
  float top_p;
  float penalty;
};

// The kernels' one parameter block (passed __grid_constant__), in four parts:
// what the model is (set at create), where the work happens (buffers allocated
// at create), what this launch does (set before each launch), and the debug
// build's counters.
struct WeightsD {
  StackD tk, cp;  // the talker and the code predictor (their KV caches and RoPE tables too)
  const uint16_t *codec_head, *codec_emb, *cp_heads, *cp_embs, *proj_w, *proj_b;
  int V, Vp, G;                  // talker vocabulary, predictor vocabulary, codes per frame
  int eos, supp_from, min_new;   // group-0 rules: EOS id, first suppressed id, EOS masked below min_new tokens
};

struct BuffersD {
  float* x;       // residual [mmax][xstride]
  int xstride;
  long long* xfix;  // [3 NCOPY - 1][xstride]: the fused steps' residual sums (fixed point): rows 0-1 by layer
                    // parity, row 2 the O rows, then the parity rows' other copies (fix_row)
  float* qkv;     // [mmax][qkv_stride]
  int qkv_stride;
  float* part;    // attention partials [mmax][nh][cmax][PSTRIDE]
  int cmax;
  float* act;     // [mmax][act_stride]
  int act_stride;
  float* hidden;  // talker final-normed hidden [H]
  float* tlogits; // [V]
  float* plogits; // [G-1][Vp]
  uint32_t* hist; // group-0 history bitmap
  double* samp_scratch;  // [grid][2V] doubles: sampler scratch when candidates exceed CAND
  int32_t* state; // [0] sampled g0, [1..16] codes fed back last frame
  int32_t* early; // mapped host memory [EARLYW]: a frame's codes before its talker step (seqlock)
  const float* pad;  // tts_pad row [H]
  int mmax;       // tokens a prefill pass takes (rows of x, qkv, act)
  // gate_up_down's split of the down projection: `shares` row sets (row j in
  // share j mod shares), a multiple of every grid the decode kernels launch
  // with, so a sum's terms and their order do not depend on the grid.
  int shares;
};

struct LaunchD {
  int mode, p0, m, chunks, frame, tpos, last, bench_step;  // Mode; prefill rows p0..p0+m-1; talker position
  int32_t* out;   // this launch's output slot [18]
  int early_seq;  // this frame's sequence number in BuffersD::early
  const float* rows;  // prefill rows of this chunk
  const float* trail; // the utterance's per-step text rows [ntrail][H]
  int ntrail;
  unsigned* bar;
  unsigned* bar_next;  // launch()'s other barrier counter: zeroed by this launch for the next one
  SamplerD st, sp;     // talker and predictor sampling
  unsigned long long seed;
  int mask_eos;
  int use_teacher;
  int teacher[MAXG];
};

struct DebugD {
  unsigned long long* prof;  // PROF_WORDS counters (TB_PROF builds)
};

struct Params {
  WeightsD w;
  BuffersD buf;
  LaunchD arg;
  DebugD dbg;
};

}  // namespace tb
