// Sampling in every CTA: penalty, suppression, top-k/top-p and the counter-based draw.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "common.cuh"
#include "grid_barrier.cuh"

namespace tb {

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
      V, [&](int i) { return Logit{__ldcg(lg + i), use_pen ? __ldcg(a.buf.hist + (i >> 5)) : 0u}; },
      [&](int i, Logit l) {
        float v = l.v;
        if (TALKER) {
          if (use_pen && ((l.seen >> (i & 31)) & 1u)) v = v < 0.f ? v * pen : v / pen;
          if (i == a.w.eos && (frame < a.w.min_new || a.arg.mask_eos)) v = -CUDART_INF_F;
          if (i >= a.w.supp_from && i != a.w.eos) v = -CUDART_INF_F;
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
      double* p = n > CAND ? a.buf.samp_scratch + (size_t)blockIdx.x * 2 * V : reinterpret_cast<double*>(region);
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
  return draw_kept(sv, V, thr, mx, uniform(a.arg.seed, frame, group), exact, pe, pe + V, sint);
}

}  // namespace tb
