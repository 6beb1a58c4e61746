// The persistent decode kernel: one cooperative launch runs a whole talker
// step, a code-predictor step, a whole frame (15 predictor steps + the next
// talker step) or one prefill chunk. Phases are separated by a grid barrier;
// every CTA samples redundantly from the same logits, so no broadcast is needed.
#pragma once
#include <cstdint>
#include <math_constants.h>

// Compile-time switches for measurement builds (build.sh passes TB_DEFS).
#ifndef TB_PROF
#define TB_PROF 0  // per-phase cycle counts of CTA 0, printed by tb_bench
#endif
#ifndef TB_BARBENCH
#define TB_BARBENCH 0  // a talker-step launch runs 1000 grid barriers instead
#endif

namespace tb {

#ifndef TB_NT
#define TB_NT 512  // A/B: threads per CTA
#endif
constexpr int NT = TB_NT;        // threads per CTA
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

struct Params {
  StackD tk, cp;
  const uint16_t *codec_head, *codec_emb, *cp_heads, *cp_embs, *proj_w, *proj_b;
  int V, Vp, G, eos, supp_from, min_new, mask_eos;
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
  int32_t* out;   // this launch's output slot [18]
  int32_t* early; // mapped host memory [EARLYW]: a frame's codes before its talker step (seqlock)
  int early_seq;  // this frame's sequence number there
  const float* rows;  // prefill rows of this chunk
  const float* trail;
  int ntrail;
  const float* pad;
  unsigned* bar;
  unsigned* bar_next;  // launch()'s other barrier counter: zeroed by this launch for the next one
  unsigned long long* prof;  // PROF_WORDS counters (TB_PROF builds)
  SamplerD st, sp;
  unsigned long long seed;
  int mode, p0, m, chunks, frame, tpos, last, bench_step, mmax;
  int use_teacher;
  int teacher[MAXG];
};

// ---------------------------------------------------------------- helpers

__device__ __forceinline__ float bflo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bfhi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ float bf(uint16_t h) { return __uint_as_float(((uint32_t)h) << 16); }
__device__ __forceinline__ uint16_t f2bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (uint16_t)(u >> 16);
}

// The one-phase MLP (gate_up_down) sums the next residual from every CTA's
// partial with 64-bit integer red.add (fixed point): integer sums do not depend on the order
// the CTAs arrive in, so a step gives the same bits every run (float atomics
// would not, and sampling must be reproducible). 32 fraction bits: |x| < 2^31,
// resolution 2.3e-10; out-of-range values saturate (cvt clamps).
__device__ __forceinline__ long long to_fix(float f) { return __float2ll_rn(f * 4294967296.f); }
__device__ __forceinline__ float from_fix(long long v) { return __ll2float_rn(v) * (1.f / 4294967296.f); }

// Weights are read once per step and never written: stream them past L1.
__device__ __forceinline__ uint4 ldw(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ float dot8(uint4 w, const float* x) {
  float4 a = *reinterpret_cast<const float4*>(x);
  float4 b = *reinterpret_cast<const float4*>(x + 4);
  float r = bflo(w.x) * a.x;
  r = fmaf(bfhi(w.x), a.y, r);
  r = fmaf(bflo(w.y), a.z, r);
  r = fmaf(bfhi(w.y), a.w, r);
  r = fmaf(bflo(w.z), b.x, r);
  r = fmaf(bfhi(w.z), b.y, r);
  r = fmaf(bflo(w.w), b.z, r);
  r = fmaf(bfhi(w.w), b.w, r);
  return r;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Inclusive prefix sum over the warp's lanes (lane order).
template <class T>
__device__ __forceinline__ T warp_incl_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

// Calls use(i, load(i)) for this thread's elements i = threadIdx.x + q * NT
// < n, B at a time, every load of a batch issued before any use: a loop that
// loads and uses element by element pays a dependent global round trip (about
// a microsecond under load) per element, on the critical path of a step.
template <int B, class Load, class Use>
__device__ __forceinline__ void batched(int n, Load load, Use use) {
  for (int base = 0; base < n; base += B * NT) {
    decltype(load(0)) v[B];
#pragma unroll
    for (int q = 0; q < B; q++) {
      const int i = base + threadIdx.x + q * NT;
      if (i < n) v[q] = load(i);
    }
#pragma unroll
    for (int q = 0; q < B; q++) {
      const int i = base + threadIdx.x + q * NT;
      if (i < n) use(i, v[q]);
    }
  }
}

// Grid barrier. The counter is zero when a launch starts (the launch before
// it, which used the other of launch()'s two counters, zeroed it: stream
// order) and only ever incremented inside the launch, so it can neither race
// with a reset nor wrap (a launch has < 1000 barriers x grid CTAs).
struct Grid {
  unsigned* bar;
  unsigned target;
  int stack;                    // profiling: 0 talker, 1 code predictor
  unsigned long long* acc;      // profiling: shared counters (CTA 0)
  unsigned long long t_last;
  __device__ void mark(int ph) {  // thread 0 only: work since the last mark
#if TB_PROF
    const unsigned long long now = clock64();
    if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2] += now - t_last;
    t_last = now;
#endif
  }
  __device__ void sync(int ph = PH_OTHER) {
    target += gridDim.x;
    __syncthreads();
#if TB_PROF
    unsigned long long arrive = 0;
    if (threadIdx.x == 0) {
      arrive = clock64();
      if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2] += arrive - t_last;
    }
#endif
    // bar.sync orders the CTA's writes before this release (cumulative).
    // No extra fences: measured 1.41 us per 132-CTA barrier against 1.75
    // with __threadfence on both sides.
    if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
    // Acquire loads in the spin: 1.00 us per barrier (TB_BARBENCH, H100)
    // against 1.35 for relaxed polls and one fence.acq_rel after them.
    // One poller a CTA: every warp polling itself measured slower (frame
    // 3.61 against 3.06 ms).
    if (threadIdx.x == 0) {
      unsigned v;
      int n = 0;
      while (true) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
        if (v >= target) break;
        if (++n > 64) __nanosleep(32);
      }
    }
#if TB_PROF
    if (threadIdx.x == 0) {
      const unsigned long long rel = clock64();
      if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2 + 1] += rel - arrive;
      t_last = rel;
    }
#endif
    __syncthreads();
  }
};

// A profiling mark from code that has the grid only by pointer (TB_PROF).
__device__ __forceinline__ void prof_mark(Grid* g, int ph) {
  if (TB_PROF && g && threadIdx.x == 0) g->mark(ph);
}

// ---------------------------------------------------------------- matvec

// The grid-wide warp index rows are dealt by: CTA-major, so a matrix with
// fewer rows than the grid has warps still spreads over every SM (the down
// projection's 1024 rows went to 64 of 132 CTAs in warp-major order; measured
// on an H100: talker step 0.758 -> 0.737 ms with WIDE below).
__device__ __forceinline__ int row_warp() { return (threadIdx.x >> 5) * gridDim.x + blockIdx.x; }

// y[r] = W[r,:] . xs[t,:] for every row r, tokens t < m (MT >= m is the
// compile-time token count). Rows are dealt to warps grid-wide; each warp
// takes two rows at once so eight 16-byte loads per lane are in flight.
// WIDE (one token, long rows: down, unfused O): one row a warp, twelve loads
// a lane, so a 3072-wide row is one load round instead of three.
// pre() (every thread, once) writes xs, the activations, just before the
// row loop (as written this way the build was measured and tested).
template <int MT, bool WIDE = false, bool EARLY = false, class F, class P>
__device__ __forceinline__ void matvec(const uint16_t* W, int N, int K, const float* xs, int xstride, int m,
                                       F store, P pre) {
  // Few tokens: two rows per warp for loads in flight. Many tokens: one row,
  // fewer loads per batch, so the accumulators fit in registers.
  constexpr bool WD = WIDE && MT == 1;
  constexpr bool PAIR = MT <= 2 && !WD;
  constexpr int U = WD ? 12 : MT <= 2 ? 4 : 2;
  const int lane = threadIdx.x & 31;
  const int gw = row_warp();
  const int TW = gridDim.x * NW;
  const int nch = K >> 3;
  const int step = PAIR ? 2 * TW : TW;
  uint4 wa[U], wb[PAIR ? U : 1];
  auto load = [&](int r, int c0) {
    const int r2 = r + TW;
    const bool two = PAIR && r2 < N;
    const uint4* pa = reinterpret_cast<const uint4*>(W + (size_t)r * K);
    const uint4* pb = reinterpret_cast<const uint4*>(W + (size_t)(two ? r2 : r) * K);
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int c = c0 + 32 * u;
      wa[u] = c < nch ? ldw(pa + c) : make_uint4(0, 0, 0, 0);
      if (PAIR) wb[PAIR ? u : 0] = (two && c < nch) ? ldw(pb + c) : make_uint4(0, 0, 0, 0);
    }
  };
  // EARLY: this warp's first weights are issued from inside pre(), right
  // after its activation loads (pre(hook) calls hook() there).
  bool first = EARLY;
  if constexpr (EARLY) pre([&] { if (gw < N) load(gw, lane); });
  else pre();
  for (int r = gw; r < N; r += step) {
    const int r2 = r + TW;
    const bool two = PAIR && r2 < N;
    float a[MT], b[PAIR ? MT : 1];
#pragma unroll
    for (int t = 0; t < MT; t++) a[t] = 0.f;
#pragma unroll
    for (int t = 0; t < (PAIR ? MT : 1); t++) b[t] = 0.f;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) {
      if (!first) load(r, c0);
      first = false;
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int c = c0 + 32 * u;
        if (c < nch) {
#pragma unroll
          for (int t = 0; t < MT; t++) {
            a[t] += dot8(wa[u], xs + t * xstride + c * 8);
            if (PAIR) b[PAIR ? t : 0] += dot8(wb[PAIR ? u : 0], xs + t * xstride + c * 8);
          }
        }
      }
    }
#pragma unroll
    for (int t = 0; t < MT; t++) a[t] = warp_sum(a[t]);
    if (PAIR) {
#pragma unroll
      for (int t = 0; t < (PAIR ? MT : 1); t++) b[t] = warp_sum(b[t]);
    }
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < MT; t++) {
        if (t < m) {
          store(r, t, a[t]);
          if (PAIR && two) store(r2, t, b[PAIR ? t : 0]);
        }
      }
    }
  }
}

