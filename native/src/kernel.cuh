// The persistent decode kernel: one cooperative launch runs a whole talker
// step, a code-predictor step, a whole frame (15 predictor steps + the next
// talker step) or one prefill chunk. Phases are separated by a grid barrier;
// every CTA samples redundantly from the same logits, so no broadcast is needed.
//
// Weights reach the CTAs through a shared-memory ring (see "weight stream"):
// weights never depend on activations, so each CTA streams its slices of the
// launch's whole schedule (every layer of every step) ahead of the compute,
// across grid barriers, attention and sampling. A phase then waits only for
// its barrier and its activations, not for DRAM.
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
#ifndef TB_WAIT_SPIN
#define TB_WAIT_SPIN 0  // 1: wait for weights with mbarrier.test_wait spins instead of try_wait
#endif
#ifndef TB_NO_BULK
#define TB_NO_BULK 0  // 1: stage weights with cp.async even on sm_90+ (A/B measurements)
#endif

// sm_90+ stages weights with the bulk copy engine (one instruction per chunk,
// completing on an mbarrier); older GPUs and toolkits use per-thread cp.async.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDACC_VER_MAJOR__ >= 12 && !TB_NO_BULK
#define TB_BULK 1
#else
#define TB_BULK 0
#endif

namespace tb {

// A CTA is NW consumer warps (NT threads: every phase's compute) and one
// producer warp that only streams weights into the ring.
constexpr int NW = 15;             // consumer warps
constexpr int NT = NW * 32;        // consumer threads: the CTA barrier (named barrier 1) counts these
constexpr int NTH = NT + 32;       // threads per CTA, the producer warp last
constexpr int HD = 128;            // head_dim (checked at create)
constexpr int MAXG = 16;           // codes per frame
constexpr int PSTRIDE = HD + 2;    // one attention partial: 128 sums, max, sum of weights

// Weight ring: SLOT bytes per slot, at most SMAX slots. A chunk (the unit of
// staging) is whole rows of one matrix, at most MAXRC units.
#ifndef TB_SLOT
#define TB_SLOT 16384
#endif
constexpr int SLOT = TB_SLOT;
#ifndef TB_RING_MAX
#define TB_RING_MAX 16  // slots at most (A/B: a shallower ring)
#endif
constexpr int SMAX = TB_RING_MAX;
constexpr int MAXRC = 64;
constexpr int MAXMT = 8;    // tokens per pass, at most
constexpr int XRES = 128;   // residual rows a CTA may own (host-checked)

enum Mode { MODE_PREFILL = 0, MODE_FRAME = 1, MODE_TALKER = 2, MODE_PREDICTOR = 3 };

// Profiled phases (TB_PROF): [stack][phase][0 = work, 1 = barrier wait] in
// cycles of CTA 0, then launch cycles, launch ns and launch count.
// PH_RWAIT..PH_RTAIL split the matrix phases' work (counted inside them):
// waiting for weights, the segment dot products, barrier + refill + row sums.
enum Phase { PH_QKV, PH_ATTN, PH_O, PH_GU, PH_DOWN, PH_HEAD, PH_SAMPLE, PH_PROJ, PH_OTHER, PH_PRE,
             PH_RWAIT, PH_RCOMP, PH_RTAIL, NPH };
constexpr int PROF_WORDS = 2 * NPH * 2 + 3;

// Shared-memory layout (bytes): red, sf, sint, codes; then the ring's
// control block (this CTA's residual rows, the slot mbarriers); then xs
// (activations / attention / sampling scratch, size set per launch by the
// host); then the ring slots at Params::ring_off.
constexpr int SM_CTL = 3200;  // red 512 B, sf 256 B, sint (64 + 512 ints), codes 64 B
constexpr int SM_XRES_BYTES = MAXMT * XRES * 4;
constexpr int SM_XS = SM_CTL + SM_XRES_BYTES + 2 * SMAX * 8;  // 128-byte aligned
static_assert(SM_XS % 128 == 0, "xs alignment");

__device__ __forceinline__ void csync() {  // barrier of the consumer warps
  asm volatile("bar.sync 1, %0;" ::"n"(NT) : "memory");
}

struct LayerD {
  const uint16_t *in_norm, *post_norm, *q_norm, *k_norm;
};

// A stack's matrices live in one allocation, layer after layer, each layer
// [qkv][o][gate/up interleaved by row][down], so the weight stream computes
// every address instead of reading a table.
struct StackD {
  const LayerD* layers;
  const uint16_t* w;
  size_t lstride, off_o, off_gu, off_down;  // elements
  int L, H, I, nh, nkv;
  float eps;
  const uint16_t* final_norm;
  uint16_t *kc, *vc;  // [L][nkv][cap][HD]
  int cap;
  const float* inv_freq;  // [HD/2]
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
  const float* rows;  // prefill rows of this chunk
  const float* trail;
  int ntrail;
  const float* pad;
  unsigned* bar;
  unsigned long long* prof;  // PROF_WORDS counters (TB_PROF builds)
  SamplerD st, sp;
  unsigned long long seed;
  int mode, p0, m, chunks, frame, tpos, last, bench_step, mmax;
  int ring_off, ring_slots;  // this launch's ring: byte offset in shared memory, slot count
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

// Activation rows in xs are permuted so that the 8 inputs of one weight
// vector are two float4 that consecutive lanes read without bank conflicts:
// element i of a K-wide row sits at xpos(i, K) (K % 8 == 0), the first four
// of every octet in the row's first half, the last four in its second half.
__device__ __forceinline__ int xpos(int i, int K) { return ((i >> 2) & 1) * (K >> 1) + ((i >> 3) << 2) + (i & 3); }

// w (8 bf16) . x, x the octet's halves.
__device__ __forceinline__ float dot8h(uint4 w, float4 a, float4 b) {
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

// Grid barrier. The counter is zeroed by the host (stream-ordered memset)
// before every launch and only ever incremented inside it, so it can neither
// race with a reset nor wrap (a launch has < 1000 barriers x grid CTAs).
struct Grid {
  unsigned* bar;
  unsigned target;
  int stack;                    // profiling: 0 talker, 1 code predictor
  unsigned long long* acc;      // profiling: shared counters (CTA 0)
  unsigned long long t_last;
  __device__ void add(int ph, unsigned long long cyc) {  // thread 0 only
#if TB_PROF
    if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2] += cyc;
#endif
  }
  __device__ void mark(int ph) {  // thread 0 only: work since the last mark
#if TB_PROF
    const unsigned long long now = clock64();
    if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2] += now - t_last;
    t_last = now;
#endif
  }
  __device__ void sync(int ph = PH_OTHER) {
    target += gridDim.x;
    csync();
    if (threadIdx.x == 0) {
#if TB_PROF
      const unsigned long long arrive = clock64();
      if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2] += arrive - t_last;
#endif
      // bar.sync orders the CTA's writes before this release (cumulative);
      // the relaxed spin plus one acquire fence is the PTX acquire pattern.
      // No extra fences: measured 1.41 us per 132-CTA barrier against 1.75
      // with __threadfence on both sides.
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
      unsigned v;
      int n = 0;
      while (true) {
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
        if (v >= target) break;
        if (++n > 64) __nanosleep(32);
      }
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
#if TB_PROF
      const unsigned long long rel = clock64();
      if (blockIdx.x == 0) acc[(stack * NPH + ph) * 2 + 1] += rel - arrive;
      t_last = rel;
#endif
    }
    csync();
  }
};


