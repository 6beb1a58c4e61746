// The MLP: its prelude after attention_o and the one-phase gate/up/down of fused steps.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "norms.cuh"
#include "matvec.cuh"
#include "grid_barrier.cuh"

namespace tb {

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
// split-K share of the down projection. Every CTA adds its partials, and the
// un-normed residual elements o = b (mod grid) it owns, into the next
// residual with 64-bit integer red.add (to_fix): xfix row l & 1, copy
// b % NCOPY (fix_row), which run_stack zeroed. The layer's input is row
// (l + 1) & 1 (for layer 0 the step's input, written there by CTA 0).
// Shared memory past xs: act [I], residual [H], partials [R][H] (engine.cu
// sizes it).
//
// The float partials do not depend on the grid, so the host may launch on
// every SM or leave some to the codec (tb_leave_sms) with the same results:
// a partial sums the rows of one share s (row j in share j mod P, P =
// a.buf.shares, a multiple of the grid) in ascending order, and the partials
// meet only as integers. CTA b holds shares b + grid r, r < R = P / grid:
// its rows m = r + R i. On every SM of an H100 (P = 4 x 132) that is the
// split the kernel had before it could switch grids (four row groups a CTA,
// ~6 rows each at the 0.6B's shapes).
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
    norm_resid(xs, a.buf.xfix + (size_t)((l + 1) & 1) * a.buf.xstride, a.buf.xfix + 2 * (size_t)a.buf.xstride, xr, H, Lw.post_norm,
               S.eps, red, fix_copy_offset(a.buf.xstride), hook...);
  });
  // Thread t: outputs 8c..8c+7 of chunk c = t % nc for share r = t / nc,
  // all KB loads of a batch in flight at once.
  constexpr int KB = 6;  // the 0.6B on 132 SMs: 24 rows a CTA, 4 shares, one batch
  const int R = a.buf.shares / G, nc = H >> 3;
  __syncthreads();
  prof_mark(gp, PH_GU);
  for (int t = threadIdx.x; t < R * nc; t += NT) {
    const int c = t % nc, r = t / nc;
    float sum[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int m0 = r; m0 < nj; m0 += R * KB) {
      uint4 w[KB];
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int m = m0 + R * k;
        w[k] = m < nj ? ldw(reinterpret_cast<const uint4*>(Lw.down_t + (size_t)(b + G * m) * H) + c)
                      : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int m = m0 + R * k;
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
    for (int e = 0; e < 8; e++) part[r * H + c * 8 + e] = sum[e];
  }
  __syncthreads();
  long long* dst = a.buf.xfix + (size_t)fix_row(l & 1, b & (NCOPY - 1)) * a.buf.xstride;  // copy b % NCOPY
  for (int o = threadIdx.x; o < H; o += NT) {
    long long y = o % G == b ? to_fix(xr[o]) : 0;
    for (int r = 0; r < R; r++) y += to_fix(part[r * H + o]);
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(dst + o), "l"(y) : "memory");
  }
}

}  // namespace tb