// act[t][r] = SiLU(gate[r].xs[t]) * (up[r].xs[t]): one warp owns both rows.
// pre() as in matvec.
template <int MT, bool EARLY = false, class P>
__device__ __forceinline__ void matvec_gate_up(const uint16_t* Wg, const uint16_t* Wu, int N, int K, const float* xs,
                                               int xstride, int m, float* act, int act_stride, P pre) {
  const int lane = threadIdx.x & 31;
  const int gw = row_warp();
  const int TW = gridDim.x * NW;
  const int nch = K >> 3;
  constexpr int U = MT <= 2 ? 4 : 2;
  uint4 wa[U], wb[U];
  auto load = [&](int r, int c0) {
    const uint4* pa = reinterpret_cast<const uint4*>(Wg + (size_t)r * K);
    const uint4* pb = reinterpret_cast<const uint4*>(Wu + (size_t)r * K);
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int c = c0 + 32 * u;
      wa[u] = c < nch ? ldw(pa + c) : make_uint4(0, 0, 0, 0);
      wb[u] = c < nch ? ldw(pb + c) : make_uint4(0, 0, 0, 0);
    }
  };
  bool first = EARLY;  // as in matvec
  if constexpr (EARLY) pre([&] { if (gw < N) load(gw, lane); });
  else pre();
  for (int r = gw; r < N; r += TW) {
    float a[MT], b[MT];
#pragma unroll
    for (int t = 0; t < MT; t++) a[t] = b[t] = 0.f;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) {
      if (!first) load(r, c0);
      first = false;
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int c = c0 + 32 * u;
        if (c < nch) {
#pragma unroll
          for (int t = 0; t < MT; t++) {
            a[t] += dot8(wa[u], xs + t * xstride + c * 8);
            b[t] += dot8(wb[u], xs + t * xstride + c * 8);
          }
        }
      }
    }
#pragma unroll
    for (int t = 0; t < MT; t++) {
      a[t] = warp_sum(a[t]);
      b[t] = warp_sum(b[t]);
    }
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < MT; t++)
        if (t < m) act[t * act_stride + r] = a[t] / (1.f + expf(-a[t])) * b[t];
    }
  }
}

// ---------------------------------------------------------------- norms

// 1 / sqrt(mean of squares + eps) of an H-vector whose squares this thread
// summed into ss: a warp sum, then one barrier to add the warps (red: NW floats).
__device__ __forceinline__ float rms_scale(float ss, int H, float eps, float* red) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  ss = warp_sum(ss);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int k = 0; k < NW; k++) tot += red[k];
  return rsqrtf(tot / (float)H + eps);
}

// Copy c of the fused residual's row r (xfix): rows 0-1 copy 0, row 2 the O
// rows, copy c of rows 0-1 three rows further on per copy.
__host__ __device__ constexpr int fix_row(int r, int c) { return r + 3 * c; }

// fix_sum's f2 for rows of stride xs: the offset from a copy to the next.
__device__ __forceinline__ size_t fix_copy_offset(size_t xs) { return NCOPY > 1 ? (size_t)fix_row(0, 1) * xs : 0; }


// Element i of a fused residual row p: the sum of its copies (f2: the offset
// from a copy to the next, 3 rows; 0 when p has one copy), integers, so the
// order does not matter.
__device__ __forceinline__ long long fix_sum(const long long* p, size_t f2, int i) {
  long long v = __ldcg(p + i);
#pragma unroll
  for (int c = 1; c < NCOPY; c++) v += f2 ? __ldcg(p + c * f2 + i) : 0;
  return v;
}

struct NoHook {
  __device__ void operator()() const {}
};

// RMSNorm of m rows in place in shared memory (fp32: x * rsqrt(mean(x^2)+eps) * w).
// src, when not null, is first copied in (data written earlier in this launch:
// L1-bypassing loads). fsrc (one row, instead of src): the fixed-point sums of
// gate_up_down, with its copies f2 apart (fix_sum). hook: called (one row)
// right after the loads are issued, for the caller's own loads (matvec's EARLY).
template <class Hook = NoHook>
__device__ __forceinline__ void norm_rows(float* xs, int xstride, const float* src, int src_stride, int m, int H,
                          const uint16_t* w, float eps, float* red, const long long* fsrc = nullptr,
                          size_t f2 = 0, Hook hook = Hook()) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // The norm weights do not depend on the barrier: issue their loads first so
  // they overlap the activation loads (one L2 round trip instead of two).
  float wv[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const int i = threadIdx.x + k * NT;
    wv[k] = i < H ? bf(w[i]) : 0.f;
  }
  if (m == 1 && H <= 4 * NT) {
    // One row: every thread squares the elements it loaded, so the sum is a
    // warp reduction and one barrier, not warp 0 walking the whole row (H100:
    // talker step 0.735 -> 0.726 ms, frame 3.036 -> 2.982 in one call).
    float v[4];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int i = threadIdx.x + k * NT;
      v[k] = i < H ? (fsrc ? from_fix(fix_sum(fsrc, f2, i)) : src ? __ldcg(src + i) : xs[i]) : 0.f;
    }
    hook();
    // Squared after all four loads (see the down projection's prelude).
#pragma unroll
    for (int k = 0; k < 4; k++) ss += v[k] * v[k];
    const float r = rms_scale(ss, H, eps, red);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int i = threadIdx.x + k * NT;
      if (i < H) xs[i] = v[k] * r * wv[k];
    }
    __syncthreads();
    return;
  }
  if (fsrc) {
    batched<4>(
        H, [&](int i) { return from_fix(fix_sum(fsrc, f2, i)); },
        [&](int i, float v) { xs[i] = v; });
    __syncthreads();
  } else if (src) {
    batched<4>(
        m * H,
        [&](int i) {
          const int t = i / H;
          return __ldcg(src + (size_t)t * src_stride + (i - t * H));
        },
        [&](int i, float v) {
          const int t = i / H;
          xs[t * xstride + (i - t * H)] = v;
        });
    __syncthreads();
  }
  for (int t = warp; t < m; t += NW) {
    float s = 0.f;
    for (int i = lane; i < H; i += 32) {
      const float v = xs[t * xstride + i];
      s += v * v;
    }
    s = warp_sum(s);
    if (lane == 0) red[t] = rsqrtf(s / (float)H + eps);
  }
  __syncthreads();
  for (int t = 0; t < m; t++) {
    const float r = red[t];
    if (H <= 4 * NT) {
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const int i = threadIdx.x + k * NT;
        if (i < H) xs[t * xstride + i] = xs[t * xstride + i] * r * wv[k];
      }
      continue;
    }
    for (int i = threadIdx.x; i < H; i += NT) xs[t * xstride + i] = xs[t * xstride + i] * r * bf(w[i]);
  }
  __syncthreads();
}

// Per-head RMSNorm then rotate-half RoPE of one 128-vector, by one warp.
// Lane l holds elements l, l+32, l+64, l+96: the RoPE pairs (i, i+64) stay
// in-lane. rope: the stack's table (rope_table), whose row pos holds the
// cosines and sines this lane needs. Computing them here (sincosf) put its
// slow path's local array and registers into every decode kernel (H100:
// talker step -20 us, frame -40, with the 32-bit input gather).
__device__ __forceinline__ void norm_rope(const float* raw, const uint16_t* w, float eps, int pos,
                                          const float2* rope, float* out) {
  const int lane = threadIdx.x & 31;
  // The norm weights and the table row are loaded with the vector: written
  // at their use, the compiler issued them after the warp sum, a second round
  // trip on the fused attention's critical path.
  float v[4], wn[4];
  float2 cs[2];
#pragma unroll
  for (int i = 0; i < 4; i++) v[i] = __ldcg(raw + lane + 32 * i);
#pragma unroll
  for (int i = 0; i < 4; i++) wn[i] = bf(__ldg(w + lane + 32 * i));
#pragma unroll
  for (int i = 0; i < 2; i++) cs[i] = __ldg(rope + (size_t)pos * (HD / 2) + lane + 32 * i);
  float s = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
  s = warp_sum(s);
  const float r = rsqrtf(s / (float)HD + eps);
#pragma unroll
  for (int i = 0; i < 4; i++) v[i] = v[i] * r * wn[i];
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int f = lane + 32 * i;
    out[f] = v[i] * cs[i].x - v[i + 2] * cs[i].y;
    out[f + 64] = v[i + 2] * cs[i].x + v[i] * cs[i].y;
  }
}

// The RoPE table of a stack: row p, column j = (cos, sin) of p x inv_freq[j],
// the float32 product as the official code forms it. One block a position.
__global__ void rope_table(const float* inv_freq, int cap, float2* out) {
  const int p = blockIdx.x, j = threadIdx.x;
  if (p >= cap || j >= HD / 2) return;
  float sn, cs;
  sincosf((float)p * inv_freq[j], &sn, &cs);
  out[(size_t)p * (HD / 2) + j] = make_float2(cs, sn);
}

// One warp: the new position's k (normed, RoPE'd) into kout and its v into
// vout. v is loaded with k, not after k's norm: one round trip, not two.
__device__ __forceinline__ void new_kv(const float* rawk, const float* rawv, const uint16_t* kn, float eps, int pos,
                                       const float2* rope, float* kout, float* vout) {
  const int lane = threadIdx.x & 31;
  float vv[HD / 32];
#pragma unroll
  for (int i = 0; i < HD / 32; i++) vv[i] = __ldcg(rawv + lane + 32 * i);
  norm_rope(rawk, kn, eps, pos, rope, kout);
#pragma unroll
  for (int i = 0; i < HD / 32; i++) vout[lane + 32 * i] = vv[i];
}

// ---------------------------------------------------------------- attention

// Writes one position's k and v (fp32, one warp) into layer l's bf16 cache of
// kv head kvh.
__device__ __forceinline__ void store_kv(const StackD& S, int l, int nkv, int kvh, int pos, const float* k,
                                         const float* v, int lane) {
  const size_t off = (((size_t)l * nkv + kvh) * S.cap + pos) * HD;
  for (int d = lane; d < HD; d += 32) {
    S.kc[off + d] = f2bf(k[d]);
    S.vc[off + d] = f2bf(v[d]);
  }
}

// This lane's 4 elements of cache rows pb + k * NW (k < KB) below p0, as bf16
// pairs, every load issued before any is used.
template <int KB>
__device__ __forceinline__ void load_cache_rows(const uint16_t* C, int pb, int p0, int lane, uint2 (&u)[KB]) {
#pragma unroll
  for (int k = 0; k < KB; k++) {
    const int p = pb + k * NW;
    u[k] = p < p0 ? __ldcg(reinterpret_cast<const uint2*>(C + (size_t)p * HD + lane * 4)) : make_uint2(0u, 0u);
  }
}

// Position p's 4 elements of this lane: unpacked from the loaded cache row u
// below p0, else from the fresh fp32 rows (row p - n0).
__device__ __forceinline__ void row4(uint2 u, const float* fresh, int p, int p0, int n0, int lane, float (&out)[4]) {
  if (p < p0) {
    out[0] = bflo(u.x); out[1] = bfhi(u.x); out[2] = bflo(u.y); out[3] = bfhi(u.y);
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) out[i] = fresh[(p - n0) * HD + lane * 4 + i];
  }
}