// ---------------------------------------------------------------- weight stream

// One matrix-vector job of the launch's schedule: N units of `pairs ? 2 : 1`
// rows of K bf16 each, stored contiguously (gate/up rows interleaved, so a
// unit is a gate row and its up row).
struct Job {
  const uint16_t* W;
  int N, K, pairs;
};

// The units CTA b owns: a contiguous range, so its slice is one run of bytes.
__device__ __forceinline__ void cta_range(const Job& j, int& lo, int& hi) {
  lo = (int)(((long long)j.N * blockIdx.x) / gridDim.x);
  hi = (int)(((long long)j.N * (blockIdx.x + 1)) / gridDim.x);
}

// Units per chunk: as many as fit a slot, at most MAXRC.
__device__ __forceinline__ int units_per_chunk(const Job& j) {
  const int u = SLOT / (j.K * 2 * (j.pairs ? 2 : 1));
  return max(1, min(u, MAXRC));
}

// Steps of this launch's schedule and the jobs of each step. A frame is the
// G-1 code-predictor steps, then the talker step; bench launches run one step;
// a prefill pass is the talker's layers (and its head on the last pass).
__device__ __forceinline__ int sched_steps(const Params& a) { return a.mode == MODE_FRAME ? a.G : 1; }
__device__ __forceinline__ bool step_is_cp(const Params& a, int step) {
  return a.mode == MODE_PREDICTOR || (a.mode == MODE_FRAME && step < a.G - 1);
}
__device__ __forceinline__ int step_jobs(const Params& a, int step) {
  if (step_is_cp(a, step)) return (a.proj_w ? 1 : 0) + 4 * a.cp.L + 1;
  return 4 * a.tk.L + ((a.mode == MODE_PREFILL && !a.last) ? 0 : 1);
}

// Job jis of step `step` (the same function drives the producer and the consumer).
__device__ Job job_at(const Params& a, int step, int jis) {
  const bool cp = step_is_cp(a, step);
  const StackD& S = cp ? a.cp : a.tk;
  if (cp && a.proj_w) {
    if (jis == 0) return Job{a.proj_w, a.cp.H, a.tk.H, 0};
    jis--;
  }
  if (jis < 4 * S.L) {
    const uint16_t* base = S.w + (size_t)(jis >> 2) * S.lstride;
    const int QN = (S.nh + 2 * S.nkv) * HD, AO = S.nh * HD;
    switch (jis & 3) {
      case 0: return Job{base, QN, S.H, 0};
      case 1: return Job{base + S.off_o, S.H, AO, 0};
      case 2: return Job{base + S.off_gu, S.I, S.H, 1};
      default: return Job{base + S.off_down, S.H, S.I, 0};
    }
  }
  if (cp) {
    const int j = a.mode == MODE_FRAME ? step + 1 : a.bench_step;
    return Job{a.cp_heads + (size_t)(j - 1) * a.Vp * S.H, a.Vp, S.H, 0};
  }
  return Job{a.codec_head, a.V, S.H, 0};
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

// A 16-byte shared-memory load by address (the ring's pointer is generic
// once it passes through a struct; this keeps the load an LDS).
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 r;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(addr));
  return r;
}

// The ring: slot i holds chunk c with c % S == i. full[i] completes when a
// chunk has landed, empty[i] when every consumer warp is done with it.
struct Ring {
  unsigned char* base;  // slot 0
  uint64_t* full;       // [S]
  uint64_t* empty;      // [S]
  int S;
  unsigned consumed;    // consumer warps: chunks finished (each warp keeps its own count)

  __device__ void init(const Params& a, unsigned char* smem) {
    base = smem + a.ring_off;
    full = reinterpret_cast<uint64_t*>(smem + SM_CTL + SM_XRES_BYTES);
    empty = full + SMAX;
    S = a.ring_slots;
    consumed = 0;
    if (threadIdx.x == 0) {
      for (int i = 0; i < S; i++) {
        asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(smem_addr(full + i)), "r"(TB_BULK ? 1 : 32));
        asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(smem_addr(empty + i)), "r"(NW));
      }
#if TB_BULK
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
    }
    __syncthreads();
  }

  // Consumer warp: blocks until chunk `consumed` has landed.
  __device__ void wait_full() const { wait(full + consumed % S, (consumed / S) & 1u); }
  // Consumer warp: done with chunk `consumed` (the warp's reads precede lane 0's arrive).
  __device__ void release() {
    __syncwarp();
    if ((threadIdx.x & 31) == 0)
      asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(smem_addr(empty + consumed % S)) : "memory");
    consumed++;
  }

  static __device__ void wait(const uint64_t* bar, uint32_t parity) {
    const uint32_t mb = smem_addr(bar);
    uint32_t done = 0;
    while (!done) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !TB_WAIT_SPIN
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(mb), "r"(parity)
          : "memory");
#else
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(mb), "r"(parity)
          : "memory");
#endif
    }
  }

  // The producer warp: streams every chunk of the launch's schedule, in
  // order, each into its slot once the consumers have emptied it. It never
  // waits for activations or grid barriers, so weights run ahead of compute
  // by the whole ring.
  __device__ void produce(const Params& a) {
    const int lane = threadIdx.x & 31;
#if TB_BULK
    unsigned long long policy;  // L2 evict-first: each weight byte is read once per launch
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
    unsigned c = 0;
    const int nsteps = sched_steps(a);
    for (int step = 0; step < nsteps; step++) {
      const int nj = step_jobs(a, step);
      for (int jis = 0; jis < nj; jis++) {
        const Job j = job_at(a, step, jis);
        int lo, hi;
        cta_range(j, lo, hi);
        const int upc = units_per_chunk(j), unitK = j.K * (j.pairs ? 2 : 1);
        for (int u = lo; u < hi; u += upc, c++) {
          const int slot = c % S;
          if (c >= (unsigned)S) wait(empty + slot, ((c / S) - 1) & 1u);
          const unsigned char* src = reinterpret_cast<const unsigned char*>(j.W + (size_t)u * unitK);
          const unsigned bytes = (unsigned)min(upc, hi - u) * unitK * 2;
          unsigned char* dst = base + (size_t)slot * SLOT;
          const uint32_t mb = smem_addr(full + slot);
#if TB_BULK
          if (lane == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(mb), "r"(bytes) : "memory");
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
                "%4;" ::"r"(smem_addr(dst)),
                "l"(src), "r"(bytes), "r"(mb), "l"(policy)
                : "memory");
          }
#else
          for (unsigned o = lane * 16; o < bytes; o += 32 * 16)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst + o)), "l"(src + o) : "memory");
          asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(mb) : "memory");
#endif
        }
      }
    }
#if !TB_BULK
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
  }
};

