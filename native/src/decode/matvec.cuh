// Matrix-vector products: a warp per output row, weights streamed once.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "common.cuh"

namespace tb {

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

}  // namespace tb