// acc += wgt x position p's value row (row4's source), lsum += wgt.
__device__ __forceinline__ void add_weighted(uint2 u, const float* fresh, int p, int p0, int n0, int lane, float wgt,
                                             float (&acc)[4], float& lsum) {
  float v4[4];
  row4(u, fresh, p, p0, n0, lane, v4);
#pragma unroll
  for (int i = 0; i < 4; i++) acc[i] = fmaf(wgt, v4[i], acc[i]);
  lsum += wgt;
}

// Online softmax of one query (q4: this lane's 4 elements) over positions
// [b0, b1), accumulated into mrun, lsum and acc: positions below p0 from the
// bf16 cache rows Kc/Vc, the others from the fresh rows snk/snv (row p - n0).
// A warp takes positions ts + warp + k * NW of each TILE and issues KB cache
// loads before using any: one L2 round trip per KB * NW positions (the chunked
// attention keeps KB = 1: its chunks are short, and more live registers grew
// the decode kernel's stack frame).
template <int KB>
__device__ __forceinline__ void attend_span(const uint16_t* Kc, const uint16_t* Vc, int b0, int b1, int p0, int n0,
                                            const float* snk, const float* snv, const float (&q4)[4], float* ssc,
                                            float* sred, float& mrun, float& lsum, float (&acc)[4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf((float)HD);
  for (int ts = b0; ts < b1; ts += TILE) {
    const int te = min(ts + TILE, b1);
    float tmax = -CUDART_INF_F;
    for (int pb = ts + warp; pb < te; pb += KB * NW) {
      uint2 ku[KB];
      load_cache_rows<KB>(Kc, pb, p0, lane, ku);
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int p = pb + k * NW;
        if (p < te) {
          float k4[4];
          row4(ku[k], snk, p, p0, n0, lane, k4);
          float d = q4[0] * k4[0] + q4[1] * k4[1] + q4[2] * k4[2] + q4[3] * k4[3];
          d = warp_sum(d) * scale;
          if (lane == 0) ssc[p - ts] = d;
          tmax = fmaxf(tmax, d);
        }
      }
    }
    if (lane == 0) sred[warp] = tmax;
    __syncthreads();
    float mt = -CUDART_INF_F;
    for (int w = 0; w < NW; w++) mt = fmaxf(mt, sred[w]);
    const float mnew = fmaxf(mrun, mt);
    const float corr = expf(mrun - mnew);
    lsum *= corr;
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i] *= corr;
    for (int pb = ts + warp; pb < te; pb += KB * NW) {
      uint2 vu[KB];
      load_cache_rows<KB>(Vc, pb, p0, lane, vu);
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int p = pb + k * NW;
        if (p < te) add_weighted(vu[k], snv, p, p0, n0, lane, expf(ssc[p - ts] - mnew), acc, lsum);
      }
    }
    mrun = mnew;
    __syncthreads();
  }
}

// attention_o's softmax, one query (q4: this lane's 4 elements) over
// positions [0, len): warp w takes positions w + NW k with its own running
// max (mrun), weight sum and context, so no CTA barrier separates the scores
// from the values, and a batch's K and V rows come in one round trip; the
// caller merges the warps. Positions below p0 from the bf16 cache, p0 from
// the fresh rows snk / snv.
template <int KB>
__device__ __forceinline__ void attend_warp(const uint16_t* Kc, const uint16_t* Vc, int len, int p0, const float* snk,
                                            const float* snv, const float (&q4)[4], float& mrun, float& lsum,
                                            float (&acc)[4], uint2 (&ku)[KB], uint2 (&vu)[KB]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf((float)HD);
  for (int pb = warp; pb < len; pb += KB * NW) {
    if (pb != warp) {  // the first batch: the caller's
      load_cache_rows<KB>(Kc, pb, p0, lane, ku);
      load_cache_rows<KB>(Vc, pb, p0, lane, vu);
    }
    float d[KB];
    float bmax = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < KB; k++) {
      const int p = pb + k * NW;
      d[k] = -CUDART_INF_F;
      if (p < len) {
        float k4[4];
        row4(ku[k], snk, p, p0, p0, lane, k4);
        d[k] = warp_sum(q4[0] * k4[0] + q4[1] * k4[1] + q4[2] * k4[2] + q4[3] * k4[3]) * scale;
        bmax = fmaxf(bmax, d[k]);
      }
    }
    const float mnew = fmaxf(mrun, bmax);  // finite: position pb < len is in the batch
    const float corr = expf(mrun - mnew);
    lsum *= corr;
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i] *= corr;
#pragma unroll
    for (int k = 0; k < KB; k++) {
      const int p = pb + k * NW;
      if (p < len) add_weighted(vu[k], snv, p, p0, p0, lane, expf(d[k] - mnew), acc, lsum);
    }
    mrun = mnew;
  }
}

// Work item = (q head, token, position chunk). Emits an online-softmax
// partial (unnormalised sums, max, weight sum) that the O-projection merges
// in a fixed order. Positions >= p0 (this launch's tokens) come from the
// freshly projected q/k/v; earlier ones from the bf16 cache.
__device__ void attention(const Params& a, const StackD& S, int l, int m, int p0, int C, float* sm) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = S.nh, nkv = S.nkv, grp = nh / nkv;
  float* sq = sm;
  float* snk = sq + HD;
  float* snv = snk + a.mmax * HD;
  float* ssc = snv + a.mmax * HD;
  float* sacc = ssc + TILE;
  float* sred = sacc + NW * HD;  // [NW] maxima, then [NW] weight sums
  const LayerD& Lw = S.layers[l];
  const int items = nh * m * C;
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    const int c = it % C, t = (it / C) % m, h = it / (C * m);
    const int kvh = h / grp, pos = p0 + t, len = pos + 1;
    const int b0 = (int)((long long)c * len / C), b1 = (int)((long long)(c + 1) * len / C);
    const int n0 = max(b0, p0);
    const uint16_t* Kc = S.kc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    const uint16_t* Vc = S.vc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    // q on the last warp: the new position's k (first positions' warps) runs alongside.
    if (warp == NW - 1)
      norm_rope(a.qkv + (size_t)t * a.qkv_stride + h * HD, Lw.q_norm, S.eps, pos, S.rope, sq);
    for (int j = n0 + warp; j < b1; j += NW) {
      const float* raw = a.qkv + (size_t)(j - p0) * a.qkv_stride;
      float* kd = snk + (j - n0) * HD;
      float* vd = snv + (j - n0) * HD;
      new_kv(raw + (nh + kvh) * HD, raw + (nh + nkv + kvh) * HD, Lw.k_norm, S.eps, j, S.rope, kd, vd);
      __syncwarp();
      // Exactly one item writes each new position.
      if (h % grp == 0 && j == pos) store_kv(S, l, nkv, kvh, pos, kd, vd, lane);
    }
    __syncthreads();
    float q4[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q4[i] = sq[lane * 4 + i];
    float mrun = -CUDART_INF_F, lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    attend_span<1>(Kc, Vc, b0, b1, p0, n0, snk, snv, q4, ssc, sred, mrun, lsum, acc);
#pragma unroll
    for (int i = 0; i < 4; i++) sacc[warp * HD + lane * 4 + i] = acc[i];
    if (lane == 0) sred[NW + warp] = lsum;
    __syncthreads();
    float* dst = a.part + (((size_t)t * nh + h) * a.cmax + c) * PSTRIDE;
    for (int d = threadIdx.x; d < HD; d += NT) {
      float s = 0.f;
      for (int w = 0; w < NW; w++) s += sacc[w * HD + d];
      dst[d] = s;
    }
    if (threadIdx.x == 0) {
      float L = 0.f;
      for (int w = 0; w < NW; w++) L += sred[NW + w];
      dst[HD] = mrun;
      dst[HD + 1] = L;
    }
    __syncthreads();
  }
}

// Merge the C partials of every (token, head) into xs[t][h*HD + d].
__device__ __forceinline__ void merge_attention(const Params& a, const StackD& S, int m, int C, float* xs, int xstride) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int pr = warp; pr < m * S.nh; pr += NW) {
    const int t = pr / S.nh, h = pr % S.nh;
    const float* base = a.part + (((size_t)t * S.nh + h) * a.cmax) * PSTRIDE;
    // Every load of the pair is issued before any is used (one L2 trip, not
    // one per chunk): lane c holds chunk c's max and weight sum, and the
    // sums of up to four chunks at a time are in flight.
    const float pm = lane < C ? __ldcg(base + lane * PSTRIDE + HD) : -CUDART_INF_F;
    const float pl = lane < C ? __ldcg(base + lane * PSTRIDE + HD + 1) : 0.f;
    float L = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    float M = -CUDART_INF_F;
    for (int c0 = 0; c0 < C; c0 += 4) {
      float4 v[4];
#pragma unroll
      for (int k = 0; k < 4; k++)
        if (c0 + k < C) v[k] = __ldcg(reinterpret_cast<const float4*>(base + (c0 + k) * PSTRIDE + lane * 4));
      if (c0 == 0) {
        for (int c = 0; c < C; c++) M = fmaxf(M, __shfl_sync(0xffffffffu, pm, c));
      }
#pragma unroll
      for (int k = 0; k < 4; k++) {
        if (c0 + k < C) {
          const float e = expf(__shfl_sync(0xffffffffu, pm, c0 + k) - M);
          L += __shfl_sync(0xffffffffu, pl, c0 + k) * e;
          o[0] += v[k].x * e;
          o[1] += v[k].y * e;
          o[2] += v[k].z * e;
          o[3] += v[k].w * e;
        }
      }
    }
    const float inv = 1.f / L;
#pragma unroll
    for (int i = 0; i < 4; i++) xs[t * xstride + h * HD + lane * 4 + i] = o[i] * inv;
  }
  __syncthreads();
}

