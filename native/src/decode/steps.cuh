// One talker step, one code-predictor step, and the prefill passes.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "stack.cuh"
#include "sampler.cuh"

namespace tb {

struct Smem {
  float* xs;      // activations / attention / sampling scratch (aliased by phase)
  float* red;     // 64 floats
  float* sf;      // 64 floats
  int* sint;      // 64 + 512 ints (the radix select's two histograms from 64)
  int* codes;     // [MAXG] codes fed back this frame
  LayerD* layers; // every layer's pointers: the talker's, then the predictor's
};

// Code-predictor step j (1..15) of frame a.arg.frame; returns the sampled code.
// Steps 2..15 fuse attention with O (run_stack): the context is at most 16
// positions. Inlined: as a call it gave decode_kernel<false> a 368-byte stack
// frame (H100: a frame at 40 positions in 3.82 ms against 3.16 inlined).
__device__ __forceinline__ int predictor_step(const Params& a, int j, const Smem& s, Grid& g) {
  const StackD& S = a.w.cp;
  g.stack = 1;
  const int H = a.w.tk.H;  // width of the raw inputs (talker hidden)
  const int m = j == 1 ? 2 : 1;
  const int p0 = j == 1 ? 0 : j;
  // Raw inputs: [talker hidden, C(g0)] for step 1, E_{j-1}(g_{j-1}) after.
  {
    const uint16_t* e = j == 1 ? a.w.codec_emb + (size_t)s.codes[0] * H
                               : a.w.cp_embs + ((size_t)(j - 2) * a.w.Vp + s.codes[j - 1]) * H;
    struct Input {
      float hidden;
      uint16_t emb;
    };
    batched<4>(
        H, [&](int i) { return Input{j == 1 ? __ldcg(a.buf.hidden + i) : 0.f, e[i]}; },
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
  if (a.w.proj_w) {
    // small_to_mtp_projection (1.7B): rows of the CP width, with bias, into the residual.
    float* x = a.buf.x;
    const int xsd = a.buf.xstride;
    const uint16_t* b = a.w.proj_b;
    matvec<2>(
        a.w.proj_w, S.H, H, s.xs, H, m,
        [&](int r, int t, float v) {
          const float y = v + bf(b[r]);
          if (m == 1) {  // the fused stack reads only xfix row 1 (run_stack)
            a.buf.xfix[xsd + r] = to_fix(y);
#pragma unroll
            for (int c = 1; c < NCOPY; c++) a.buf.xfix[(size_t)fix_row(1, c) * xsd + r] = 0;
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
        a.buf.xfix[a.buf.xstride + i] = to_fix(s.xs[i]);
#pragma unroll
        for (int c = 1; c < NCOPY; c++) a.buf.xfix[(size_t)fix_row(1, c) * a.buf.xstride + i] = 0;
      }
    else
      for (int t = 0; t < m; t++)
        for (int i = threadIdx.x; i < H; i += NT) a.buf.x[(size_t)t * a.buf.xstride + i] = s.xs[t * H + i];
  }
  if (m == 2)
    run_stack<2>(a, S, s.layers + a.w.tk.L, 2, p0, 1, s.xs, s.red, g, in_smem);
  else
    run_stack<1, true>(a, S, s.layers + a.w.tk.L, 1, p0, 1, s.xs, s.red, g, in_smem);
  float* lg = a.buf.plogits + (size_t)(j - 1) * a.w.Vp;
  head(a, S, m - 1, a.w.cp_heads + (size_t)(j - 1) * a.w.Vp * S.H, a.w.Vp, lg, nullptr, s.xs, s.red, g,
       m == 1 ? a.buf.xfix + (size_t)((S.L - 1) & 1) * a.buf.xstride : nullptr);
  const int c = sample_block<false>(a, lg, a.w.Vp, a.arg.sp, a.arg.frame, j, s.xs, s.sf, s.sint, &g);
  if (threadIdx.x == 0) g.mark(PH_SAMPLE);
  return c;
}

// Talker step for the codes in s.codes (frame a.arg.frame fed back): builds the
// input embedding, runs the stack at a.arg.tpos and samples group 0 of the next frame.
template <bool FUSE>
__device__ int talker_step(const Params& a, const Smem& s, Grid& g) {
  const StackD& S = a.w.tk;
  g.stack = 0;
  const int H = S.H;
  const float* text = a.arg.frame < a.arg.ntrail ? a.arg.trail + (size_t)a.arg.frame * H : a.buf.pad;
  // The 16 embedding rows and the text row, every load issued before the
  // sums, summed in the CPU engine's order. A thread takes two adjacent
  // elements (H is a multiple of 8), one 32-bit load a row: the form that
  // loaded 16-bit elements two at a time held twice the registers, and ptxas
  // spilled around it once the layers' phases needed more.
  const uint16_t* rows[MAXG];
  rows[0] = a.w.codec_emb + (size_t)s.codes[0] * H;
#pragma unroll
  for (int k = 1; k < MAXG; k++) rows[k] = a.w.cp_embs + ((size_t)(k - 1) * a.w.Vp + (k < a.w.G ? s.codes[k] : 0)) * H;
  for (int i = 2 * threadIdx.x; i < H; i += 2 * NT) {
    uint32_t e[MAXG];
#pragma unroll
    for (int k = 0; k < MAXG; k++) e[k] = k < a.w.G ? *reinterpret_cast<const uint32_t*>(rows[k] + i) : 0u;
    const float2 tx = *reinterpret_cast<const float2*>(text + i);
    float v0 = bflo(e[0]), v1 = bfhi(e[0]);
#pragma unroll
    for (int k = 1; k < MAXG; k++)
      if (k < a.w.G) {
        v0 += bflo(e[k]);
        v1 += bfhi(e[k]);
      }
    v0 += tx.x;
    v1 += tx.y;
    s.xs[i] = v0;
    s.xs[i + 1] = v1;
    if (blockIdx.x == 0) {  // the residual: xfix row 1 for the fused stack (run_stack)
      if (FUSE) {
        a.buf.xfix[a.buf.xstride + i] = to_fix(v0);
        a.buf.xfix[a.buf.xstride + i + 1] = to_fix(v1);
#pragma unroll
        for (int c = 1; c < NCOPY; c++) {
          a.buf.xfix[(size_t)fix_row(1, c) * a.buf.xstride + i] = 0;
          a.buf.xfix[(size_t)fix_row(1, c) * a.buf.xstride + i + 1] = 0;
        }
      } else {
        a.buf.x[i] = v0;
        a.buf.x[i + 1] = v1;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) g.mark(PH_OTHER);
  run_stack<1, FUSE>(a, S, s.layers, 1, a.arg.tpos, a.arg.chunks, s.xs, s.red, g, true);
  head(a, S, 0, a.w.codec_head, a.w.V, a.buf.tlogits, a.buf.hidden, s.xs, s.red, g,
       FUSE ? a.buf.xfix + (size_t)((S.L - 1) & 1) * a.buf.xstride : nullptr);
  const int c = sample_block<true>(a, a.buf.tlogits, a.w.V, a.arg.st, a.arg.frame + 1, 0, s.xs, s.sf, s.sint, &g);
  if (threadIdx.x == 0) g.mark(PH_SAMPLE);
  return c;
}

// After the prompt's last row (row t of a.buf.x): final norm, codec head and
// group 0 of frame 0.
__device__ void prefill_head(const Params& a, const Smem& s, int t, Grid& g) {
  head(a, a.w.tk, t, a.w.codec_head, a.w.V, a.buf.tlogits, a.buf.hidden, s.xs, s.red, g);
  const int g0 = sample_block<true>(a, a.buf.tlogits, a.w.V, a.arg.st, 0, 0, s.xs, s.sf, s.sint);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.buf.state[0] = g0;
    a.arg.out[16] = g0;
    a.arg.out[17] = g0 < 0;
  }
}

template <int MT>
__device__ void prefill_chunk(const Params& a, const Smem& s, Grid& g) {
  const StackD& S = a.w.tk;
  const int H = S.H;
  for (int t = 0; t < a.arg.m; t++)
    for (int i = threadIdx.x; i < H; i += NT) {
      const float v = a.arg.rows[(size_t)t * H + i];
      s.xs[t * H + i] = v;
      if (blockIdx.x == 0) a.buf.x[(size_t)t * a.buf.xstride + i] = v;
    }
  __syncthreads();
  run_stack<MT>(a, S, s.layers, a.arg.m, a.arg.p0, a.arg.chunks, s.xs, s.red, g, true);
  if (a.arg.last) prefill_head(a, s, a.arg.m - 1, g);
}

}  // namespace tb
