// The batched step's persistent kernel: batch_host.cuh records a step's
// launches as ops (what each launch would run, its grid and arguments), and
// run_ops runs a list of them in one cooperative launch, dealing each op's
// blocks over its CTAs and crossing a grid barrier between ops, the way the
// decode kernel runs its phases. A frame is then one launch a stack step and
// its sampling launch (16 pairs) instead of ~565 launches: a one-stream step
// 4.3 -> 4.0 ms (H200, 0.6B), and 3.6 with the products' loads issued four K
// steps at a time (gemm_round), which changed nothing as launches.
//
// Each op runs the same block function its kernel runs (gemm_block,
// rope_attend_block, ...), so a block computes exactly what the launch's
// block at that index computes, in the same order.
#pragma once
#include "batch.cuh"

namespace tb {
namespace bt {

enum OpKind { OP_GEMM, OP_ROPE_ATTEND, OP_TALKER_INPUT, OP_PREDICTOR_INPUT, OP_ADD_BIAS, OP_RMS_ROWS, OP_SCATTER_ROWS };

// One recorded launch. Only the fields of its kind are set.
struct Op {
  int kind;
  uint3 grid;
  // OP_GEMM: pf::gemm<mt, nt8, epi, norm, split> with g.
  int mt, nt8, epi, norm, split;
  pf::GemmArgs g;
  // OP_ROPE_ATTEND: on the talker's stack (talker) or the predictor's.
  int talker;
  RopeAttendArgs ra;
  // The row kernels (talker_input, predictor_input, add_bias, rms_rows, scatter_rows).
  const int32_t* rows;
  const float* src;
  float* dst;
  const uint16_t* w;
  int H, j, n, ld_src, ld_dst;
  float eps;
};

struct RunArgs {
  Slots s;
  WeightsD w;
  const Op* ops;
  int n;              // ops
  unsigned* bar;      // this launch's grid-barrier counter (zero at its start)
  unsigned* reset;    // counters to zero for later launches: reset[0..nreset)
  int nreset;
};

// Shared memory the row ops need (rope_attend's; rms_rows takes PW floats),
// and run_ops: the largest block function's.
constexpr size_t RUN_ROWS_SMEM = sizeof(float[AW][HD + 2]);
constexpr size_t RUN_SMEM =
    sizeof(pf::GemmSmem<4, 2, true>) > RUN_ROWS_SMEM ? sizeof(pf::GemmSmem<4, 2, true>) : RUN_ROWS_SMEM;
static_assert(sizeof(pf::GemmSmem<2, 4, true>) <= RUN_SMEM && sizeof(pf::GemmSmem<1, 4, true>) <= RUN_SMEM,
              "run_ops' shared memory holds every gemm tile");

template <int MT, int NT8, int EPI, bool NORM>
__device__ __forceinline__ void run_gemm_split(const Op& op, uint3 bi, uint3 nb, unsigned char* smem) {
  auto& sm = *reinterpret_cast<pf::GemmSmem<MT, NT8, NORM>*>(smem);
  if constexpr (pf::split_k_rows(MT)) {
    if (op.split) {
      pf::gemm_block<MT, NT8, EPI, NORM, true>(op.g, bi, nb, sm);
      return;
    }
  }
  pf::gemm_block<MT, NT8, EPI, NORM, false>(op.g, bi, nb, sm);
}

template <int MT, int EPI, bool NORM>
__device__ __forceinline__ void run_gemm_cols(const Op& op, uint3 bi, uint3 nb, unsigned char* smem) {
  if (op.nt8 == pf::wide_tiles(MT)) run_gemm_split<MT, pf::wide_tiles(MT), EPI, NORM>(op, bi, nb, smem);
  else run_gemm_split<MT, pf::narrow_tiles(EPI), EPI, NORM>(op, bi, nb, smem);
}

template <int MT>
__device__ __forceinline__ void run_gemm_epi(const Op& op, uint3 bi, uint3 nb, unsigned char* smem) {
  switch (op.epi * 2 + op.norm) {
    case pf::EPI_STORE * 2: run_gemm_cols<MT, pf::EPI_STORE, false>(op, bi, nb, smem); break;
    case pf::EPI_STORE * 2 + 1: run_gemm_cols<MT, pf::EPI_STORE, true>(op, bi, nb, smem); break;
    case pf::EPI_ADD * 2: run_gemm_cols<MT, pf::EPI_ADD, false>(op, bi, nb, smem); break;
    case pf::EPI_ADD * 2 + 1: run_gemm_cols<MT, pf::EPI_ADD, true>(op, bi, nb, smem); break;
    case pf::EPI_SILU * 2: run_gemm_cols<MT, pf::EPI_SILU, false>(op, bi, nb, smem); break;
    default: run_gemm_cols<MT, pf::EPI_SILU, true>(op, bi, nb, smem);
  }
}

// A row op (any op but OP_GEMM) of kind KIND: block bi of nb. smem:
// RUN_ROWS_SMEM bytes.
template <int KIND>
__device__ __forceinline__ void run_row_op(const Slots& s, const WeightsD& w, const Op& op, uint3 bi, uint3 nb,
                                           unsigned char* smem) {
  if constexpr (KIND == OP_ROPE_ATTEND) {
    // Each stack by name: a StackD chosen at run time was copied to local
    // memory (ptxas: an 8-byte stack frame).
    float(*sm)[HD + 2] = reinterpret_cast<float(*)[HD + 2]>(smem);
    if (op.talker) rope_attend_block(s, w.tk, op.ra, bi.x, sm);
    else rope_attend_block(s, w.cp, op.ra, bi.x, sm);
  }
  else if constexpr (KIND == OP_TALKER_INPUT)
    talker_input_block(s, op.rows, w, op.H, op.dst, bi.x);
  else if constexpr (KIND == OP_PREDICTOR_INPUT)
    predictor_input_block(s, op.rows, w, op.H, op.j, op.dst, bi.x);
  else if constexpr (KIND == OP_ADD_BIAS)
    add_bias_block(op.dst, op.n, op.H, op.w, bi.x, nb.x);
  else if constexpr (KIND == OP_RMS_ROWS)
    pf::rms_rows_block(op.src, op.ld_src, op.H, op.w, op.eps, op.dst, op.ld_dst, bi.x, reinterpret_cast<float*>(smem));
  else
    scatter_rows_block(op.src, op.H, op.rows, op.dst, bi.x);
}

// A row op as a launch of its own (the step's launch path, batch_host.cuh):
// one kernel a kind, so each has its own registers.
template <int KIND>
__global__ void __launch_bounds__(pf::PT) rows_kernel(const __grid_constant__ Slots s, const __grid_constant__ WeightsD w,
                                                     const __grid_constant__ Op op) {
  __shared__ __align__(16) unsigned char smem[RUN_ROWS_SMEM];
  run_row_op<KIND>(s, w, op, blockIdx, gridDim, smem);
}

__device__ __forceinline__ void run_block(const RunArgs& a, const Op& op, uint3 bi, uint3 nb, unsigned char* smem) {
  switch (op.kind) {
    case OP_GEMM:
      if (op.mt == 1) run_gemm_epi<1>(op, bi, nb, smem);
      else if (op.mt == 2) run_gemm_epi<2>(op, bi, nb, smem);
      else run_gemm_epi<4>(op, bi, nb, smem);
      break;
    case OP_ROPE_ATTEND: run_row_op<OP_ROPE_ATTEND>(a.s, a.w, op, bi, nb, smem); break;
    case OP_TALKER_INPUT: run_row_op<OP_TALKER_INPUT>(a.s, a.w, op, bi, nb, smem); break;
    case OP_PREDICTOR_INPUT: run_row_op<OP_PREDICTOR_INPUT>(a.s, a.w, op, bi, nb, smem); break;
    case OP_ADD_BIAS: run_row_op<OP_ADD_BIAS>(a.s, a.w, op, bi, nb, smem); break;
    case OP_RMS_ROWS: run_row_op<OP_RMS_ROWS>(a.s, a.w, op, bi, nb, smem); break;
    default: run_row_op<OP_SCATTER_ROWS>(a.s, a.w, op, bi, nb, smem);
  }
}

// Runs ops[0..n) in order. One CTA an SM (cooperative launch: every CTA is
// resident, which the grid barrier needs); a CTA takes blocks blockIdx.x,
// blockIdx.x + gridDim.x, ... of each op.
__global__ void __launch_bounds__(pf::PT, 1) run_ops(const __grid_constant__ RunArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  // The counters named here were last used by launches that have ended
  // (stream order), and are next used by later ones.
  if (blockIdx.x == 0 && threadIdx.x < a.nreset) a.reset[threadIdx.x] = 0;
  Grid g{a.bar, 0, 0, nullptr, 0};
  for (int i = 0; i < a.n; i++) {
    const Op& op = a.ops[i];
    const uint3 nb = op.grid;
    const int total = nb.x * nb.y * nb.z;
    for (int vb = blockIdx.x; vb < total; vb += gridDim.x) {
      run_block(a, op, make_uint3(vb % nb.x, vb / nb.x % nb.y, vb / (nb.x * nb.y)), nb, smem);
      __syncthreads();  // the next block reuses the shared memory
    }
    if (i + 1 < a.n) g.sync();
  }
}

}  // namespace bt
}  // namespace tb