// One token at position pos, attention fused with the O projection. Work item
// = (q head h, block rb of the H O rows), RB = grid / nh blocks a head so every
// CTA has one item. The item computes head h's attention over positions
// 0..pos itself (attend_warp; the RB items of a head redundantly: cheap for
// short contexts; for long ones each warp pays a dependent K and V load per
// 4 x NW positions, where the chunked path spreads them over CTAs), then its
// head's share of its O rows, W_o[r, h*HD:(h+1)*HD] . ctx_h, added with
// 64-bit fixed-point red.add into xfix row 2 (run_stack zeroed it; the 16
// heads' integer sums do not depend on their order). norm_resid (the next
// phase) adds the layer's input to it.
// Register notes (ptxas, decode_kernel at 128 registers): 64-bit divisions
// here (subroutine calls) grew the kernel's stack frame; so did a run-time
// choice between this and the five-phase path (both inlined), hence the
// compile-time FUSE.
__device__ void attention_o(const Params& a, const StackD& S, int l, int pos, const uint16_t* Wo,
                            const uint16_t* qn, const uint16_t* kn, float* sm, Grid* gp = nullptr) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = S.nh, nkv = S.nkv, grp = nh / nkv, H = S.H, AO = nh * HD;
  float* sq = sm;          // q, then the context vector
  float* snk = sq + HD;    // the new position's k
  float* snv = snk + HD;   // and v
  float* sacc = snv + HD;
  float* sred = sacc + NW * HD;  // [NW] maxima, then [NW] weight sums
  const int RB = max(1, (int)gridDim.x / nh), items = nh * RB, len = pos + 1;
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    const int h = it / RB, rb = it - h * RB, kvh = h / grp;
    // O rows r0..r1-1 of this block, columns of head h: a half-warp a row
    // (16 lanes x 8 bf16), four rows a half-warp in flight. The trip count
    // is uniform over the CTA, so the half-warp shuffles are convergent.
    const int r0 = rb * H / RB, r1 = (rb + 1) * H / RB;  // 32-bit: H <= 8192, RB <= grid
    const int hl = lane & 15, hw = threadIdx.x >> 4;
    constexpr int HW = NT / 16;
    const uint16_t* Wh = Wo + h * HD + hl * 8;
    uint4 w[4];
    auto load_o = [&](int base) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int r = base + u * HW + hw;
        w[u] = r < r1 ? ldw(reinterpret_cast<const uint4*>(Wh + (size_t)r * AO)) : make_uint4(0, 0, 0, 0);
      }
    };
    const uint16_t* Kc = S.kc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    const uint16_t* Vc = S.vc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    uint2 ku[4], vu[4];
    // This warp's first K and V cache rows do not depend on q, k or v: in
    // flight with them (H100: talker step -3..4 us).
    load_cache_rows<4>(Kc, warp, pos, lane, ku);
    load_cache_rows<4>(Vc, warp, pos, lane, vu);
    // q on the last warp, the new position's k and v on warp 0.
    if (warp == NW - 1) norm_rope(a.qkv + h * HD, qn, S.eps, pos, S.rope, sq);
    if (warp == 0) {
      new_kv(a.qkv + (nh + kvh) * HD, a.qkv + (nh + nkv + kvh) * HD, kn, S.eps, pos, S.rope, snk, snv);
      __syncwarp();
      // Exactly one item writes each kv head's new position (read by later
      // steps only: every item of this launch has it from a.qkv).
      if (h % grp == 0 && rb == 0) store_kv(S, l, nkv, kvh, pos, snk, snv, lane);
    }
    __syncthreads();
    float q4[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q4[i] = sq[lane * 4 + i];
    {  // A scope of its own: the form that was measured (ptxas spills less in it)
    float mrun = -CUDART_INF_F, lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    prof_mark(gp, PH_AROPE);
    attend_warp<4>(Kc, Vc, len, pos, snk, snv, q4, mrun, lsum, acc, ku, vu);
    prof_mark(gp, PH_AKV);
    // This half-warp's first W_o rows, in flight while the warps' partial
    // contexts are merged (the whole slice when RB x 128 >= H: the 0.6B).
    load_o(r0);
#pragma unroll
    for (int i = 0; i < 4; i++) sacc[warp * HD + lane * 4 + i] = acc[i];
    if (lane == 0) {
      sred[warp] = mrun;
      sred[NW + warp] = lsum;
    }
    __syncthreads();
    // The context vector: the warps' sums rescaled to the largest maximum.
    // sq is free: every warp read its q before the barrier.
    const int nwa = min(NW, len);  // warps w >= len had no position (predictor steps: 1.0 us a step)
    for (int d = threadIdx.x; d < HD; d += NT) {
      float M = -CUDART_INF_F;
      for (int w = 0; w < nwa; w++) M = fmaxf(M, sred[w]);
      float s = 0.f, L = 0.f;
      for (int w = 0; w < nwa; w++) {
        const float e = expf(sred[w] - M);
        s = fmaf(e, sacc[w * HD + d], s);
        L = fmaf(e, sred[NW + w], L);
      }
      sq[d] = s * (1.f / L);
    }
    __syncthreads();
    prof_mark(gp, PH_ACTX);
    }
    long long* att = a.xfix + 2 * (size_t)a.xstride;
    for (int base = r0; base < r1; base += 4 * HW) {
      if (base != r0) load_o(base);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        float d = dot8(w[u], sq + hl * 8);
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        const int r = base + u * HW + hw;
        if (hl == 0 && r < r1)
          asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(att + r), "l"(to_fix(d)) : "memory");
      }
    }
    __syncthreads();
  }
}

// Prelude of the phase after attention_o: the layer's input x plus the
// attention's O rows att, both fixed-point sums, the new residual, into xs
// and RMSNorm'd there, and un-normed into the shared xr (gate_up_down adds the
// elements its CTA owns into the next residual). All 8 loads a thread issued
// before any use: one round trip for H <= 4 x NT. (It read 16 per-head O
// partials, 64 KB a CTA, until attention_o summed them with red.add: H100,
// predictor step 0.1228-0.1232 -> 0.1200-0.1203 ms.) x's copies are f2 apart
// (fix_sum); hook as in norm_rows.
template <class Hook = NoHook>
__device__ __forceinline__ void norm_resid(float* xs, const long long* x, const long long* att, float* xr, int H,
                                           const uint16_t* w, float eps, float* red, size_t f2 = 0,
                                           Hook hook = Hook()) {
  float wv[4], v[4], ss = 0.f;
  for (int base = 0; base < H; base += 4 * NT) {
    long long xi[4], ai[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int i = base + threadIdx.x + k * NT;
      wv[k] = i < H ? bf(w[i]) : 0.f;
      xi[k] = i < H ? fix_sum(x, f2, i) : 0;
      ai[k] = i < H ? __ldcg(att + i) : 0;
    }
    if (base == 0) hook();
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int i = base + threadIdx.x + k * NT;
      v[k] = from_fix(xi[k]) + from_fix(ai[k]);
      ss += v[k] * v[k];  // 0 past H
      if (i < H) {
        xs[i] = v[k];
        xr[i] = v[k];
      }
    }
  }
  const float r = rms_scale(ss, H, eps, red);
  if (H <= 4 * NT) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int i = threadIdx.x + k * NT;
      if (i < H) xs[i] = v[k] * r * wv[k];
    }
  } else {
    for (int i = threadIdx.x; i < H; i += NT) xs[i] = xs[i] * r * bf(w[i]);
  }
  __syncthreads();
}

// The MLP of a one-token fused step in one phase (one grid barrier instead of
// two): gate/up deals CTA b the rows j = b + grid * m, so the CTA holds their
// act values itself and multiplies them by the same rows of W_down^T, a
// split-K share of the down projection (an H-wide partial). Every CTA adds its
// partial, and the un-normed residual elements o = b (mod grid) it owns, into
// the next residual with 64-bit integer red.add (to_fix): xfix row l & 1,
// copy b % NCOPY (fix_row), which run_stack zeroed. The layer's input is row (l + 1) & 1 (for layer 0
// the step's input, written there by CTA 0). Shared memory past xs: act [I],
// residual [H], partials [ng][H] (engine.cu sizes it).
// Micro-benchmark (tools/gpu/micro/handoff.cu, H100, 28 layers of 0.6B shapes,
// 16 head partials): 0.570 -> 0.520 ms against the four-phase layer.
__device__ __forceinline__ void gate_up_down(const Params& a, const StackD& S, const LayerD& Lw, int l, float* xs,
                                             float* red, Grid* gp) {
  const int H = S.H, I = S.I, G = gridDim.x, b = blockIdx.x;
  float* act = xs + H;  // act[j] for this CTA's rows j only
  float* xr = act + I;
  float* part = xr + H;
  const int nj = (I - b + G - 1) / G;  // this CTA's rows j = b + G m, m < nj
  matvec_gate_up<1, true>(Lw.gate, Lw.up, I, H, xs, H, 1, act, 0, [&](auto... hook) {
    norm_resid(xs, a.xfix + (size_t)((l + 1) & 1) * a.xstride, a.xfix + 2 * (size_t)a.xstride, xr, H, Lw.post_norm,
               S.eps, red, fix_copy_offset(a.xstride), hook...);
  });
  // Thread t: outputs 8c..8c+7 of chunk c = t % nc, over the CTA's rows m =
  // t / nc + ng k (all ng groups' loads of a batch in flight at once).
  constexpr int KB = 6;  // the 0.6B on 132 SMs: 24 rows a CTA, 4 groups, one batch
  const int nc = H >> 3, ng = max(1, NT / nc), gi = threadIdx.x / nc;
  __syncthreads();
  prof_mark(gp, PH_GU);
  for (int c = threadIdx.x % nc; gi < ng && c < nc; c += NT) {
    float sum[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int m0 = gi; m0 < nj; m0 += ng * KB) {
      uint4 w[KB];
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int m = m0 + ng * k;
        w[k] = m < nj ? ldw(reinterpret_cast<const uint4*>(Lw.down_t + (size_t)(b + G * m) * H) + c)
                      : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int m = m0 + ng * k;
        const float v = m < nj ? act[b + G * m] : 0.f;
        sum[0] = fmaf(bflo(w[k].x), v, sum[0]);
        sum[1] = fmaf(bfhi(w[k].x), v, sum[1]);
        sum[2] = fmaf(bflo(w[k].y), v, sum[2]);
        sum[3] = fmaf(bfhi(w[k].y), v, sum[3]);
        sum[4] = fmaf(bflo(w[k].z), v, sum[4]);
        sum[5] = fmaf(bfhi(w[k].z), v, sum[5]);
        sum[6] = fmaf(bflo(w[k].w), v, sum[6]);
        sum[7] = fmaf(bfhi(w[k].w), v, sum[7]);
      }
    }
#pragma unroll
    for (int e = 0; e < 8; e++) part[gi * H + c * 8 + e] = sum[e];
  }
  __syncthreads();
  long long* dst = a.xfix + (size_t)fix_row(l & 1, b & (NCOPY - 1)) * a.xstride;  // copy b % NCOPY
  for (int o = threadIdx.x; o < H; o += NT) {
    float y = 0.f;
    for (int g = 0; g < ng; g++) y += part[g * H + o];
    if (o % G == b) y += xr[o];
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(dst + o), "l"(to_fix(y)) : "memory");
  }
}

// ---------------------------------------------------------------- the stack