// Runs job j of the schedule for this CTA's units: y = W . xs[t] for tokens
// t < MT (xs rows xstride apart), calling store(unit, t, y0, y1) from lane 0
// (y1: the up row of a gate/up pair). Unit i of the CTA's slice belongs to
// consumer warp i % NW, which computes it whole (lanes split K, one warp
// reduction), so no CTA barrier is needed between chunks: a warp waits for
// each chunk to land and tells the producer when it is done with it.
template <int MT, class F>
__device__ __forceinline__ void consume(const Params& a, Ring& R, Grid& g, const Job& j, const float* xs,
                                       int xstride, F store) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int lo, hi;
  cta_range(j, lo, hi);
  const int parts = j.pairs ? 2 : 1;
  const int nv = j.K >> 3, unitK = j.K * parts, half = j.K >> 1;
  const int upc = units_per_chunk(j);
  int mine = warp;  // this warp's next unit, counted from lo
  for (int u0 = lo; u0 < hi; u0 += upc) {
    const int nu = min(upc, hi - u0);
#if TB_PROF
    unsigned long long t0 = threadIdx.x == 0 ? clock64() : 0;
#endif
    R.wait_full();
#if TB_PROF
    if (threadIdx.x == 0) {
      const unsigned long long t1 = clock64();
      g.add(PH_RWAIT, t1 - t0);
      t0 = t1;
    }
#endif
    const uint32_t slot = smem_addr(R.base) + (R.consumed % R.S) * SLOT;
    for (; mine < u0 - lo + nu; mine += NW) {
      const uint32_t row = slot + (uint32_t)(mine - (u0 - lo)) * unitK * 2;
      float acc[2][MT];
#pragma unroll
      for (int p = 0; p < 2; p++)
#pragma unroll
        for (int t = 0; t < MT; t++) acc[p][t] = 0.f;
      // B vectors per lane per batch, all loads issued before the math; a
      // gate/up pair shares its input loads.
      constexpr int B = MT == 1 ? 4 : MT == 2 ? 2 : 1;
      for (int c0 = lane; c0 < nv; c0 += 32 * B) {
        uint4 w0[B], w1[B];
        float4 xa[B][MT], xb[B][MT];
#pragma unroll
        for (int k = 0; k < B; k++) {
          const int c = c0 + 32 * k;
          const bool in = c < nv;
          w0[k] = in ? lds128(row + c * 16) : make_uint4(0, 0, 0, 0);
          w1[k] = in && parts == 2 ? lds128(row + (nv + c) * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int t = 0; t < MT; t++) {
            xa[k][t] = in ? *reinterpret_cast<const float4*>(xs + t * xstride + c * 4) : make_float4(0, 0, 0, 0);
            xb[k][t] = in ? *reinterpret_cast<const float4*>(xs + t * xstride + half + c * 4) : make_float4(0, 0, 0, 0);
          }
        }
#pragma unroll
        for (int k = 0; k < B; k++)
#pragma unroll
          for (int t = 0; t < MT; t++) {
            acc[0][t] += dot8h(w0[k], xa[k][t], xb[k][t]);
            if (parts == 2) acc[1][t] += dot8h(w1[k], xa[k][t], xb[k][t]);
          }
      }
#pragma unroll
      for (int p = 0; p < 2; p++)
#pragma unroll
        for (int t = 0; t < MT; t++)
          if (p < parts) acc[p][t] = warp_sum(acc[p][t]);
      if (lane == 0)
#pragma unroll
        for (int t = 0; t < MT; t++) store(mine + lo, t, acc[0][t], acc[1][t]);
    }
#if TB_PROF
    if (threadIdx.x == 0) {
      const unsigned long long t1 = clock64();
      g.add(PH_RCOMP, t1 - t0);
      t0 = t1;
    }
#endif
    R.release();
#if TB_PROF
    if (threadIdx.x == 0) g.add(PH_RTAIL, clock64() - t0);
#endif
  }
}

// ---------------------------------------------------------------- norms

// RMSNorm of m rows in place in shared memory (fp32: x * rsqrt(mean(x^2)+eps) * w).
// src, when not null, is first copied in (data written earlier in this launch:
// L1-bypassing loads).
// keep, when not null, receives the raw values of rows [klo, khi) of every
// token (keep[t * XRES + i]) before normalising: this CTA's residual rows.
// Every global load a phase's prelude needs is issued in one batch: under
// the weight stream an L2 round trip costs about a microsecond, and the
// prelude is on the critical path of every phase.
// Elements of a row per thread in one batch: decode rows up to 5 * NT wide
// in one round trip; prefill passes (up to 8 rows) in batches of 2 per row.
template <int MT>
__host__ __device__ constexpr int batch_k() { return MT <= 2 ? 5 : 2; }

template <int MT>
__device__ __forceinline__ void norm_rows(float* xs, int xstride, const float* src, int src_stride, int m, int H,
                                          const uint16_t* w, float eps, float* red, float* keep = nullptr,
                                          int klo = 0, int khi = 0) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // Each thread owns elements threadIdx.x + k * NT of every row: it loads
  // them with the norm weights, squares them, and after one barrier (the
  // NW partial sums per row) scales them.
  constexpr int KP = batch_k<MT>();
  float v[MT][KP], wv[KP], ss[MT];
  for (int base = 0; base < H; base += KP * NT) {
#pragma unroll
    for (int k = 0; k < KP; k++) {
      const int i = base + threadIdx.x + k * NT;
      wv[k] = i < H ? bf(w[i]) : 0.f;
#pragma unroll
      for (int t = 0; t < MT; t++)
        v[t][k] = t < m && i < H ? (src ? __ldcg(src + (size_t)t * src_stride + i) : xs[t * xstride + xpos(i, H)]) : 0.f;
    }
#pragma unroll
    for (int t = 0; t < MT; t++) {
      float sq = 0.f;
#pragma unroll
      for (int k = 0; k < KP; k++) {
        const int i = base + threadIdx.x + k * NT;
        sq = fmaf(v[t][k], v[t][k], sq);
        if (t < m && i < H && keep && i >= klo && i < khi) keep[t * XRES + i - klo] = v[t][k];
      }
      ss[t] = base == 0 ? sq : ss[t] + sq;
    }
    if (H > KP * NT) {  // several batches: park the raw values, scale them from xs below
#pragma unroll
      for (int k = 0; k < KP; k++) {
        const int i = base + threadIdx.x + k * NT;
#pragma unroll
        for (int t = 0; t < MT; t++)
          if (t < m && i < H) xs[t * xstride + xpos(i, H)] = v[t][k];
      }
    }
  }
#pragma unroll
  for (int t = 0; t < MT; t++)
    if (t < m) {
      const float r = warp_sum(ss[t]);
      if (lane == 0) red[warp * MAXMT + t] = r;
    }
  csync();
  float rs[MT];
