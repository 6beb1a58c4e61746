// Small device helpers: bf16 unpacking, 64-bit fixed point, 16-byte weight loads,
// warp reductions and scans, batched loads.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include <math_constants.h>

#include "params.cuh"

namespace tb {

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

}  // namespace tb