// Runs all layers of S over m tokens at positions p0..p0+m-1. The raw input
// rows are in xs (stride S.H) and, written by CTA 0, in a.x. FUSE (one-token
// steps of decode_kernel<true>; prefill and the two-token predictor step keep
// five phases): attention and the O projection run as one phase
// (attention_o, then norm_resid in the MLP's prelude), and the MLP as another
// (gate_up_down), three barriers a layer. The residual then lives in a.xfix
// as fixed-point sums: the step's input in row 1 (CTA 0 writes it there, and
// the raw rows to xs or a.x row 0 as for the other paths), layer l's output in
// row l & 1, so the stack's output is row (L - 1) & 1 (head's fsrc).
template <int MT, bool FUSE = false>
__device__ void run_stack(const Params& a, const StackD& S, const LayerD* lw, int m, int p0, int C, float* xs,
                          float* red, Grid& g, bool input_in_smem) {
  const int H = S.H, I = S.I, QN = (S.nh + 2 * S.nkv) * HD, AO = S.nh * HD;
  float* x = a.x;
  const int xsd = a.xstride;
  // Compile-time: both paths inlined under a run-time branch grew the stack
  // frame from 208 to 512 bytes.
  constexpr bool fuse = FUSE && MT == 1;
  for (int l = 0; l < S.L; l++) {
    // The layer's pointers from the shared-memory table (load_layer_table):
    // a reload after a barrier's memory clobber is a shared load. Held in
    // registers across the layer's phases (a copy of S.layers[l]), they made
    // ptxas spill: the fused decode kernel's stack frame 128 -> 64 bytes
    // (ptxas 12.6); H100, frame 2.445-2.456 -> 2.413-2.428 ms.
    const LayerD& Lw = lw[l];
    // A: input norm + fused QKV projection
    float* qkv = a.qkv;
    const int qs = a.qkv_stride;
    // The fused step issues its first weights from inside the norm prelude,
    // right after the activation loads (H100: talker step -4 us, frame -40).
    matvec<MT, false, fuse>(
        Lw.qkv, QN, H, xs, H, m, [&](int r, int t, float v) { qkv[(size_t)t * qs + r] = v; },
        [&](auto... hook) {
          if constexpr (fuse) {  // layer 0 from xs unless the input is only in xfix (1.7B projection)
            const bool fixed = l > 0 || !input_in_smem;
            norm_rows(xs, H, nullptr, 0, 1, H, Lw.in_norm, S.eps, red,
                      fixed ? a.xfix + (size_t)((l + 1) & 1) * xsd : nullptr, fix_copy_offset(xsd), hook...);
          } else if (l == 0 && input_in_smem)
            norm_rows(xs, H, nullptr, 0, m, H, Lw.in_norm, S.eps, red);
          else
            norm_rows(xs, H, x, xsd, m, H, Lw.in_norm, S.eps, red);
        });
    if constexpr (fuse) {
      // attention_o sums its O rows into xfix row 2, last read by layer l - 1's
      // MLP prelude, a barrier ago: zero it.
      if (blockIdx.x == gridDim.x - 1) {
        long long* att = a.xfix + 2 * (size_t)xsd;
        for (int i = threadIdx.x; i < H; i += NT) att[i] = 0;
      }
    }
    g.sync(PH_QKV);
    if constexpr (fuse) {
      // B+C: attention and the O rows (red.add into xfix row 2, read by the MLP's prelude)
      attention_o(a, S, l, p0, Lw.o, Lw.q_norm, Lw.k_norm, xs, &g);
      // The MLP below sums into xfix row l & 1, last read by layer l - 1's
      // preludes, a barrier ago: zero it.
      if (blockIdx.x == gridDim.x - 1) {
        long long* next = a.xfix + (size_t)(l & 1) * xsd;
        for (int i = threadIdx.x; i < H; i += NT) {
          next[i] = 0;
#pragma unroll
          for (int c = 1; c < NCOPY; c++) next[(size_t)fix_row(0, c) * xsd + i] = 0;
        }
      }
      g.sync(PH_O);
      // D+E: the MLP into xfix
      gate_up_down(a, S, Lw, l, xs, red, &g);
      g.sync(PH_DOWN);
      continue;
    } else {
    // B: attention partials
    attention(a, S, l, m, p0, C, xs);
    g.sync(PH_ATTN);
    // C: merge + O projection into the residual
    matvec<MT, true>(
        Lw.o, H, AO, xs, AO, m,
        [&](int r, int t, float v) {
          float* px = x + (size_t)t * xsd + r;
          *px = __ldcg(px) + v;
        },
        [&] { merge_attention(a, S, m, C, xs, AO); });
    g.sync(PH_O);
    }
    // D: post-attention norm + gate/up
    matvec_gate_up<MT>(Lw.gate, Lw.up, I, H, xs, H, m, a.act, a.act_stride,
                       [&] { norm_rows(xs, H, x, xsd, m, H, Lw.post_norm, S.eps, red); });
    g.sync(PH_GU);
    // E: down projection into the residual
    matvec<MT, true>(
        Lw.down, H, I, xs, I, m,
        [&](int r, int t, float v) {
          float* px = x + (size_t)t * xsd + r;
          *px = __ldcg(px) + v;
        },
        [&] {
          // Eight loads a thread, all issued before any store, the ones past
          // I loading nothing into a zeroed slot. Not batched<8>: its loads
          // are conditional, and it measured no faster than the plain loop
          // this replaces. With the norm_rows and norm_resid forms of the
          // same change: frame 2.905-2.910 -> 2.850-2.868 ms (H100, four
          // calls); either change alone, or batched<8>: 2.878-2.890.
          for (int t = 0; t < m; t++)
            for (int base = 0; base < I; base += 8 * NT) {
              float v[8];
#pragma unroll
              for (int q = 0; q < 8; q++) {
                const int i = base + threadIdx.x + q * NT;
                v[q] = i < I ? __ldcg(a.act + (size_t)t * a.act_stride + i) : 0.f;
              }
#pragma unroll
              for (int q = 0; q < 8; q++) {
                const int i = base + threadIdx.x + q * NT;
                if (i < I) xs[t * I + i] = v[q];
              }
            }
          __syncthreads();
        });
    g.sync(PH_DOWN);
  }
}

// Final norm of token t and a head matvec into logits; CTA 0 keeps the
// normed hidden when hidden_out is set. fsrc: the stack ran fused (run_stack),
// its output is there rather than in a.x.
__device__ void head(const Params& a, const StackD& S, int t, const uint16_t* W, int V, float* logits,
                     float* hidden_out, float* xs, float* red, Grid& g, const long long* fsrc = nullptr) {
  matvec<1>(
      W, V, S.H, xs, S.H, 1, [&](int r, int, float v) { logits[r] = v; },
      [&] {
        norm_rows(xs, S.H, a.x + (size_t)t * a.xstride, a.xstride, 1, S.H, S.final_norm, S.eps, red, fsrc,
                  fsrc ? fix_copy_offset(a.xstride) : 0);
        if (hidden_out && blockIdx.x == 0)
          for (int i = threadIdx.x; i < S.H; i += NT) hidden_out[i] = xs[i];
      });
  g.sync(PH_HEAD);
}

// ---------------------------------------------------------------- sampling

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ double uniform(unsigned long long seed, int frame, int group) {
  const unsigned long long counter = ((unsigned long long)frame << 8) | (unsigned long long)(group & 0xff);
  const unsigned long long bits = mix64(mix64(seed) ^ counter);
  return (double)(bits >> 11) * (1.0 / 9007199254740992.0);
}
__device__ __forceinline__ uint32_t fkey(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float fkey_inv(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// First index of the largest finite value (NaN and -inf skipped); -1 if none.
__device__ int block_argmax(const float* sv, int V, float* sf, int* sint) {
  float bv = 0.f;
  int bi = -1;
  for (int i = threadIdx.x; i < V; i += NT) {
    const float v = sv[i];
    if (isnan(v) || v == -CUDART_INF_F) continue;
    if (bi < 0 || v > bv) { bv = v; bi = i; }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) { bv = ov; bi = oi; }
  }
  if (lane == 0) { sf[warp] = bv; sint[warp] = bi; }
  __syncthreads();
  float rv = 0.f;
  int ri = -1;
  for (int w = 0; w < NW; w++) {
    const float ov = sf[w];
    const int oi = sint[w];
    if (oi >= 0 && (ri < 0 || ov > rv || (ov == rv && oi < ri))) { rv = ov; ri = oi; }
  }
  __syncthreads();
  return ri;
}

// The k-th largest value among the finite entries (radix select on ordered
// keys, 8 bits a pass). hist holds 2 x 256 ints: each pass counts into one
// buffer while the other is cleared for the next, and publishes its digit in
// its own sint slot, so a pass needs two barriers. A thread's first KR keys
// are converted once and kept in registers (entries past KR x NT are re-read
// each pass). Counting is one plain shared atomic per key: on an H100 this
// took the select from 4.9 to 3.8 us a call against one atomic per distinct
// bin per warp found with __match_any_sync.
template <int KR>
__device__ float kth_largest(const float* sv, int V, int k, int* hist, int* sint) {
  // 0 is below every finite key: it marks -inf and slots past V.
  const uint32_t kinf = fkey(-CUDART_INF_F);
  auto key_of = [&](int i) {
    const float v = i < V ? sv[i] : -CUDART_INF_F;
    return v == -CUDART_INF_F ? 0u : fkey(v);
  };
  uint32_t key[KR];
#pragma unroll
  for (int q = 0; q < KR; q++) key[q] = key_of(threadIdx.x + q * NT);
  uint32_t prefix = 0, pmask = 0;
  int kk = k;
  for (int i = threadIdx.x; i < 256; i += NT) hist[i] = 0;
  __syncthreads();
  for (int pass = 0, shift = 24; shift >= 0; pass++, shift -= 8) {
    int* h = hist + (pass & 1) * 256;
    int* nxt = hist + ((pass + 1) & 1) * 256;
    for (int i = threadIdx.x; i < 256; i += NT) nxt[i] = 0;
    auto count = [&](uint32_t kv) {
      if (kv > kinf && (kv & pmask) == prefix) atomicAdd(&h[(kv >> shift) & 255u], 1);
    };
#pragma unroll
    for (int q = 0; q < KR; q++) count(key[q]);
    for (int i = threadIdx.x + KR * NT; i < V; i += NT) count(key_of(i));
    __syncthreads();
    int* res = sint + 4 + 2 * (pass & 1);
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      int cnt = 0;
      for (int b = 0; b < 8; b++) cnt += h[lane * 8 + b];
      int s = cnt;  // inclusive suffix sum over lanes >= lane
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_down_sync(0xffffffffu, s, o);
        if (lane + o < 32) s += n;
      }
      const int above = s - cnt;
      if (above < kk && s >= kk) {
        int run = above;
        for (int b = lane * 8 + 7; b >= lane * 8; b--) {
          if (run + h[b] >= kk) {
            res[0] = b;
            res[1] = kk - run;
            break;
          }
          run += h[b];
        }
      }
    }
    __syncthreads();
    prefix |= ((uint32_t)res[0]) << shift;
    pmask |= 255u << shift;
    kk = res[1];
  }
  return fkey_inv(prefix);
}

