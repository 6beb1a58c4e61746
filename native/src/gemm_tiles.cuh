// The products of a prefill with many rows (an admission of many prompts, a
// long prompt): C = A W^T over 128 x 128 tiles (rows x weight rows), each
// CTA running the whole of K through a cp.async pipeline.
//
// gemm_staged (prefill_tc.cuh) is made for the decode step's few rows: a CTA
// holds 64 rows, its weights go straight into registers, and each A
// fragment it stages in shared memory feeds two 8-column tiles. At thousands
// of rows that leaves it bound by shared memory and latency (at 2560 rows its
// products ran at 140-190 TFLOPS of bf16 MMAs on an H100, of ~990). Here a
// warp's 64 rows of A feed 8 weight tiles, and a weight tile is read once per
// 128 rows.
//
// The arithmetic is gemm_staged's: A in fp32 split into two bf16 terms (about
// 16 significant bits), W in bf16, fp32 accumulation, the same fragment order
// (lane (g, t) holds k 8t..8t+7 of its row), the norms and epilogues of
// put_output (a row's sum of squares in float, in one fixed order). A row's
// sums run in one fixed order (k ascending, one warp), so its result does not
// depend on the other rows or on scheduling; it differs from gemm_staged's by
// the summation order (2.5e-6 to 9.7e-6 of the largest output on the 0.6B's
// shapes, tools/gpu/micro/prefill_gemm.cu).
#pragma once
#include <cstdint>

#include "cp_async.cuh"
#include "dep_launch.cuh"
#include "prefill_tc.cuh"

