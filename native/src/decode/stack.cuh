// One transformer stack (talker or code predictor) over its layers, and the final norm + head.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "attention.cuh"
#include "mlp.cuh"

namespace tb {

// Runs all layers of S over m tokens at positions p0..p0+m-1. The raw input
// rows are in xs (stride S.H) and, written by CTA 0, in a.buf.x. FUSE (one-token
// steps of decode_kernel<true>; prefill and the two-token predictor step keep
// five phases): attention and the O projection run as one phase
// (attention_o, then norm_resid in the MLP's prelude), and the MLP as another
// (gate_up_down), three barriers a layer. The residual then lives in a.buf.xfix
// as fixed-point sums: the step's input in row 1 (CTA 0 writes it there, and
// the raw rows to xs or a.buf.x row 0 as for the other paths), layer l's output in
// row l & 1, so the stack's output is row (L - 1) & 1 (head's fsrc).
template <int MT, bool FUSE = false>
__device__ void run_stack(const Params& a, const StackD& S, const LayerD* lw, int m, int p0, int C, float* xs,
                          float* red, Grid& g, bool input_in_smem) {
  const int H = S.H, I = S.I, QN = (S.nh + 2 * S.nkv) * HD, AO = S.nh * HD;
  float* x = a.buf.x;
  const int xsd = a.buf.xstride;
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
    float* qkv = a.buf.qkv;
    const int qs = a.buf.qkv_stride;
    // The fused step issues its first weights from inside the norm prelude,
    // right after the activation loads (H100: talker step -4 us, frame -40).
    matvec<MT, false, fuse>(
        Lw.qkv, QN, H, xs, H, m, [&](int r, int t, float v) { qkv[(size_t)t * qs + r] = v; },
        [&](auto... hook) {
          if constexpr (fuse) {  // layer 0 from xs unless the input is only in xfix (1.7B projection)
            const bool fixed = l > 0 || !input_in_smem;
            norm_rows(xs, H, nullptr, 0, 1, H, Lw.in_norm, S.eps, red,
                      fixed ? a.buf.xfix + (size_t)((l + 1) & 1) * xsd : nullptr, fix_copy_offset(xsd), hook...);
          } else if (l == 0 && input_in_smem)
            norm_rows(xs, H, nullptr, 0, m, H, Lw.in_norm, S.eps, red);
          else
            norm_rows(xs, H, x, xsd, m, H, Lw.in_norm, S.eps, red);
        });
    if constexpr (fuse) {
      // attention_o sums its O rows into xfix row 2, last read by layer l - 1's
      // MLP prelude, a barrier ago: zero it.
      if (blockIdx.x == gridDim.x - 1) {
        long long* att = a.buf.xfix + 2 * (size_t)xsd;
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
        long long* next = a.buf.xfix + (size_t)(l & 1) * xsd;
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
    matvec_gate_up<MT>(Lw.gate, Lw.up, I, H, xs, H, m, a.buf.act, a.buf.act_stride,
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
                v[q] = i < I ? __ldcg(a.buf.act + (size_t)t * a.buf.act_stride + i) : 0.f;
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
// its output is there rather than in a.buf.x.
__device__ void head(const Params& a, const StackD& S, int t, const uint16_t* W, int V, float* logits,
                     float* hidden_out, float* xs, float* red, Grid& g, const long long* fsrc = nullptr) {
  matvec<1>(
      W, V, S.H, xs, S.H, 1, [&](int r, int, float v) { logits[r] = v; },
      [&] {
        norm_rows(xs, S.H, a.buf.x + (size_t)t * a.buf.xstride, a.buf.xstride, 1, S.H, S.final_norm, S.eps, red, fsrc,
                  fsrc ? fix_copy_offset(a.buf.xstride) : 0);
        if (hidden_out && blockIdx.x == 0)
          for (int i = threadIdx.x; i < S.H; i += NT) hidden_out[i] = xs[i];
      });
  g.sync(PH_HEAD);
}

}  // namespace tb