// Candidates whose ids and probabilities fit the shared scratch; more (top-k
// off or very large) use this CTA's slice of Params::samp_scratch.
constexpr int CAND = 512;

// sample_block's region (8-byte aligned, in floats from its start): CAND
// doubles, V floats (the processed logits), 2 x CAND ints (top-p's lists),
// then, 8-byte aligned, V + NT doubles (draw_kept's exps and block sums).
__host__ __device__ constexpr int sample_pe_offset(int V) { return (4 * CAND + V + 1) & ~1; }
__host__ __device__ constexpr size_t sample_region_bytes(int V) {
  return (size_t)sample_pe_offset(V) * 4 + (size_t)(V + NT) * 8;
}

// Top-k threshold, fast path: the k-th largest of the candidates in sv (-inf
// marks the others) in two barriers instead of the radix select's nine. The
// candidates lie in [lo, hi]; bin(v) = floor((hi - v) x 256 / (hi - lo)) is
// monotone (v > w implies bin(v) <= bin(w)), so every value in a bin below the
// k-th's bin B is larger than every value in B, and the k-th is the kk-th
// largest inside B, ranked by one warp. hist (256 ints) is zero and sint[8]
// (the gather counter) too; cand has room for 32 floats. Returns false (the
// caller runs the radix select) when the span is not a positive finite float
// or B holds more than 32 values (ties, or a spike far above the rest).
__device__ __forceinline__ bool kth_by_bins(const float* sv, int V, int k, float lo, float hi, int* hist,
                                            int* sint, float* cand, float* thr) {
  const int lane = threadIdx.x & 31;
  const float span = hi - lo;
  if (!(span > 0.f && span < CUDART_INF_F)) return false;  // the same in every thread
  const float scale = 256.f / span;
  auto bin = [&](float v) { return min(255, (int)((hi - v) * scale)); };
  for (int i = threadIdx.x; i < V; i += NT) {
    const float v = sv[i];
    if (v != -CUDART_INF_F) atomicAdd(&hist[bin(v)], 1);
  }
  __syncthreads();
  // Every warp finds B itself (no barrier to publish it): lane l's 8 bins,
  // counted from the top, and the lane whose running count reaches k.
  int h[8], cnt = 0;
#pragma unroll
  for (int q = 0; q < 8; q++) {
    h[q] = hist[8 * lane + q];
    cnt += h[q];
  }
  const int incl = warp_incl_scan(cnt);
  // f exists (the bins hold every candidate, and k < their number); the
  // test guards the shuffles below all the same.
  const int f = __ffs(__ballot_sync(0xffffffffu, incl >= k)) - 1;
  int bsel = 0, kk = 0, c = 33;
  if (lane == f) {
    c = 0;
    int run = incl - cnt;
#pragma unroll
    for (int q = 0; q < 8; q++) {
      if (c == 0 && run + h[q] >= k) {
        bsel = 8 * lane + q;
        kk = k - run;
        c = h[q];
      }
      run += h[q];
    }
  }
  if (f >= 0) {
    bsel = __shfl_sync(0xffffffffu, bsel, f);
    kk = __shfl_sync(0xffffffffu, kk, f);
    c = __shfl_sync(0xffffffffu, c, f);
  }
  if (c > 32) {
    __syncthreads();  // the radix select clears hist: every warp must have read it
    return false;
  }
  for (int i = threadIdx.x; i < V; i += NT) {
    const float v = sv[i];
    if (v != -CUDART_INF_F && bin(v) == bsel) cand[atomicAdd(&sint[8], 1)] = v;
  }
  __syncthreads();
  // The value x of B with #(> x) < kk <= #(>= x): the k-th largest overall.
  const float x = lane < c ? cand[lane] : 0.f;
  int gt = 0, ge = 0;
  for (int q = 0; q < c; q++) {
    const float y = cand[q];
    gt += y > x;
    ge += y >= x;
  }
  const int w = __ffs(__ballot_sync(0xffffffffu, lane < c && gt < kk && kk <= ge)) - 1;
  *thr = __shfl_sync(0xffffffffu, x, w);
  return true;
}

// Ordered compaction (ascending id) of the candidates >= thr into ids, with
// exp(v - mx) in float64 as the CPU computes it, into pd, at where(n) (the
// storage for n entries). Top-p's ranking needs the lists; the draw does not
// (draw_kept). Warp w owns a contiguous block of ids, 32 at a time by ballot;
// one barrier adds the warps' counts (sint[32..32+NW)), one publishes the lists.
struct Kept {
  double* pd;
  int* ids;
  int n;
};
template <class Where>
__device__ __forceinline__ Kept compact_kept(const float* sv, int V, float thr, double mx, int* sint, Where where) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int per = (V + 32 * NW - 1) / (32 * NW) * 32;
  const int b0 = warp * per, b1 = min(V, b0 + per);
  auto keep = [&](int i) { return i < b1 && sv[i] != -CUDART_INF_F && sv[i] >= thr; };
  int n = 0;
  for (int base = b0; base < b1; base += 32) n += __popc(__ballot_sync(0xffffffffu, keep(base + lane)));
  if (lane == 0) sint[32 + warp] = n;
  __syncthreads();
  int off = 0, total = 0;
  for (int w = 0; w < NW; w++) {
    const int cw = sint[32 + w];
    off += w < warp ? cw : 0;
    total += cw;
  }
  const Kept k = where(total);
  const unsigned below = (1u << lane) - 1u;
  for (int base = b0; base < b1; base += 32) {
    const int i = base + lane;
    const bool kp = keep(i);
    const unsigned mask = __ballot_sync(0xffffffffu, kp);
    if (kp) {
      const int at = off + __popc(mask & below);
      k.pd[at] = exp((double)sv[i] - mx);
      k.ids[at] = i;
    }
    off += __popc(mask);
  }
  __syncthreads();
  return k;
}

// The inverse-CDF draw over the kept ids (sv[i] >= thr, -inf never) in the
// CPU's float64 order: probabilities exp(sv[i] - mx) / their sum (summed in
// ascending id order), accumulated in that order, the first id whose running
// sum exceeds u; the last kept id if none does. That chain is serial, so the
// id is found from parallel sums instead: every thread writes exp for its E
// consecutive ids into pe (0 for the ids not kept) and their sum into bsum,
// then warp 0 scans the blocks in two levels and walks the block where u
// falls. Those sums differ from the serial chain's by under 1e-12 (relative,
// V <= 4096), so where they clear u by 1e-9 on both sides of the id the chain
// picks it too. Otherwise (about one draw in 10^7, or exact) lane 0 runs the
// chain over pe. Every thread returns the id.
__device__ __forceinline__ int draw_kept(const float* sv, int V, float thr, double mx, double u, bool exact,
                                         double* pe, double* bsum, int* sint) {
  const int lane = threadIdx.x & 31;
  auto kept = [&](int i) { return sv[i] != -CUDART_INF_F && sv[i] >= thr; };
  const int E = (V + NT - 1) / NT, i0 = threadIdx.x * E;
  {
    double s = 0.0;
    for (int k = 0; k < E; k++) {
      const int i = i0 + k;
      if (i < V) {
        const double e = kept(i) ? exp((double)sv[i] - mx) : 0.0;
        pe[i] = e;
        s += e;
      }
    }
    bsum[threadIdx.x] = s;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    constexpr int BL = NT / 32;  // blocks a lane at level 1
    int pick = -1;
    if (!exact) {
      // Level 1: lane l's BL blocks, from a rotated start (shared-memory banks).
      double part = 0.0;
#pragma unroll
      for (int k = 0; k < BL; k++) part += bsum[lane * BL + (k + lane) % BL];
      const double incl = warp_incl_scan(part);
      const double total = __shfl_sync(0xffffffffu, incl, 31);
      const double target = u * total, tol = 1e-9 * total;
      const unsigned over = __ballot_sync(0xffffffffu, incl > target);
      if (over) {
        // Level 2: lane f's blocks in order, one a lane; then the block's ids.
        const int f = __ffs(over) - 1;
        const double base = __shfl_sync(0xffffffffu, incl - part, f);
        const double p2 = lane < BL ? bsum[f * BL + lane] : 0.0;
        const double inc2 = warp_incl_scan(p2);
        const unsigned over2 = __ballot_sync(0xffffffffu, base + inc2 > target);
        if (over2) {
          const int g = __ffs(over2) - 1, b0 = (f * BL + g) * E;
          int got = -1;
          if (lane == g) {
            double cum = base + inc2 - p2;
            for (int i = b0; i < min(V, b0 + E); i++) {
              const double prev = cum;
              cum += pe[i];
              if (cum > target) {
                if (cum - target > tol && target - prev > tol) got = i;
                break;
              }
            }
          }
          pick = __shfl_sync(0xffffffffu, got, g);
        }
      }
    }
    if (pick < 0 && lane == 0) {
      double sum = 0.0;
      for (int i = 0; i < V; i++) sum += pe[i];  // + 0 for the ids not kept changes nothing
      double cum = 0.0;
      for (int i = 0; i < V; i++) {
        if (!kept(i)) continue;
        pick = i;  // the last kept id when u is within rounding of 1
        cum += pe[i] / sum;
        if (cum > u) break;
      }
    }
    if (lane == 0) sint[2] = pick;
  }
  __syncthreads();
  return sint[2];
}

