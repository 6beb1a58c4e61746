// The persistent decode kernel: one cooperative launch runs a whole talker
// step, a code-predictor step, a whole frame (15 predictor steps + the next
// talker step) or one prefill chunk. Phases are separated by a grid barrier;
// every CTA samples redundantly from the same logits, so no broadcast is needed.
//
// Its parts live in decode/, one file per layer of the design, each building
// on the ones before it; this file includes them all, in that order, so the
// kernel stays one compilation unit (engine.cu) and inlines across parts:
//   params.cuh        sizes, modes, Params (weights, buffers, launch arguments, debug)
//   common.cuh        bf16 and fixed-point helpers, 16-byte loads, warp reductions
//   grid_barrier.cuh  the grid barrier between phases, profiling marks
//   matvec.cuh        warp-per-row matrix-vector products
//   norms.cuh         RMSNorm preludes, q/k norm + RoPE, the RoPE table
//   attention.cuh     attention over the KV cache (chunked, and fused with O)
//   mlp.cuh           the MLP (gate/up/down in one phase for one-token steps)
//   stack.cuh         a transformer stack over its layers, final norm + head
//   sampler.cuh       penalty, suppression, top-k/top-p, the counter-based draw
//   steps.cuh         talker step, code-predictor step, prefill passes
//   kernels.cuh       prefill_kernel, decode_kernel<FUSE>, sample_kernel
#pragma once
#include "decode/params.cuh"
#include "decode/common.cuh"
#include "decode/grid_barrier.cuh"
#include "decode/matvec.cuh"
#include "decode/norms.cuh"
#include "decode/attention.cuh"
#include "decode/mlp.cuh"
#include "decode/stack.cuh"
#include "decode/sampler.cuh"
#include "decode/steps.cuh"
#include "decode/kernels.cuh"
