// The software grid barrier between phases, and the per-phase profiling marks.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "params.cuh"

namespace tb {

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
    // Acquire loads in the spin: 1.00 us per barrier (1000 barriers in one launch, H100)
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

}  // namespace tb