// Samples one token from raw logits with the engine/sample semantics.
// Every CTA calls it with the same inputs and gets the same token.
// region: sample_region_bytes(V) bytes, laid out as sample_pe_offset says.
// exact (tb_sample's reference mode) skips the fast paths: the top-k by radix
// select, the draw by the serial chain.
template <bool TALKER>
__device__ int sample_block(const Params& a, const float* lg, int V, const SamplerD& sp, int frame,
                            int group, float* region, float* sf, int* sint, Grid* g = nullptr, bool exact = false) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sv = region + 2 * CAND;
  int* hist = sint + 64;
  const float pen = sp.penalty;
  // Processed logits (penalty, EOS mask, suppression), scaled for sampling;
  // the same pass counts the candidates and finds their maximum and minimum.
  int local = 0;
  float lmax = -CUDART_INF_F, lmin = CUDART_INF_F;
  const bool use_pen = TALKER && pen != 1.f && pen != 0.f;
  struct Logit {
    float v;
    uint32_t seen;  // the history word holding this id's bit
  };
  // Three logits a thread a batch (two batches for the 3072-entry codec
  // vocabulary), and two cached keys in kth_largest below: smaller register
  // blocks than 7 and 6, which the whole kernel's allocation pays for (H100,
  // two calls: frame 2.857-2.867 -> 2.837-2.846 ms, greedy frames too).
  batched<3>(
      V, [&](int i) { return Logit{__ldcg(lg + i), use_pen ? __ldcg(a.hist + (i >> 5)) : 0u}; },
      [&](int i, Logit l) {
        float v = l.v;
        if (TALKER) {
          if (use_pen && ((l.seen >> (i & 31)) & 1u)) v = v < 0.f ? v * pen : v / pen;
          if (i == a.eos && (frame < a.min_new || a.mask_eos)) v = -CUDART_INF_F;
          if (i >= a.supp_from && i != a.eos) v = -CUDART_INF_F;
        }
        if (sp.do_sample) {
          v = isnan(v) ? -CUDART_INF_F : v / sp.temperature;  // NaN is no candidate
          const bool cand = v != -CUDART_INF_F;
          local += cand;
          lmax = fmaxf(lmax, v);
          if (cand) lmin = fminf(lmin, v);
        }
        sv[i] = v;
      });
  if (!sp.do_sample) {
    __syncthreads();
    return block_argmax(sv, V, sf, sint);
  }
  prof_mark(g, PH_SLOAD);
  {
    const int c = (int)warp_sum((float)local);  // exact: V < 2^24
    lmax = warp_max(lmax);
    lmin = -warp_max(-lmin);
    if (lane == 0) {
      sint[16 + warp] = c;
      sf[warp] = lmax;
      sf[16 + warp] = lmin;
    }
    // kth_by_bins's histogram and gather counter, zeroed under this barrier.
    for (int i = threadIdx.x; i < 256; i += NT) hist[i] = 0;
    if (threadIdx.x == 0) sint[8] = 0;
  }
  __syncthreads();
  int ncand = 0;
  float bmax = -CUDART_INF_F, bmin = CUDART_INF_F;
  for (int w = 0; w < NW; w++) {
    ncand += sint[16 + w];
    bmax = fmaxf(bmax, sf[w]);
    bmin = fminf(bmin, sf[16 + w]);
  }
  if (ncand == 0) return -1;
  float thr = -CUDART_INF_F;
  if (sp.top_k > 0 && sp.top_k < ncand &&
      (exact || !kth_by_bins(sv, V, sp.top_k, bmin, bmax, hist, sint, reinterpret_cast<float*>(hist + 256), &thr)))
    thr = kth_largest<2>(sv, V, sp.top_k, hist, sint);
  prof_mark(g, PH_SKTH);
  const double mx = (double)bmax;  // the largest candidate always survives top-k
  if (sp.top_p < 1.f) {
    // Top-p ranks the kept ids by value: the ascending list (ids, exp(v - mx)
    // in float64), ranks in (value desc, id asc) order, then the low tail
    // dropped as the CPU does, marked -inf in sv.
    const Kept k = compact_kept(sv, V, thr, mx, sint, [&](int n) {
      double* p = n > CAND ? a.samp_scratch + (size_t)blockIdx.x * 2 * V : reinterpret_cast<double*>(region);
      return Kept{p, n > CAND ? reinterpret_cast<int*>(p + V) : reinterpret_cast<int*>(sv + V), n};
    });
    if (k.n > 1) {
      int* ord = k.ids + (k.n > CAND ? V : CAND);
      for (int j = threadIdx.x; j < k.n; j += NT) {
        const int id = k.ids[j];
        const float v = sv[id];
        int r = 0;
        for (int q = 0; q < k.n; q++) {
          const float w = sv[k.ids[q]];
          r += (w > v) || (w == v && k.ids[q] < id);
        }
        ord[r] = j;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        double sum = 0.0;
        for (int q = 0; q < k.n; q++) sum += k.pd[ord[q]];
        const double cut = 1.0 - (double)sp.top_p;
        double cum = 0.0;
        int size = k.n;
        for (int q = k.n - 1; q > 0; q--) {
          cum += k.pd[ord[q]] / sum;
          if (cum > cut) break;
          size = q;
        }
        for (int q = size; q < k.n; q++) sv[k.ids[ord[q]]] = -CUDART_INF_F;
      }
      __syncthreads();
    }
  }
  prof_mark(g, PH_SCOMP);
  double* pe = reinterpret_cast<double*>(region + sample_pe_offset(V));
  return draw_kept(sv, V, thr, mx, uniform(a.seed, frame, group), exact, pe, pe + V, sint);
}

// ---------------------------------------------------------------- steps

struct Smem {
  float* xs;      // activations / attention / sampling scratch (aliased by phase)
  float* red;     // 64 floats
  float* sf;      // 64 floats
  int* sint;      // 64 + 512 ints (the radix select's two histograms from 64)
  int* codes;     // [MAXG] codes fed back this frame
  LayerD* layers; // every layer's pointers: the talker's, then the predictor's
};

// Code-predictor step j (1..15) of frame a.frame; returns the sampled code.
// Steps 2..15 fuse attention with O (run_stack): the context is at most 16
// positions. Inlined: as a call it gave decode_kernel<false> a 368-byte stack
// frame (H100: a frame at 40 positions in 3.82 ms against 3.16 inlined).
__device__ __forceinline__ int predictor_step(const Params& a, int j, const Smem& s, Grid& g) {
  const StackD& S = a.cp;
  g.stack = 1;
  const int H = a.tk.H;  // width of the raw inputs (talker hidden)
  const int m = j == 1 ? 2 : 1;
  const int p0 = j == 1 ? 0 : j;
  // Raw inputs: [talker hidden, C(g0)] for step 1, E_{j-1}(g_{j-1}) after.
  {
    const uint16_t* e = j == 1 ? a.codec_emb + (size_t)s.codes[0] * H
                               : a.cp_embs + ((size_t)(j - 2) * a.Vp + s.codes[j - 1]) * H;
    struct Input {
      float hidden;
      uint16_t emb;
    };
    batched<4>(
        H, [&](int i) { return Input{j == 1 ? __ldcg(a.hidden + i) : 0.f, e[i]}; },
        [&](int i, Input in) {
          if (j == 1) {
            s.xs[i] = in.hidden;
            s.xs[H + i] = bf(in.emb);
          } else {
            s.xs[i] = bf(in.emb);
          }
        });
  }
  __syncthreads();
  bool in_smem = true;
  if (a.proj_w) {
    // small_to_mtp_projection (1.7B): rows of the CP width, with bias, into the residual.
    float* x = a.x;
    const int xsd = a.xstride;
    const uint16_t* b = a.proj_b;
    matvec<2>(
        a.proj_w, S.H, H, s.xs, H, m,
        [&](int r, int t, float v) {
          const float y = v + bf(b[r]);
          if (m == 1) {  // the fused stack reads only xfix row 1 (run_stack)
            a.xfix[xsd + r] = to_fix(y);
#pragma unroll
            for (int c = 1; c < NCOPY; c++) a.xfix[(size_t)fix_row(1, c) * xsd + r] = 0;
          }
          else x[(size_t)t * xsd + r] = y;
        },
        [] {});
    g.sync(PH_PROJ);
    in_smem = false;
  } else if (blockIdx.x == 0) {
    // The fused stack's input goes to xfix row 1 (run_stack).
    if (m == 1)
      for (int i = threadIdx.x; i < H; i += NT) {
        a.xfix[a.xstride + i] = to_fix(s.xs[i]);
#pragma unroll
        for (int c = 1; c < NCOPY; c++) a.xfix[(size_t)fix_row(1, c) * a.xstride + i] = 0;
      }
    else
      for (int t = 0; t < m; t++)
        for (int i = threadIdx.x; i < H; i += NT) a.x[(size_t)t * a.xstride + i] = s.xs[t * H + i];
  }
  if (m == 2)
    run_stack<2>(a, S, s.layers + a.tk.L, 2, p0, 1, s.xs, s.red, g, in_smem);
  else
    run_stack<1, true>(a, S, s.layers + a.tk.L, 1, p0, 1, s.xs, s.red, g, in_smem);
  float* lg = a.plogits + (size_t)(j - 1) * a.Vp;
  head(a, S, m - 1, a.cp_heads + (size_t)(j - 1) * a.Vp * S.H, a.Vp, lg, nullptr, s.xs, s.red, g,
       m == 1 ? a.xfix + (size_t)((S.L - 1) & 1) * a.xstride : nullptr);
  const int c = sample_block<false>(a, lg, a.Vp, a.sp, a.frame, j, s.xs, s.sf, s.sint, &g);
  if (threadIdx.x == 0) g.mark(PH_SAMPLE);
  return c;
}

