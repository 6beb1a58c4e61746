// RMSNorm preludes (plain and fixed-point residual rows), q/k norm with RoPE, the RoPE table.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "common.cuh"

namespace tb {

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

}  // namespace tb