namespace tb {
namespace pf {

constexpr int TBM = 128;  // rows a CTA
constexpr int TBN = 128;  // weight rows a CTA (EPI_SILU: 64 gate and 64 up, for 64 output columns)
constexpr int TBK = 32;   // K columns a stage
constexpr int TILE_WN = 8;  // 8-column weight tiles a warp: its 64 rows' A fragments feed all 8
constexpr int TILE_THREADS = 128;  // 2 x 2 warps of 64 rows x 64 weight rows
// cp.async stages in flight: 3 took a layer's products at 2560 rows to 736
// us, 4 to 773 (H100, 0.6B shapes).
constexpr int TILE_STAGES = 3;
constexpr int TILE_AROW = TBK + 4;  // floats a staged A row takes (padded: conflict-free fragment reads)
// Dynamic shared memory of a CTA: per stage, A's fp32 rows and the weights' bf16 rows.
constexpr int TILE_STAGE_BYTES = TBM * TILE_AROW * 4 + TBN * TBK * 2;
constexpr int TILE_SMEM = TILE_STAGES * TILE_STAGE_BYTES;

__host__ __device__ constexpr int tile_out_cols(int EPI) { return EPI == EPI_SILU ? TBN / 2 : TBN; }

// A and W arrive by cp.async, TILE_STAGES stages ahead; A stays fp32 in
// shared memory and each warp splits its fragments into bf16 terms as it
// reads them (32 bytes a row either way, and no staging pass through
// registers). A warp owns 64 rows x 8 weight tiles of 8 (EPI_SILU: 4 gate
// tiles and the 4 up tiles of the same 32 columns).
template <int EPI, bool NORM>
__global__ void __launch_bounds__(TILE_THREADS, 2) gemm_tiles(const GemmArgs g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int WN = TILE_WN, NT = TILE_THREADS, HW = WN / 2, ST = TILE_STAGES;
  extern __shared__ uint4 tile_smem[];
  // Stage s: A rows [TBM][TILE_AROW] floats, then W rows [TBN][4] uint4 (k 8t..8t+7 in uint4 t).
  const auto sa = [&](int s) { return reinterpret_cast<float*>(reinterpret_cast<char*>(tile_smem) + s * TILE_STAGE_BYTES); };
  const auto sw = [&](int s) {
    return reinterpret_cast<uint4*>(reinterpret_cast<char*>(tile_smem) + s * TILE_STAGE_BYTES + TBM * TILE_AROW * 4);
  };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int wm = warp >> 1, wn = warp & 1;
  const int m0 = blockIdx.y * TBM, oc0 = blockIdx.x * tile_out_cols(EPI);

  // Copies of a stage, 16 bytes each: A chunk q = tid + NT i is row q / 8,
  // floats 4 (q % 8); W chunk q is weight row q / 4, bf16s 8 (q % 4).
  constexpr int ACOPIES = TBM * TBK / 4 / NT, WCOPIES = TBN * TBK / 8 / NT;
  const float* asrc[ACOPIES];
  bool aok[ACOPIES];
#pragma unroll
  for (int i = 0; i < ACOPIES; i++) {
    const int q = threadIdx.x + NT * i, r = q >> 3;
    aok[i] = m0 + r < g.M;
    asrc[i] = g.A + (size_t)(aok[i] ? m0 + r : 0) * g.lda + 4 * (q & 7);
  }
  const uint16_t* wsrc[WCOPIES];
  bool wok[WCOPIES];
#pragma unroll
  for (int i = 0; i < WCOPIES; i++) {
    const int r = (threadIdx.x + NT * i) >> 2;
    const bool up = EPI == EPI_SILU && r >= TBN / 2;
    const int col = oc0 + (up ? r - TBN / 2 : r);
    wok[i] = col < g.N;
    wsrc[i] = (up ? g.W2 : g.W) + (size_t)(wok[i] ? col : 0) * g.K + 8 * (threadIdx.x & 3);
  }
  const int nk = g.K / TBK;
  const auto copy_stage = [&](int kt) {
    if (kt < nk) {
      const int kb = kt * TBK, s = kt % ST;
      float* a = sa(s);
      uint4* w = sw(s);
#pragma unroll
      for (int i = 0; i < ACOPIES; i++) {
        const int q = threadIdx.x + NT * i;
        cp_async16(a + (q >> 3) * TILE_AROW + 4 * (q & 7), asrc[i] + kb, aok[i]);
      }
#pragma unroll
      for (int i = 0; i < WCOPIES; i++) cp_async16(w + threadIdx.x + NT * i, wsrc[i] + kb, wok[i]);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");  // empty past the end: the group count stays regular
  };
  // This warp's weight rows of a stage, tile j.
  int wrow[WN];
#pragma unroll
  for (int j = 0; j < WN; j++)
    wrow[j] = EPI == EPI_SILU ? (j / HW) * (TBN / 2) + 8 * HW * wn + 8 * (j % HW) + gq : 8 * WN * wn + 8 * j + gq;

  float acc[4][WN][4] = {};
  float ss[4][2] = {};  // NORM (warps wn = 0): this lane's part of its rows' sums of squares
  dep_start();
#pragma unroll
  for (int s = 0; s < ST - 1; s++) copy_stage(s);
  for (int kt = 0; kt < nk; kt++) {
    asm volatile("cp.async.wait_group %0;" ::"n"(ST - 2) : "memory");
    // Stage kt is in, and every warp is past its reads of stage kt - 1,
    // whose buffer the next copy takes.
    __syncthreads();
    copy_stage(kt + ST - 1);
    const int s = kt % ST;
    const float* a = sa(s);
    const uint4* w = sw(s);
    float nw[8];
    if constexpr (NORM) {
      const uint4 n8 = __ldg(reinterpret_cast<const uint4*>(g.norm + kt * TBK + 8 * tq));
      const uint32_t np[4] = {n8.x, n8.y, n8.z, n8.w};
#pragma unroll
      for (int i = 0; i < 4; i++) {
        nw[2 * i] = bflo(np[i]);
        nw[2 * i + 1] = bfhi(np[i]);
      }
    }
    uint4 b[WN];
#pragma unroll
    for (int j = 0; j < WN; j++) b[j] = w[wrow[j] * 4 + tq];
#pragma unroll
    for (int mt = 0; mt < 4; mt++) {
      uint4 hi[2], lo[2];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float* ar = a + (64 * wm + 16 * mt + gq + 8 * h) * TILE_AROW + 8 * tq;
        const float4 x0 = *reinterpret_cast<const float4*>(ar), x1 = *reinterpret_cast<const float4*>(ar + 4);
        float v[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        if constexpr (NORM) {
          if (wn == 0) {
#pragma unroll
            for (int i = 0; i < 8; i++) ss[mt][h] = fmaf(v[i], v[i], ss[mt][h]);
          }
#pragma unroll
          for (int i = 0; i < 8; i++) v[i] *= nw[i];
        }
        split_bf16x2(v[0], v[1], hi[h].x, lo[h].x);
        split_bf16x2(v[2], v[3], hi[h].y, lo[h].y);
        split_bf16x2(v[4], v[5], hi[h].z, lo[h].z);
        split_bf16x2(v[6], v[7], hi[h].w, lo[h].w);
      }
#pragma unroll
      for (int j = 0; j < WN; j++) {
        mma_bf16(acc[mt][j], hi[0].x, hi[1].x, hi[0].y, hi[1].y, b[j].x, b[j].y);
        mma_bf16(acc[mt][j], lo[0].x, lo[1].x, lo[0].y, lo[1].y, b[j].x, b[j].y);
        mma_bf16(acc[mt][j], hi[0].z, hi[1].z, hi[0].w, hi[1].w, b[j].z, b[j].w);
        mma_bf16(acc[mt][j], lo[0].z, lo[1].z, lo[0].w, lo[1].w, b[j].z, b[j].w);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  float* scale = reinterpret_cast<float*>(tile_smem);  // NORM: the rows' 1 / rms
  if constexpr (NORM) {
    __syncthreads();  // every warp is past its last fragment reads
    if (wn == 0) {
#pragma unroll
      for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          float t = ss[mt][h];
          t += __shfl_xor_sync(0xffffffffu, t, 1);
          t += __shfl_xor_sync(0xffffffffu, t, 2);
          if (tq == 0) scale[64 * wm + 16 * mt + gq + 8 * h] = rms_scale(t, g.K, g.eps);
        }
    }
    __syncthreads();
  }
  // Output e of tile (mt, j): row 16 mt + gq + 8 (e / 2), column 2 tq + e % 2 of the tile's 8.
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int rl = 64 * wm + 16 * mt + gq + 8 * (e >> 1), row = m0 + rl;
      if (row >= g.M) continue;
      const float sc = NORM ? scale[rl] : 1.f;
      float* crow = g.C + (size_t)row * g.ldc;
#pragma unroll
      for (int j = 0; j < (EPI == EPI_SILU ? HW : WN); j++) {
        const int c = oc0 + (EPI == EPI_SILU ? 8 * HW : 8 * WN) * wn + 8 * j + 2 * tq + (e & 1);
        if (c < g.N)
          put_output<EPI>(crow + c, acc[mt][j][e] * sc,
                          EPI == EPI_SILU ? acc[mt][j + HW][e] * sc : epi_bias(EPI) ? bf(g.bias[c]) : 0.f);
      }
    }
#endif
}

// Launches gemm_tiles over g (K a multiple of TBK, lda of 4).
template <int EPI, bool NORM>
cudaError_t tiles_launch(cudaStream_t st, const GemmArgs& g, bool dependent) {
  // Per launch: the attribute belongs to the current device.
  cudaError_t err = cudaFuncSetAttribute(gemm_tiles<EPI, NORM>, cudaFuncAttributeMaxDynamicSharedMemorySize, TILE_SMEM);
  if (err != cudaSuccess) return err;
  const dim3 grid((g.N + tile_out_cols(EPI) - 1) / tile_out_cols(EPI), (g.M + TBM - 1) / TBM);
  return launch_ex(dependent, 1, gemm_tiles<EPI, NORM>, grid, TILE_THREADS, TILE_SMEM, st, g);
}

}  // namespace pf
}  // namespace tb