// Talker step for the codes in s.codes (frame a.frame fed back): builds the
// input embedding, runs the stack at a.tpos and samples group 0 of the next frame.
template <bool FUSE>
__device__ int talker_step(const Params& a, const Smem& s, Grid& g) {
  const StackD& S = a.tk;
  g.stack = 0;
  const int H = S.H;
  const float* text = a.frame < a.ntrail ? a.trail + (size_t)a.frame * H : a.pad;
  // The 16 embedding rows and the text row, every load issued before the
  // sums, summed in the CPU engine's order. A thread takes two adjacent
  // elements (H is a multiple of 8), one 32-bit load a row: the form that
  // loaded 16-bit elements two at a time held twice the registers, and ptxas
  // spilled around it once the layers' phases needed more.
  const uint16_t* rows[MAXG];
  rows[0] = a.codec_emb + (size_t)s.codes[0] * H;
#pragma unroll
  for (int k = 1; k < MAXG; k++) rows[k] = a.cp_embs + ((size_t)(k - 1) * a.Vp + (k < a.G ? s.codes[k] : 0)) * H;
  for (int i = 2 * threadIdx.x; i < H; i += 2 * NT) {
    uint32_t e[MAXG];
#pragma unroll
    for (int k = 0; k < MAXG; k++) e[k] = k < a.G ? *reinterpret_cast<const uint32_t*>(rows[k] + i) : 0u;
    const float2 tx = *reinterpret_cast<const float2*>(text + i);
    float v0 = bflo(e[0]), v1 = bfhi(e[0]);
#pragma unroll
    for (int k = 1; k < MAXG; k++)
      if (k < a.G) {
        v0 += bflo(e[k]);
        v1 += bfhi(e[k]);
      }
    v0 += tx.x;
    v1 += tx.y;
    s.xs[i] = v0;
    s.xs[i + 1] = v1;
    if (blockIdx.x == 0) {  // the residual: xfix row 1 for the fused stack (run_stack)
      if (FUSE) {
        a.xfix[a.xstride + i] = to_fix(v0);
        a.xfix[a.xstride + i + 1] = to_fix(v1);
#pragma unroll
        for (int c = 1; c < NCOPY; c++) {
          a.xfix[(size_t)fix_row(1, c) * a.xstride + i] = 0;
          a.xfix[(size_t)fix_row(1, c) * a.xstride + i + 1] = 0;
        }
      } else {
        a.x[i] = v0;
        a.x[i + 1] = v1;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) g.mark(PH_OTHER);
  run_stack<1, FUSE>(a, S, s.layers, 1, a.tpos, a.chunks, s.xs, s.red, g, true);
  head(a, S, 0, a.codec_head, a.V, a.tlogits, a.hidden, s.xs, s.red, g,
       FUSE ? a.xfix + (size_t)((S.L - 1) & 1) * a.xstride : nullptr);
  const int c = sample_block<true>(a, a.tlogits, a.V, a.st, a.frame + 1, 0, s.xs, s.sf, s.sint, &g);
  if (threadIdx.x == 0) g.mark(PH_SAMPLE);
  return c;
}

// After the prompt's last row (row t of a.x): final norm, codec head and
// group 0 of frame 0.
__device__ void prefill_head(const Params& a, const Smem& s, int t, Grid& g) {
  head(a, a.tk, t, a.codec_head, a.V, a.tlogits, a.hidden, s.xs, s.red, g);
  const int g0 = sample_block<true>(a, a.tlogits, a.V, a.st, 0, 0, s.xs, s.sf, s.sint);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.state[0] = g0;
    a.out[16] = g0;
    a.out[17] = g0 < 0;
  }
}

template <int MT>
__device__ void prefill_chunk(const Params& a, const Smem& s, Grid& g) {
  const StackD& S = a.tk;
  const int H = S.H;
  for (int t = 0; t < a.m; t++)
    for (int i = threadIdx.x; i < H; i += NT) {
      const float v = a.rows[(size_t)t * H + i];
      s.xs[t * H + i] = v;
      if (blockIdx.x == 0) a.x[(size_t)t * a.xstride + i] = v;
    }
  __syncthreads();
  run_stack<MT>(a, S, s.layers, a.m, a.p0, a.chunks, s.xs, s.red, g, true);
  if (a.last) prefill_head(a, s, a.m - 1, g);
}

// Copies both stacks' layer tables into s.layers (read after the caller's
// next __syncthreads): one round trip at a launch's start, beside the codes'.
__device__ __forceinline__ void load_layer_table(const Params& a, const Smem& s) {
  constexpr int W = sizeof(LayerD) / 8;  // 8-byte words a layer
  static_assert(sizeof(LayerD) % 8 == 0, "LayerD holds pointers only");
  const int nt = a.tk.L * W, n = nt + a.cp.L * W;
  const unsigned long long* tk = reinterpret_cast<const unsigned long long*>(a.tk.layers);
  const unsigned long long* cp = reinterpret_cast<const unsigned long long*>(a.cp.layers);
  unsigned long long* dst = reinterpret_cast<unsigned long long*>(s.layers);
  for (int i = threadIdx.x; i < n; i += NT) dst[i] = i < nt ? __ldg(tk + i) : __ldg(cp + i - nt);
}

__device__ __forceinline__ Smem smem_layout(unsigned char* raw, const Params& a) {
  Smem s;
  s.red = reinterpret_cast<float*>(raw);
  s.sf = s.red + 64;
  s.sint = reinterpret_cast<int*>(s.sf + 64);
  s.codes = s.sint + 64 + 512;
  s.layers = reinterpret_cast<LayerD*>(raw + SM_XS);
  s.xs = reinterpret_cast<float*>(raw + SM_XS + layer_table_bytes(a.tk.L + a.cp.L));
  return s;
}

// Prefill passes have their own kernel: their many-token matvecs need far
// more registers than a decode step, and in one kernel they set its
// register allocation and local-memory stack for every decode launch too.
__global__ void __launch_bounds__(NT, 1) prefill_kernel(const __grid_constant__ Params a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Smem s = smem_layout(smem_raw, a);
  Grid g{a.bar, 0, 0, nullptr, 0};
  load_layer_table(a, s);
  // The next launch's barrier counter: this launch never touches it, and the
  // last launch that did has ended.
  if (blockIdx.x == 0 && threadIdx.x == 0) *a.bar_next = 0;
#if TB_PROF
  __shared__ unsigned long long prof_acc[2 * NPH * 2];  // counted, not reported
  if (threadIdx.x < 2 * NPH * 2) prof_acc[threadIdx.x] = 0;
  __syncthreads();
  g.acc = prof_acc;
#endif
  if (a.m == 0) prefill_head(a, s, 0, g);  // after the tensor-core prefill (prefill_tc.cuh)
  else if (a.mmax >= 8 && a.m > 4) prefill_chunk<8>(a, s, g);
  else if (a.m > 2) prefill_chunk<4>(a, s, g);
  else if (a.m == 2) prefill_chunk<2>(a, s, g);
  else prefill_chunk<1>(a, s, g);
}

// __grid_constant__: device functions take `const Params&`; without it the
// compiler copies the parameters to local memory at entry and every field
// read becomes a local load (measured on an H100: frame 3.91 -> 3.75 ms).
//
// FUSE: the talker step runs four phases a layer (attention fused with O,
// attention_o). Its attention is recomputed by each CTA of a head, which pays
// for itself only while the talker's context is short, so the host launches
// decode_kernel<false> (five phases a talker layer) past fused_max_len. The
// predictor's steps fuse in both (their context is at most 16 positions).
// Compile-time: one kernel holding both talker paths had a 2.5x larger stack
// frame.
template <bool FUSE>
__global__ void __launch_bounds__(NT, 1) decode_kernel(const __grid_constant__ Params a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem s = smem_layout(smem_raw, a);
  Grid g{a.bar, 0, 0, nullptr, 0};
  load_layer_table(a, s);
#if TB_PROF
  __shared__ unsigned long long prof_acc[2 * NPH * 2];
  unsigned long long t_start = 0, ns_start = 0;
  if (threadIdx.x < 2 * NPH * 2) prof_acc[threadIdx.x] = 0;
  g.acc = prof_acc;
  if (threadIdx.x == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns_start));
    t_start = clock64();
    g.t_last = t_start;
  }
  __syncthreads();
  struct Flush {  // adds CTA 0's counters to a.prof when the kernel returns
    const Params& a;
    unsigned long long *acc, &t0, &ns0;
    __device__ ~Flush() {
      if (blockIdx.x != 0 || threadIdx.x != 0 || !a.prof) return;
      unsigned long long ns;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
      const unsigned long long cyc = clock64() - t0;
      for (int i = 0; i < 2 * NPH * 2; i++) atomicAdd(a.prof + i, acc[i]);
      atomicAdd(a.prof + 2 * NPH * 2, cyc);
      atomicAdd(a.prof + 2 * NPH * 2 + 1, ns - ns0);
      atomicAdd(a.prof + 2 * NPH * 2 + 2, 1ull);
    }
  } flush{a, prof_acc, t_start, ns_start};
#endif
  // Codes fed back in this frame: the last sampled (or teacher) group 0 and,
  // for a talker-only launch, the previous frame's codes.
  if (threadIdx.x < MAXG) {
    int c = __ldcg(a.state + 1 + threadIdx.x);
    if (threadIdx.x == 0) c = __ldcg(a.state);
    if (a.use_teacher) c = a.teacher[threadIdx.x];
    s.codes[threadIdx.x] = c;
  }
  __syncthreads();
#if TB_BARBENCH
  if (a.mode == MODE_TALKER) {
    for (int i = 0; i < 1000; i++) g.sync(PH_OTHER);
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.bar_next = 0;  // as at the end
    return;
  }
#endif
  // Whether any of this frame's groups failed to sample (no candidate): a
  // flag, not an array of the codes indexed by j, which would live in local
  // memory.
  int bad_codes = __ldcg(a.state) < 0;
  // The predictor bench (MODE_PREDICTOR) runs one step of this loop: the code
  // a frame runs. As a second inlined copy it had its own register
  // allocation, and timed something else than the frame's steps.
  const bool bench_step = a.mode == MODE_PREDICTOR;
  if (a.mode == MODE_FRAME || bench_step) {
    // History gets the group-0 code fed back; other CTAs read it only after barriers.
    if (!bench_step && blockIdx.x == 0 && threadIdx.x == 0) {
      const int c0 = s.codes[0];
      if (c0 >= 0 && c0 < a.V) a.hist[c0 >> 5] |= 1u << (c0 & 31);
    }
#pragma unroll 1
    for (int j = bench_step ? a.bench_step : 1; j < (bench_step ? a.bench_step + 1 : a.G); j++) {
      const int c = predictor_step(a, j, s, g);
      bad_codes |= c < 0;
      if (threadIdx.x == 0) s.codes[j] = a.use_teacher ? a.teacher[j] : (c < 0 ? 0 : c);
      __syncthreads();
    }
    if (bench_step) {
      if (blockIdx.x == 0 && threadIdx.x == 0) *a.bar_next = 0;  // as below
      return;
    }
    // The frame's codes are final: publish them to the host now, so the first
    // audio need not wait for the talker step below (tb_frame_codes).
    if (a.early && blockIdx.x == 0 && threadIdx.x == 0) {
      volatile int32_t* pub = a.early;
      pub[0] = 0;
      __threadfence_system();
      for (int k = 0; k < a.G; k++) pub[1 + k] = s.codes[k];
      pub[1 + MAXG] = bad_codes;
      __threadfence_system();
      pub[0] = a.early_seq;
    }
  }
  const int next = talker_step<FUSE>(a, s, g);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    // The next launch's barrier counter, zeroed here rather than at the start
    // (as prefill_kernel does): there it grew decode_kernel<false>'s stack
    // frame from 72 to 120 bytes (ptxas 12.6).
    *a.bar_next = 0;
    a.state[0] = next;
    int bad = next < 0;
    for (int k = 0; k < MAXG; k++) a.state[1 + k] = s.codes[k];
    if (a.mode == MODE_FRAME) {
      // Emitted codes are the ones fed back (the teacher's under teacher
      // forcing), as in the CPU engine.
      for (int k = 0; k < a.G; k++) a.out[k] = s.codes[k];
      bad |= bad_codes;
    }
    a.out[16] = next;
    a.out[17] = bad;
  }
}

// tb_sample: one CTA runs the sampler on given logits (tests).
__global__ void __launch_bounds__(NT, 1) sample_kernel(const __grid_constant__ Params a, const float* lg, int V,
                                                        int frame, int group, bool exact, int32_t* out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);
  float* sf = red + 64;
  int* sint = reinterpret_cast<int*>(sf + 64);
  const int c = sample_block<false>(a, lg, V, a.sp, frame, group, reinterpret_cast<float*>(smem_raw + SM_XS), sf, sint,
                             nullptr, exact);
  if (threadIdx.x == 0) *out = c;
}

}  // namespace tb