#pragma unroll
  for (int t = 0; t < MT; t++) {
    float r = 0.f;
    for (int k = 0; k < NW; k++) r += red[k * MAXMT + t];
    rs[t] = rsqrtf(r / (float)H + eps);
  }
  if (H <= KP * NT) {
#pragma unroll
    for (int k = 0; k < KP; k++) {
      const int i = threadIdx.x + k * NT;
#pragma unroll
      for (int t = 0; t < MT; t++)
        if (t < m && i < H) xs[t * xstride + xpos(i, H)] = v[t][k] * rs[t] * wv[k];
    }
  } else {
    for (int i = threadIdx.x; i < H; i += NT) {
      const float wi = bf(w[i]);
#pragma unroll
      for (int t = 0; t < MT; t++)
        if (t < m) xs[t * xstride + xpos(i, H)] *= rs[t] * wi;
    }
  }
  csync();
}

// xs[t][xpos(i, K)] = src[t * stride + i] for i < K, t < m: the loads in
// batches of KP per thread.
template <int MT>
__device__ __forceinline__ void load_rows(float* xs, const float* src, size_t stride, int m, int K) {
  constexpr int KP = batch_k<MT>();
  for (int base = 0; base < K; base += KP * NT) {
    float v[MT][KP];
#pragma unroll
    for (int k = 0; k < KP; k++) {
      const int i = base + threadIdx.x + k * NT;
#pragma unroll
      for (int t = 0; t < MT; t++) v[t][k] = t < m && i < K ? __ldcg(src + t * stride + i) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < KP; k++) {
      const int i = base + threadIdx.x + k * NT;
#pragma unroll
      for (int t = 0; t < MT; t++)
        if (t < m && i < K) xs[t * K + xpos(i, K)] = v[t][k];
    }
  }
  csync();
}

// Per-head RMSNorm then rotate-half RoPE of one 128-vector, by one warp.
// Lane l holds elements l, l+32, l+64, l+96: the RoPE pairs (i, i+64) stay in-lane.
__device__ __forceinline__ void norm_rope(const float* raw, const uint16_t* w, float eps, int pos,
                                          const float* inv_freq, float* out) {
  const int lane = threadIdx.x & 31;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; i++) v[i] = __ldcg(raw + lane + 32 * i);
  float s = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
  s = warp_sum(s);
  const float r = rsqrtf(s / (float)HD + eps);
#pragma unroll
  for (int i = 0; i < 4; i++) v[i] = v[i] * r * bf(w[lane + 32 * i]);
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int f = lane + 32 * i;
    float sn, cs;
    sincosf((float)pos * inv_freq[f], &sn, &cs);
    out[f] = v[i] * cs - v[i + 2] * sn;
    out[f + 64] = v[i + 2] * cs + v[i] * sn;
  }
}

// ---------------------------------------------------------------- attention

// Work item = (q head, token, position chunk). Emits an online-softmax
// partial (unnormalised sums, max, weight sum) that the O-projection merges
// in a fixed order. Positions >= p0 (this launch's tokens) come from the
// freshly projected q/k/v; earlier ones from the bf16 cache.
//
// Each warp normalises and rotates q itself (no barrier), walks positions
// b0 + warp, b0 + warp + NW, ... with a running max and sum in registers
// (K and V of a position loaded together: one memory round trip), and the
// item's warps merge their partials after one CTA barrier.
__device__ void attention(const Params& a, const StackD& S, int l, int m, int p0, int C, float* sm) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = S.nh, nkv = S.nkv, grp = nh / nkv;
  float* sq = sm + warp * 2 * HD;  // this warp's q, then a new position's k
  float* sk = sq + HD;
  float* sml = sm + NW * 2 * HD;   // [NW] running max, [NW] weight sum
  float* sacc = sml + 2 * NW;      // [NW][HD]
  const LayerD& Lw = S.layers[l];
  const float scale = rsqrtf((float)HD);
  const int items = nh * m * C;
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    const int c = it % C, t = (it / C) % m, h = it / (C * m);
    const int kvh = h / grp, pos = p0 + t, len = pos + 1;
    const int b0 = (int)((long long)c * len / C), b1 = (int)((long long)(c + 1) * len / C);
    const uint16_t* Kc = S.kc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    const uint16_t* Vc = S.vc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    float mw = -CUDART_INF_F, lw = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (b0 + warp < b1) {
      // Cached positions b0 + warp + NW*i below p0 in batches of QB, the next
      // batch's K/V loads in flight while one is scored; the first batch is
      // issued before q's own load.
      constexpr int QB = 4;
      const int cend = min(b1, p0);
      uint2 uk[QB], uv[QB];
      auto load_batch = [&](int jb) {
#pragma unroll
        for (int q = 0; q < QB; q++) {
          const int j = jb + q * NW;
          if (j < cend) {
            uk[q] = __ldcg(reinterpret_cast<const uint2*>(Kc + (size_t)j * HD + lane * 4));
            uv[q] = __ldcg(reinterpret_cast<const uint2*>(Vc + (size_t)j * HD + lane * 4));
          }
        }
      };
      load_batch(b0 + warp);
      norm_rope(a.qkv + (size_t)t * a.qkv_stride + h * HD, Lw.q_norm, S.eps, pos, S.inv_freq, sq);
      __syncwarp();
      float q4[4];
#pragma unroll
      for (int i = 0; i < 4; i++) q4[i] = sq[lane * 4 + i] * scale;
      auto step = [&](const float* k4, const float* v4) {
        const float sc = warp_sum(q4[0] * k4[0] + q4[1] * k4[1] + q4[2] * k4[2] + q4[3] * k4[3]);
        const float mn = fmaxf(mw, sc);
        const float corr = expf(mw - mn), pw = expf(sc - mn);
        lw = lw * corr + pw;
#pragma unroll
        for (int i = 0; i < 4; i++) acc[i] = fmaf(pw, v4[i], acc[i] * corr);
        mw = mn;
      };
      for (int jb = b0 + warp; jb < cend; jb += QB * NW) {
        uint2 ck[QB], cv[QB];
#pragma unroll
        for (int q = 0; q < QB; q++) {
          ck[q] = uk[q];
          cv[q] = uv[q];
        }
        if (jb + QB * NW < cend) load_batch(jb + QB * NW);
#pragma unroll
        for (int q = 0; q < QB; q++) {
          if (jb + q * NW < cend) {
            const float k4[4] = {bflo(ck[q].x), bfhi(ck[q].x), bflo(ck[q].y), bfhi(ck[q].y)};
            const float v4[4] = {bflo(cv[q].x), bfhi(cv[q].x), bflo(cv[q].y), bfhi(cv[q].y)};
            step(k4, v4);
          }
        }
      }
      // This launch's positions: normalise and rotate their k here.
      for (int j = b0 + warp; j < b1; j += NW) {
        if (j < p0) continue;
        const float* raw = a.qkv + (size_t)(j - p0) * a.qkv_stride;
        norm_rope(raw + (nh + kvh) * HD, Lw.k_norm, S.eps, j, S.inv_freq, sk);
        __syncwarp();
        float k4[4], v4[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
          k4[i] = sk[lane * 4 + i];
          v4[i] = __ldcg(raw + (nh + nkv + kvh) * HD + lane * 4 + i);
        }
        __syncwarp();
        if (h % grp == 0 && j == pos) {  // exactly one item writes each new position
          const size_t off = (((size_t)l * nkv + kvh) * S.cap + pos) * HD + lane * 4;
          *reinterpret_cast<uint2*>(S.kc + off) =
              make_uint2(f2bf(k4[0]) | (uint32_t)f2bf(k4[1]) << 16, f2bf(k4[2]) | (uint32_t)f2bf(k4[3]) << 16);
          *reinterpret_cast<uint2*>(S.vc + off) =
              make_uint2(f2bf(v4[0]) | (uint32_t)f2bf(v4[1]) << 16, f2bf(v4[2]) | (uint32_t)f2bf(v4[3]) << 16);
        }
        step(k4, v4);
      }
    }
    if (lane == 0) {
      sml[warp] = mw;
      sml[NW + warp] = lw;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) sacc[warp * HD + lane * 4 + i] = acc[i];
    csync();
    float M = -CUDART_INF_F;
    for (int w = 0; w < NW; w++) M = fmaxf(M, sml[w]);
    float e[NW], L = 0.f;
