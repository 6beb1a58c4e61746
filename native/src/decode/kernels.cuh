// The __global__ kernels: prefill_kernel, decode_kernel<FUSE> and sample_kernel.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "steps.cuh"

namespace tb {

// Copies both stacks' layer tables into s.layers (read after the caller's
// next __syncthreads): one round trip at a launch's start, beside the codes'.
__device__ __forceinline__ void load_layer_table(const Params& a, const Smem& s) {
  constexpr int W = sizeof(LayerD) / 8;  // 8-byte words a layer
  static_assert(sizeof(LayerD) % 8 == 0, "LayerD holds pointers only");
  const int nt = a.w.tk.L * W, n = nt + a.w.cp.L * W;
  const unsigned long long* tk = reinterpret_cast<const unsigned long long*>(a.w.tk.layers);
  const unsigned long long* cp = reinterpret_cast<const unsigned long long*>(a.w.cp.layers);
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
  s.xs = reinterpret_cast<float*>(raw + SM_XS + layer_table_bytes(a.w.tk.L + a.w.cp.L));
  return s;
}

// Prefill passes have their own kernel: their many-token matvecs need far
// more registers than a decode step, and in one kernel they set its
// register allocation and local-memory stack for every decode launch too.
__global__ void __launch_bounds__(NT, 1) prefill_kernel(const __grid_constant__ Params a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Smem s = smem_layout(smem_raw, a);
  Grid g{a.arg.bar, 0, 0, nullptr, 0};
  load_layer_table(a, s);
  // The next launch's barrier counter: this launch never touches it, and the
  // last launch that did has ended.
  if (blockIdx.x == 0 && threadIdx.x == 0) *a.arg.bar_next = 0;
#if TB_PROF
  __shared__ unsigned long long prof_acc[2 * NPH * 2];  // counted, not reported
  if (threadIdx.x < 2 * NPH * 2) prof_acc[threadIdx.x] = 0;
  __syncthreads();
  g.acc = prof_acc;
#endif
  if (a.arg.m == 0) prefill_head(a, s, 0, g);  // after the tensor-core prefill (prefill_tc.cuh)
  else if (a.buf.mmax >= 8 && a.arg.m > 4) prefill_chunk<8>(a, s, g);
  else if (a.arg.m > 2) prefill_chunk<4>(a, s, g);
  else if (a.arg.m == 2) prefill_chunk<2>(a, s, g);
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
  Grid g{a.arg.bar, 0, 0, nullptr, 0};
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
  struct Flush {  // adds CTA 0's counters to a.dbg.prof when the kernel returns
    const Params& a;
    unsigned long long *acc, &t0, &ns0;
    __device__ ~Flush() {
      if (blockIdx.x != 0 || threadIdx.x != 0 || !a.dbg.prof) return;
      unsigned long long ns;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
      const unsigned long long cyc = clock64() - t0;
      for (int i = 0; i < 2 * NPH * 2; i++) atomicAdd(a.dbg.prof + i, acc[i]);
      atomicAdd(a.dbg.prof + 2 * NPH * 2, cyc);
      atomicAdd(a.dbg.prof + 2 * NPH * 2 + 1, ns - ns0);
      atomicAdd(a.dbg.prof + 2 * NPH * 2 + 2, 1ull);
    }
  } flush{a, prof_acc, t_start, ns_start};
#endif
  // Codes fed back in this frame: the last sampled (or teacher) group 0 and,
  // for a talker-only launch, the previous frame's codes.
  if (threadIdx.x < MAXG) {
    int c = __ldcg(a.buf.state + 1 + threadIdx.x);
    if (threadIdx.x == 0) c = __ldcg(a.buf.state);
    if (a.arg.use_teacher) c = a.arg.teacher[threadIdx.x];
    s.codes[threadIdx.x] = c;
  }
  __syncthreads();
  // Whether any of this frame's groups failed to sample (no candidate): a
  // flag, not an array of the codes indexed by j, which would live in local
  // memory.
  int bad_codes = __ldcg(a.buf.state) < 0;
  // The predictor bench (MODE_PREDICTOR) runs one step of this loop: the code
  // a frame runs. As a second inlined copy it had its own register
  // allocation, and timed something else than the frame's steps.
  const bool bench_step = a.arg.mode == MODE_PREDICTOR;
  if (a.arg.mode == MODE_FRAME || bench_step) {
    // History gets the group-0 code fed back; other CTAs read it only after barriers.
    if (!bench_step && blockIdx.x == 0 && threadIdx.x == 0) {
      const int c0 = s.codes[0];
      if (c0 >= 0 && c0 < a.w.V) a.buf.hist[c0 >> 5] |= 1u << (c0 & 31);
    }
#pragma unroll 1
    for (int j = bench_step ? a.arg.bench_step : 1; j < (bench_step ? a.arg.bench_step + 1 : a.w.G); j++) {
      const int c = predictor_step(a, j, s, g);
      bad_codes |= c < 0;
      if (threadIdx.x == 0) s.codes[j] = a.arg.use_teacher ? a.arg.teacher[j] : (c < 0 ? 0 : c);
      __syncthreads();
    }
    if (bench_step) {
      if (blockIdx.x == 0 && threadIdx.x == 0) *a.arg.bar_next = 0;  // as below
      return;
    }
    // The frame's codes are final: publish them to the host now, so the first
    // audio need not wait for the talker step below (tb_frame_codes).
    if (a.buf.early && blockIdx.x == 0 && threadIdx.x == 0) {
      volatile int32_t* pub = a.buf.early;
      pub[0] = 0;
      __threadfence_system();
      for (int k = 0; k < a.w.G; k++) pub[1 + k] = s.codes[k];
      pub[1 + MAXG] = bad_codes;
      __threadfence_system();
      pub[0] = a.arg.early_seq;
    }
  }
  const int next = talker_step<FUSE>(a, s, g);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    // The next launch's barrier counter, zeroed here rather than at the start
    // (as prefill_kernel does): there it grew decode_kernel<false>'s stack
    // frame from 72 to 120 bytes (ptxas 12.6).
    *a.arg.bar_next = 0;
    a.buf.state[0] = next;
    int bad = next < 0;
    for (int k = 0; k < MAXG; k++) a.buf.state[1 + k] = s.codes[k];
    if (a.arg.mode == MODE_FRAME) {
      // Emitted codes are the ones fed back (the teacher's under teacher
      // forcing), as in the CPU engine.
      for (int k = 0; k < a.w.G; k++) a.arg.out[k] = s.codes[k];
      bad |= bad_codes;
    }
    a.arg.out[16] = next;
    a.arg.out[17] = bad;
  }
}

// tb_sample: one CTA runs the sampler on given logits (tests).
__global__ void __launch_bounds__(NT, 1) sample_kernel(const __grid_constant__ Params a, const float* lg, int V,
                                                        int frame, int group, bool exact, int32_t* out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);
  float* sf = red + 64;
  int* sint = reinterpret_cast<int*>(sf + 64);
  const int c = sample_block<false>(a, lg, V, a.arg.sp, frame, group, reinterpret_cast<float*>(smem_raw + SM_XS), sf, sint,
                             nullptr, exact);
  if (threadIdx.x == 0) *out = c;
}

}  // namespace tb