#pragma unroll
    for (int w = 0; w < NW; w++) {
      e[w] = sml[w] == -CUDART_INF_F ? 0.f : expf(sml[w] - M);  // warps without positions
      L += sml[NW + w] * e[w];
    }
    // One chunk: write the finished output (max 0, sum 1), so the merge is a
    // plain load.
    const float scale_out = C == 1 ? 1.f / L : 1.f;
    float* dst = a.part + (((size_t)t * nh + h) * a.cmax + c) * PSTRIDE;
    for (int d = threadIdx.x; d < HD; d += NT) {
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < NW; w++) sum += sacc[w * HD + d] * e[w];
      dst[d] = sum * scale_out;
    }
    if (threadIdx.x == 0) {
      dst[HD] = C == 1 ? 0.f : M;
      dst[HD + 1] = C == 1 ? 1.f : L;
    }
    csync();
  }
}

// Merge the C partials of every (token, head) into xs[t][h*HD + d] (xpos
// layout). With one chunk the attention wrote finished outputs (max 0, sum
// 1): one batched load. Otherwise a warp per (token, head), its loads for all
// chunks issued together.
template <int MT>
__device__ __forceinline__ void merge_attention(const Params& a, const StackD& S, int m, int C, float* xs, int xstride) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int AO = S.nh * HD;
  if (C == 1) {
    constexpr int R = MT <= 2 ? (MT * 2048 + NT - 1) / NT : 4;  // decode: every output of 16 heads in one batch
    for (int base = 0; base < m * AO; base += R * NT) {
      float o[R];
#pragma unroll
      for (int r = 0; r < R; r++) {
        const int idx = base + threadIdx.x + r * NT;
        const int t = idx / AO, n = idx - t * AO;
        o[r] = idx < m * AO ? __ldcg(a.part + (((size_t)t * S.nh + n / HD) * a.cmax) * PSTRIDE + (n % HD)) : 0.f;
      }
#pragma unroll
      for (int r = 0; r < R; r++) {
        const int idx = base + threadIdx.x + r * NT;
        const int t = idx / AO, n = idx - t * AO;
        if (idx < m * AO) xs[t * xstride + xpos(n, AO)] = o[r];
      }
    }
    csync();
    return;
  }
  constexpr int CM = 8;  // Params::cmax
  for (int pr = warp; pr < m * S.nh; pr += NW) {
    const int t = pr / S.nh, h = pr % S.nh;
    const float* base = a.part + (((size_t)t * S.nh + h) * a.cmax) * PSTRIDE;
    float mx[CM], sm[CM], o[CM][4];
#pragma unroll
    for (int c = 0; c < CM; c++)
      if (c < C) {
        mx[c] = __ldcg(base + c * PSTRIDE + HD);
        sm[c] = __ldcg(base + c * PSTRIDE + HD + 1);
#pragma unroll
        for (int i = 0; i < 4; i++) o[c][i] = __ldcg(base + c * PSTRIDE + lane * 4 + i);
      }
    float M = -CUDART_INF_F;
#pragma unroll
    for (int c = 0; c < CM; c++)
      if (c < C) M = fmaxf(M, mx[c]);
    float L = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int c = 0; c < CM; c++)
      if (c < C) {
        const float e = expf(mx[c] - M);
        L += sm[c] * e;
#pragma unroll
        for (int i = 0; i < 4; i++) acc[i] += o[c][i] * e;
      }
#pragma unroll
    for (int i = 0; i < 4; i++) xs[t * xstride + xpos(h * HD + lane * 4 + i, AO)] = acc[i] / L;
  }
  csync();
}


// ---------------------------------------------------------------- the stack

// Runs all layers of S over m tokens at positions p0..p0+m-1 as step `step`
// of the schedule, whose layer jobs start at index j0. The raw input rows are
// in xs (stride S.H) and, written by CTA 0, in a.x.
template <int MT>
__device__ void run_stack(const Params& a, const StackD& S, Ring& R, int step, int j0, int m, int p0, int C,
                          float* xs, float* red, Grid& g, bool input_in_smem) {
  const int H = S.H, I = S.I, AO = S.nh * HD;
  float* x = a.x;
  const int xsd = a.xstride;
  float* qkv = a.qkv;
  const int qs = a.qkv_stride;
  float* act = a.act;
  const int as = a.act_stride;
  // O and down write rows [rlo, rhi) of the residual, the same rows in both
  // (N = H): this CTA keeps them in shared memory (xres, captured from the
  // layer's input), so adding is a store, not a read-modify-write of global
  // memory on the critical path.
  int rlo, rhi;
  cta_range(Job{nullptr, H, 0, 0}, rlo, rhi);
  float* xres = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(red) + SM_CTL);
  auto add_residual = [&](int r, int t, float v, float) {
    if (t < m) {
      float* k = xres + t * XRES + (r - rlo);
      const float y = *k + v;
      *k = y;
      x[(size_t)t * xsd + r] = y;
    }
  };
  for (int l = 0; l < S.L; l++) {
    // By value: the barriers' memory clobbers would otherwise reload the
    // pointers from global memory (an L2 round trip) in every phase.
    const LayerD Lw = S.layers[l];
    const int jl = j0 + 4 * l;
    // A: input norm + fused QKV projection
    if (l == 0 && input_in_smem)
      norm_rows<MT>(xs, H, nullptr, 0, m, H, Lw.in_norm, S.eps, red, xres, rlo, rhi);
    else
      norm_rows<MT>(xs, H, x, xsd, m, H, Lw.in_norm, S.eps, red, xres, rlo, rhi);
    if (threadIdx.x == 0) g.mark(PH_PRE);
    consume<MT>(a, R, g, job_at(a, step, jl), xs, H, [&](int r, int t, float v, float) {
      if (t < m) qkv[(size_t)t * qs + r] = v;
    });
    g.sync(PH_QKV);
    // B: attention partials
    attention(a, S, l, m, p0, C, xs);
    g.sync(PH_ATTN);
    // C: merge + O projection into the residual
    merge_attention<MT>(a, S, m, C, xs, AO);
    if (threadIdx.x == 0) g.mark(PH_PRE);
    consume<MT>(a, R, g, job_at(a, step, jl + 1), xs, AO, add_residual);
    g.sync(PH_O);
    // D: post-attention norm + gate/up
    norm_rows<MT>(xs, H, x, xsd, m, H, Lw.post_norm, S.eps, red);
    if (threadIdx.x == 0) g.mark(PH_PRE);
    consume<MT>(a, R, g, job_at(a, step, jl + 2), xs, H, [&](int r, int t, float gt, float up) {
      if (t < m) act[(size_t)t * as + r] = gt / (1.f + expf(-gt)) * up;
    });
    g.sync(PH_GU);
    // E: down projection into the residual
    load_rows<MT>(xs, act, as, m, I);
    if (threadIdx.x == 0) g.mark(PH_PRE);
    consume<MT>(a, R, g, job_at(a, step, jl + 3), xs, I, add_residual);
    g.sync(PH_DOWN);
  }
}

// Final norm of token t and the step's head (job jh) into logits; CTA 0
// keeps the normed hidden when hidden_out is set.
__device__ void head(const Params& a, const StackD& S, Ring& R, int step, int jh, int t, float* logits,
                     float* hidden_out, float* xs, float* red, Grid& g) {
  norm_rows<1>(xs, S.H, a.x + (size_t)t * a.xstride, a.xstride, 1, S.H, S.final_norm, S.eps, red);
  if (hidden_out && blockIdx.x == 0)
    for (int i = threadIdx.x; i < S.H; i += NT) hidden_out[i] = xs[xpos(i, S.H)];
  consume<1>(a, R, g, job_at(a, step, jh), xs, S.H, [&](int r, int, float v, float) { logits[r] = v; });
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

// Exclusive block scan of one int per thread; *total gets the sum.
__device__ int block_scan(int v, int* sint, int* total) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  if (lane == 31) sint[warp] = inc;
  csync();
  int base = 0, tot = 0;
  for (int w = 0; w < NW; w++) {
    if (w < warp) base += sint[w];
    tot += sint[w];
  }
  csync();
  *total = tot;
  return base + inc - v;
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
  csync();
  float rv = 0.f;
  int ri = -1;
  for (int w = 0; w < NW; w++) {
    const float ov = sf[w];
    const int oi = sint[w];
    if (oi >= 0 && (ri < 0 || ov > rv || (ov == rv && oi < ri))) { rv = ov; ri = oi; }
  }
  csync();
  return ri;
}

// The k-th largest value among the finite entries (radix select on ordered
// keys, 8 bits a pass). hist holds 2 x 256 ints: each pass counts into one
// buffer while the other is cleared for the next, and publishes its digit in
// its own sint slot, so a pass needs two barriers.
__device__ float kth_largest(const float* sv, int V, int k, int* hist, int* sint) {
  uint32_t prefix = 0, pmask = 0;
  int kk = k;
  for (int i = threadIdx.x; i < 256; i += NT) hist[i] = 0;
  csync();
  for (int pass = 0, shift = 24; shift >= 0; pass++, shift -= 8) {
    int* h = hist + (pass & 1) * 256;
    int* nxt = hist + ((pass + 1) & 1) * 256;
    for (int i = threadIdx.x; i < 256; i += NT) nxt[i] = 0;
    for (int i = threadIdx.x; i < V; i += NT) {
      const float v = sv[i];
      const uint32_t key = fkey(v);
      const bool in = v != -CUDART_INF_F && (key & pmask) == prefix;
      const int bin = in ? (int)((key >> shift) & 255u) : -1;
      // Logits share few exponents, so the first pass would put most of
      // the V increments on two or three bins: one atomic per distinct bin
      // per warp instead.
      const unsigned peers = __match_any_sync(__activemask(), bin);
      if (in && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&h[bin], __popc(peers));
    }
    csync();
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
    csync();
    prefix |= ((uint32_t)res[0]) << shift;
    pmask |= 255u << shift;
    kk = res[1];
  }
  return fkey_inv(prefix);
}

// Candidates whose ids and probabilities fit the shared scratch; more (top-k
// off or very large) use this CTA's slice of Params::samp_scratch.
constexpr int CAND = 512;

// Samples one token from raw logits with the engine/sample semantics.
// Every CTA calls it with the same inputs and gets the same token.
// region (8-byte aligned) holds CAND doubles, then V floats, then 2 x CAND ints.
__device__ int sample_block(const Params& a, const float* lg, int V, const SamplerD& sp, bool talker, int frame,
                            int group, float* region, float* sf, int* sint) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sv = region + 2 * CAND;
  int* hist = sint + 64;
  const float pen = sp.penalty;
  // Processed logits (penalty, EOS mask, suppression), scaled for sampling;
  // the same pass counts the candidates and finds their maximum.
  int local = 0;
  float lmax = -CUDART_INF_F;
  const bool use_pen = talker && pen != 1.f && pen != 0.f;
  constexpr int LB = 7;  // logits per thread in one batch of loads (V up to LB * NT)
  for (int base = 0; base < V; base += LB * NT) {
    float lv[LB];
    uint32_t hb[LB];
#pragma unroll
    for (int q = 0; q < LB; q++) {
      const int i = base + threadIdx.x + q * NT;
      lv[q] = i < V ? __ldcg(lg + i) : 0.f;
      hb[q] = use_pen && i < V ? __ldcg(a.hist + (i >> 5)) : 0u;
    }
#pragma unroll
    for (int q = 0; q < LB; q++) {
      const int i = base + threadIdx.x + q * NT;
      if (i >= V) continue;
      float v = lv[q];
      if (talker) {
        if (use_pen && ((hb[q] >> (i & 31)) & 1u)) v = v < 0.f ? v * pen : v / pen;
        if (i == a.eos && (frame < a.min_new || a.mask_eos)) v = -CUDART_INF_F;
        if (i >= a.supp_from && i != a.eos) v = -CUDART_INF_F;
      }
      if (sp.do_sample) {
        v = isnan(v) ? -CUDART_INF_F : v / sp.temperature;  // NaN is no candidate
        local += v != -CUDART_INF_F;
        lmax = fmaxf(lmax, v);
      }
      sv[i] = v;
    }
  }
  if (!sp.do_sample) {
    csync();
    return block_argmax(sv, V, sf, sint);
  }
  {
    const int c = (int)warp_sum((float)local);  // exact: V < 2^24
    lmax = warp_max(lmax);
    if (lane == 0) {
      sint[16 + warp] = c;
      sf[warp] = lmax;
    }
  }
  csync();
  int ncand = 0;
  float bmax = -CUDART_INF_F;
  for (int w = 0; w < NW; w++) {
    ncand += sint[16 + w];
    bmax = fmaxf(bmax, sf[w]);
  }
  if (ncand == 0) return -1;
  float thr = -CUDART_INF_F;
  if (sp.top_k > 0 && sp.top_k < ncand) thr = kth_largest(sv, V, sp.top_k, hist, sint);
  // Ordered compaction of the kept ids (ascending id), with exp(v - max) in
  // float64 as the CPU computes it (the maximum over the kept ids is the
  // maximum over all candidates: the largest always survives top-k).
  const int seg = (V + NT - 1) / NT;
  const int lo = threadIdx.x * seg, hi = min(lo + seg, V);
  int cnt = 0;
  for (int i = lo; i < hi; i++) cnt += (sv[i] != -CUDART_INF_F && sv[i] >= thr);
  int nkept;
  int off = block_scan(cnt, sint, &nkept);
  const bool big = nkept > CAND;
  double* pd = big ? a.samp_scratch + (size_t)blockIdx.x * 2 * V : reinterpret_cast<double*>(region);
  int* ids = big ? reinterpret_cast<int*>(pd + V) : reinterpret_cast<int*>(sv + V);
  int* ord = big ? ids + V : ids + CAND;
  const double mx = (double)bmax;
  for (int i = lo; i < hi; i++)
    if (sv[i] != -CUDART_INF_F && sv[i] >= thr) {
      pd[off] = exp((double)sv[i] - mx);
      ids[off++] = i;
    }
  csync();
  if (sp.top_p < 1.f && nkept > 1) {
    // Rank in (value desc, id asc) order, then drop the low tail as the CPU does.
    for (int j = threadIdx.x; j < nkept; j += NT) {
      const int id = ids[j];
      const float v = sv[id];
      int r = 0;
      for (int q = 0; q < nkept; q++) {
        const float w = sv[ids[q]];
        r += (w > v) || (w == v && ids[q] < id);
      }
      ord[r] = j;
    }
    csync();
    if (threadIdx.x == 0) {
      double sum = 0.0;
      for (int q = 0; q < nkept; q++) sum += pd[ord[q]];
      const double cut = 1.0 - (double)sp.top_p;
      double cum = 0.0;
      int size = nkept;
      for (int q = nkept - 1; q > 0; q--) {
        cum += pd[ord[q]] / sum;
        if (cum > cut) break;
        size = q;
      }
      // Mark the dropped ids with -inf so the ascending list can be rebuilt.
      for (int q = size; q < nkept; q++) sv[ids[ord[q]]] = -CUDART_INF_F;
    }
    csync();
    cnt = 0;
    for (int i = lo; i < hi; i++) cnt += (sv[i] != -CUDART_INF_F && sv[i] >= thr);
    off = block_scan(cnt, sint, &nkept);
    for (int i = lo; i < hi; i++)
      if (sv[i] != -CUDART_INF_F && sv[i] >= thr) {
        pd[off] = exp((double)sv[i] - mx);
        ids[off++] = i;
      }
    csync();
  }
  if (nkept == 1) return ids[0];
  // Softmax and inverse CDF in the CPU's order: lane 0 of warp 0 sums, the
  // warp divides, lane 0 accumulates and picks.
  if (warp == 0) {
    double sum = 0.0;
    if (lane == 0) {
#pragma unroll 8
      for (int q = 0; q < nkept; q++) sum += pd[q];
    }
    sum = __shfl_sync(0xffffffffu, sum, 0);
    for (int q = lane; q < nkept; q += 32) pd[q] = pd[q] / sum;
    __syncwarp();
    if (lane == 0) {
      const double u = uniform(a.seed, frame, group);
      double cum = 0.0;
      int pick = ids[nkept - 1];
#pragma unroll 8
      for (int q = 0; q < nkept; q++) {
        cum += pd[q];
        if (cum > u) {
          pick = ids[q];
          break;
        }
      }
      sint[2] = pick;
    }
  }
  csync();
  return sint[2];
}

// ---------------------------------------------------------------- steps

struct Smem {
  float* xs;      // activations / attention / sampling scratch (aliased by phase)
  float* red;     // 128 floats (NW x MAXMT partial sums)
  float* sf;      // 64 floats
  int* sint;      // 64 + 512 ints (the radix select's two histograms from 64)
  int* codes;     // [MAXG] codes fed back this frame
};

// Code-predictor step j (1..15) of frame a.frame, step `step` of the
// schedule; returns the sampled code.
__device__ int predictor_step(const Params& a, int j, int step, const Smem& s, Ring& R, Grid& g) {
  const StackD& S = a.cp;
  g.stack = 1;
  const int H = a.tk.H;  // width of the raw inputs (talker hidden)
  const int m = j == 1 ? 2 : 1;
  const int p0 = j == 1 ? 0 : j;
  // Raw inputs: [talker hidden, C(g0)] for step 1, E_{j-1}(g_{j-1}) after.
  {
    constexpr int EB = 5;  // one batch of loads for inputs up to EB * NT wide
    const uint16_t* e = j == 1 ? a.codec_emb + (size_t)s.codes[0] * H
                               : a.cp_embs + ((size_t)(j - 2) * a.Vp + s.codes[j - 1]) * H;
    for (int base = 0; base < H; base += EB * NT) {
      float hv[EB];
      uint16_t ev[EB];
#pragma unroll
      for (int q = 0; q < EB; q++) {
        const int i = base + threadIdx.x + q * NT;
        hv[q] = j == 1 && i < H ? __ldcg(a.hidden + i) : 0.f;
        ev[q] = i < H ? e[i] : 0;
      }
#pragma unroll
      for (int q = 0; q < EB; q++) {
        const int i = base + threadIdx.x + q * NT;
        if (i >= H) continue;
        if (j == 1) {
          s.xs[xpos(i, H)] = hv[q];
          s.xs[H + xpos(i, H)] = bf(ev[q]);
        } else {
          s.xs[xpos(i, H)] = bf(ev[q]);
        }
      }
    }
  }
  csync();
  bool in_smem = true;
  int j0 = 0;
  if (a.proj_w) {
    // small_to_mtp_projection (1.7B): rows of the CP width, with bias, into the residual.
    float* x = a.x;
    const int xsd = a.xstride;
    const uint16_t* b = a.proj_b;
    consume<2>(a, R, g, job_at(a, step, 0), s.xs, H, [&](int r, int t, float v, float) {
      if (t < m) x[(size_t)t * xsd + r] = v + bf(b[r]);
    });
    g.sync(PH_PROJ);
    in_smem = false;
    j0 = 1;
  } else if (blockIdx.x == 0) {
    for (int t = 0; t < m; t++)
      for (int i = threadIdx.x; i < H; i += NT) a.x[(size_t)t * a.xstride + i] = s.xs[t * H + xpos(i, H)];
  }
  if (m == 2)
    run_stack<2>(a, S, R, step, j0, 2, p0, 1, s.xs, s.red, g, in_smem);
  else
    run_stack<1>(a, S, R, step, j0, 1, p0, 1, s.xs, s.red, g, in_smem);
  float* lg = a.plogits + (size_t)(j - 1) * a.Vp;
  head(a, S, R, step, j0 + 4 * S.L, m - 1, lg, nullptr, s.xs, s.red, g);
  const int c = sample_block(a, lg, a.Vp, a.sp, false, a.frame, j, s.xs, s.sf, s.sint);
  if (threadIdx.x == 0) g.mark(PH_SAMPLE);
  return c;
}

// Talker step for the codes in s.codes (frame a.frame fed back), step `step`
// of the schedule: builds the input embedding, runs the stack at a.tpos and
// samples group 0 of the next frame.
__device__ int talker_step(const Params& a, int step, const Smem& s, Ring& R, Grid& g) {
  const StackD& S = a.tk;
  g.stack = 0;
  const int H = S.H;
  const float* text = a.frame < a.ntrail ? a.trail + (size_t)a.frame * H : a.pad;
  // The 16 embedding rows and the text row, every load of a batch issued
  // before the sums (same summation order as the CPU engine).
  constexpr int EB = 3;
  const uint16_t* rows[MAXG];
  rows[0] = a.codec_emb + (size_t)s.codes[0] * H;
#pragma unroll
  for (int k = 1; k < MAXG; k++) rows[k] = a.cp_embs + ((size_t)(k - 1) * a.Vp + (k < a.G ? s.codes[k] : 0)) * H;
  for (int base = 0; base < H; base += EB * NT) {
    uint16_t e[MAXG][EB];
    float tx[EB];
#pragma unroll
    for (int q = 0; q < EB; q++) {
      const int i = base + threadIdx.x + q * NT;
#pragma unroll
      for (int k = 0; k < MAXG; k++) e[k][q] = i < H && k < a.G ? rows[k][i] : 0;
      tx[q] = i < H ? text[i] : 0.f;
    }
#pragma unroll
    for (int q = 0; q < EB; q++) {
      const int i = base + threadIdx.x + q * NT;
      if (i >= H) continue;
      float v = bf(e[0][q]);
#pragma unroll
      for (int k = 1; k < MAXG; k++)
        if (k < a.G) v += bf(e[k][q]);
      v += tx[q];
      s.xs[xpos(i, H)] = v;
      if (blockIdx.x == 0) a.x[i] = v;
    }
  }
  csync();
  if (threadIdx.x == 0) g.mark(PH_OTHER);
  run_stack<1>(a, S, R, step, 0, 1, a.tpos, a.chunks, s.xs, s.red, g, true);
  head(a, S, R, step, 4 * S.L, 0, a.tlogits, a.hidden, s.xs, s.red, g);
  const int c = sample_block(a, a.tlogits, a.V, a.st, true, a.frame + 1, 0, s.xs, s.sf, s.sint);
  if (threadIdx.x == 0) g.mark(PH_SAMPLE);
  return c;
}

template <int MT>
__device__ void prefill_chunk(const Params& a, const Smem& s, Ring& R, Grid& g) {
  const StackD& S = a.tk;
  const int H = S.H;
  for (int t = 0; t < a.m; t++)
    for (int i = threadIdx.x; i < H; i += NT) {
      const float v = a.rows[(size_t)t * H + i];
      s.xs[t * H + xpos(i, H)] = v;
      if (blockIdx.x == 0) a.x[(size_t)t * a.xstride + i] = v;
    }
  csync();
  run_stack<MT>(a, S, R, 0, 0, a.m, a.p0, a.chunks, s.xs, s.red, g, true);
  if (!a.last) return;
  head(a, S, R, 0, 4 * S.L, a.m - 1, a.tlogits, a.hidden, s.xs, s.red, g);
  const int g0 = sample_block(a, a.tlogits, a.V, a.st, true, 0, 0, s.xs, s.sf, s.sint);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.state[0] = g0;
    a.out[16] = g0;
    a.out[17] = g0 < 0;
  }
}

__global__ void __launch_bounds__(NTH, 1) decode_kernel(const __grid_constant__ Params a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem s;
  s.red = reinterpret_cast<float*>(smem_raw);
  s.sf = s.red + 128;
  s.sint = reinterpret_cast<int*>(s.sf + 64);
  s.codes = s.sint + 64 + 512;
  s.xs = reinterpret_cast<float*>(smem_raw + SM_XS);
  Grid g{a.bar, 0, 0, nullptr, 0};
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
  // The weight stream starts at once: the first chunks load while the
  // consumers gather the inputs.
  Ring R;
  R.init(a, smem_raw);
#if TB_BARBENCH
  if (a.mode == MODE_TALKER) {  // the consumers time grid barriers; nothing streams
    if (threadIdx.x < NT)
      for (int i = 0; i < 1000; i++) g.sync(PH_OTHER);
    return;
  }
#endif
  if (threadIdx.x >= NT) {  // the producer warp
    R.produce(a);
    return;
  }
  if (a.mode == MODE_PREFILL) {
    if (a.m > 4) prefill_chunk<8>(a, s, R, g);
    else if (a.m > 2) prefill_chunk<4>(a, s, R, g);
    else if (a.m == 2) prefill_chunk<2>(a, s, R, g);
    else prefill_chunk<1>(a, s, R, g);
    return;
  }
  // Codes fed back in this frame: the last sampled (or teacher) group 0 and,
  // for a talker-only launch, the previous frame's codes.
  if (threadIdx.x < MAXG) {
    int c = __ldcg(a.state + 1 + threadIdx.x);
    if (threadIdx.x == 0) c = __ldcg(a.state);
    if (a.use_teacher) c = a.teacher[threadIdx.x];
    s.codes[threadIdx.x] = c;
  }
  csync();
  if (a.mode == MODE_PREDICTOR) {
    predictor_step(a, a.bench_step, 0, s, R, g);
    return;
  }
  int sampled[MAXG];
  sampled[0] = __ldcg(a.state);
  if (a.mode == MODE_FRAME) {
    // History gets the group-0 code fed back; other CTAs read it only after barriers.
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      const int c0 = s.codes[0];
      if (c0 >= 0 && c0 < a.V) a.hist[c0 >> 5] |= 1u << (c0 & 31);
    }
#pragma unroll 1
    for (int j = 1; j < a.G; j++) {
      const int c = predictor_step(a, j, j - 1, s, R, g);
      sampled[j] = c;
      if (threadIdx.x == 0) s.codes[j] = a.use_teacher ? a.teacher[j] : (c < 0 ? 0 : c);
      csync();
    }
  }
  const int next = talker_step(a, a.mode == MODE_FRAME ? a.G - 1 : 0, s, R, g);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.state[0] = next;
    int bad = next < 0;
    for (int k = 0; k < MAXG; k++) a.state[1 + k] = s.codes[k];
    if (a.mode == MODE_FRAME) {
      // Emitted codes are the ones fed back (the teacher's under teacher
      // forcing), as in the CPU engine.
      for (int k = 0; k < a.G; k++) {
        a.out[k] = s.codes[k];
        bad |= sampled[k] < 0;
      }
    }
    a.out[16] = next;
    a.out[17] = bad;
  }
}

// tb_sample: one CTA runs the sampler on given logits (tests).
__global__ void __launch_bounds__(NTH, 1) sample_kernel(const __grid_constant__ Params a, const float* lg, int V, int frame, int group,
                                                         int32_t* out) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  if (threadIdx.x >= NT) return;  // the consumer barrier counts NT threads
  float* red = reinterpret_cast<float*>(smem_raw);
  float* sf = red + 128;
  int* sint = reinterpret_cast<int*>(sf + 64);
  const int c = sample_block(a, lg, V, a.sp, false, frame, group, reinterpret_cast<float*>(smem_raw + SM_XS), sf, sint);
  if (threadIdx.x == 0) *out = c;
}

}  // namespace tb
