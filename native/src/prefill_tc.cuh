// Tensor-core prefill: the talker runs over all prompt rows at once, layer by
// layer, as ordinary launches (norm + QKV, q/k norm + RoPE + cache, attention,
// O, norm + gate/up, down). Every weight is read once per prompt, not once per
// pass of a few rows as in the cooperative kernel's matvecs (which cost ~0.9
// ms + ~0.18 ms a row per 8-row pass on an H100).
//
// Accuracy: the matmuls run on mma.sync bf16 with fp32 accumulation. The
// activations are fp32; each is split into two bf16 terms (x = hi + lo, about
// 16 significant bits), so the products are as exact as the fp32 matvecs of
// the decode kernel, and the weights are bf16 anyway.
#pragma once
#include <cooperative_groups.h>
#include <cstdint>

#include "dep_launch.cuh"
#include "kernel.cuh"

namespace tb {
namespace pf {

constexpr int PT = 256;      // threads per CTA
constexpr int PW = PT / 32;  // warps per CTA: the split of K inside a GEMM CTA
constexpr int KSTEP = 32;    // K columns one warp covers per step (two k16 mma steps)

// Two floats as a bf16 pair, the first in the low half (the lower k index in an mma fragment).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo_k, float hi_k) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi_k), "f"(lo_k));
  return d;
}

// a, b ~= hi + lo with hi, lo bf16 pairs.
__device__ __forceinline__ void split_bf16x2(float a, float b, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2(a, b);
  lo = pack_bf16x2(a - bflo(hi), b - bfhi(hi));
}

// D += A(16x16, row) * B(16x8, col), bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// EPI_BIAS and EPI_BIAS_SILU: a Linear with a bias (GemmArgs::bias), and
// SiLU after it (the text projection).
enum Epi { EPI_STORE, EPI_ADD, EPI_SILU, EPI_BIAS, EPI_BIAS_SILU };

__host__ __device__ constexpr bool epi_bias(int EPI) { return EPI == EPI_BIAS || EPI == EPI_BIAS_SILU; }

// The epilogue of an output c of a product: v (EPI_SILU: v of the gate, u of
// the up rows; EPI_BIAS*: u is the column's bias), already scaled by the
// row's RMSNorm factor where NORM.
template <int EPI>
__device__ __forceinline__ void put_output(float* c, float v, float u) {
  if constexpr (EPI == EPI_SILU) {
    *c = v / (1.f + expf(-v)) * u;
  } else if constexpr (EPI == EPI_BIAS) {
    *c = v + u;
  } else if constexpr (EPI == EPI_BIAS_SILU) {
    const float b = v + u;
    *c = b / (1.f + expf(-b));
  } else if constexpr (EPI == EPI_ADD) {
    *c += v;
  } else {
    *c = v;
  }
}

// The RMSNorm factor of a row whose K values' squares sum to sumsq.
__device__ __forceinline__ float rms_scale(float sumsq, int K, float eps) { return rsqrtf(sumsq / (float)K + eps); }

struct GemmArgs {
  const uint16_t* W;   // [N][K] bf16 (EPI_SILU: the gate rows)
  const uint16_t* W2;  // EPI_SILU: the up rows, [N][K]
  int N, K;
  const float* A;  // activations [M][lda]
  int lda, M;
  float* C;  // output [M][ldc]
  int ldc;
  // NORM: A's rows are RMSNorm'd (weights norm [K], epsilon eps) on the way in.
  const uint16_t* norm;
  float eps;
  // Split K (gemm's SPLIT, gridDim.z slices): slice z covers K columns
  // [z kc, (z + 1) kc); each CTA leaves its tile's partial sums in ws and
  // the last of a tile's slices to finish (tickets[tile], zero between
  // launches) adds them in slice order and runs the epilogue.
  int kc;
  float* ws;
  unsigned* tickets;
  const uint16_t* bias;  // EPI_BIAS*: [N] bf16 (gemm_staged, gemm_tiles)
};

// The floats a split-K slice of one CTA leaves in GemmArgs::ws: its tile's
// partial products, then (NORM) its rows' sums of squares.
__host__ __device__ constexpr int split_partials(int MT, int NT8, bool NORM) {
  return MT * NT8 * 4 * 32 + (NORM ? 16 * MT : 0);
}

// C = A W^T (EPI_STORE), C += A W^T (EPI_ADD, the residual) or
// C = SiLU(A Wg^T) * (A Wu^T) (EPI_SILU). A CTA owns 8*NT8 output columns (EPI_SILU: 4*NT8 columns of
// gate and the same of up) and 16*MT rows; its PW warps split K and their partial tiles are summed in a
// fixed order in shared memory, so results do not depend on scheduling.
//
// Fragments: an mma's k order is free as long as A and B agree, so lane (g, t) loads 8 consecutive k of
// a row (16 bytes of W, 32 of A) and uses k 8t..8t+3 for the first k16 step and 8t+4..8t+7 for the
// second, instead of the canonical 2t, 2t+1, 2t+8, 2t+9: one vector load per row instead of four.
//
// NORM: C is computed for RMSNorm(A) * norm instead of A (the batched decode:
// one launch instead of two): the products use A * norm, each CTA sums its
// rows' squares over K on the way, and the epilogue scales each row by its
// 1 / rms.
//
// Split K (the batched decode's narrow products, whose column tiles alone
// would leave most SMs idle or, at 8 columns a CTA, read every activation
// row 128 times over): see GemmArgs. The sums keep a fixed order (warps,
// then slices), so results still do not depend on scheduling.
template <int MT, int NT8, int EPI, bool NORM = false, bool SPLIT = false>
__global__ void __launch_bounds__(PT) gemm(const GemmArgs g) {
  static_assert(MT * NT8 <= 8, "partial tiles must fit the shared reduction buffer");
  __shared__ float red[PW][MT * NT8 * 4][32];
  __shared__ float rss[NORM ? PW : 1][16 * MT];  // NORM: each warp's sums of squares by row
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  constexpr int P = EPI == EPI_SILU ? NT8 / 2 : NT8;  // output column tiles
  const int n0 = blockIdx.x * 8 * P;
  const int m0 = blockIdx.y * 16 * MT;
  // Warp w takes the 32-column K steps w, w + PW, ...: K need only be a
  // multiple of KSTEP (checked by the host), and a CTA's warps read
  // neighbouring 64-byte pieces of each weight row at once.
  const int kw = 8 * tq;
  const uint4* wp[NT8];
#pragma unroll
  for (int j = 0; j < NT8; j++) {
    const uint16_t* base = (EPI == EPI_SILU && j >= P) ? g.W2 : g.W;
    wp[j] = reinterpret_cast<const uint4*>(base + (size_t)(n0 + 8 * (j % P) + gq) * g.K + kw);
  }
  const float* ap[MT][2];
  bool ok[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = m0 + 16 * mt + gq + 8 * h;
      ok[mt][h] = r < g.M;
      ap[mt][h] = g.A + (size_t)(ok[mt][h] ? r : 0) * g.lda + kw;
    }
  float acc[MT][NT8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int j = 0; j < NT8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[mt][j][e] = 0.f;
  float ss[MT][2] = {};  // NORM: this lane's sums of squares of rows g and g + 8

  const int kz = SPLIT ? blockIdx.z * g.kc : 0, kend = SPLIT ? min(g.K, kz + g.kc) : g.K;
#pragma unroll 2
  for (int k = kz + warp * KSTEP; k < kend; k += PW * KSTEP) {
    // K a multiple of 8 but not of KSTEP (the batched decode's tiny test
    // shapes): the lanes past K load zeros.
    const bool kin = k + kw < g.K;
    uint4 w[NT8];
#pragma unroll
    for (int j = 0; j < NT8; j++) w[j] = kin ? ldw(wp[j] + k / 8) : make_uint4(0, 0, 0, 0);
    float4 av[MT][2][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int q = 0; q < 2; q++)
          av[mt][h][q] = ok[mt][h] && kin ? __ldcg(reinterpret_cast<const float4*>(ap[mt][h] + k) + q)
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
    if constexpr (NORM) {
      const uint4 nw = kin ? __ldg(reinterpret_cast<const uint4*>(g.norm + k + kw)) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          float4& a0 = av[mt][h][0];
          float4& a1 = av[mt][h][1];
          ss[mt][h] += a0.x * a0.x + a0.y * a0.y + a0.z * a0.z + a0.w * a0.w + a1.x * a1.x + a1.y * a1.y +
                       a1.z * a1.z + a1.w * a1.w;
          a0 = make_float4(a0.x * bflo(nw.x), a0.y * bfhi(nw.x), a0.z * bflo(nw.y), a0.w * bfhi(nw.y));
          a1 = make_float4(a1.x * bflo(nw.z), a1.y * bfhi(nw.z), a1.z * bflo(nw.w), a1.w * bfhi(nw.w));
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      uint32_t hi[2][4], lo[2][4];  // [row g / g+8][k pair 0..3]
#pragma unroll
      for (int h = 0; h < 2; h++) {
        split_bf16x2(av[mt][h][0].x, av[mt][h][0].y, hi[h][0], lo[h][0]);
        split_bf16x2(av[mt][h][0].z, av[mt][h][0].w, hi[h][1], lo[h][1]);
        split_bf16x2(av[mt][h][1].x, av[mt][h][1].y, hi[h][2], lo[h][2]);
        split_bf16x2(av[mt][h][1].z, av[mt][h][1].w, hi[h][3], lo[h][3]);
      }
#pragma unroll
      for (int s = 0; s < 2; s++) {
#pragma unroll
        for (int j = 0; j < NT8; j++) {
          const uint32_t b0 = s ? w[j].z : w[j].x, b1 = s ? w[j].w : w[j].y;
          mma_bf16(acc[mt][j], hi[0][2 * s], hi[1][2 * s], hi[0][2 * s + 1], hi[1][2 * s + 1], b0, b1);
          mma_bf16(acc[mt][j], lo[0][2 * s], lo[1][2 * s], lo[0][2 * s + 1], lo[1][2 * s + 1], b0, b1);
        }
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int j = 0; j < NT8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) red[warp][(mt * NT8 + j) * 4 + e][lane] = acc[mt][j][e];
  if constexpr (NORM) {
    // The quad's four lanes hold one row's k columns 8t..8t+7 of each step.
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float v = ss[mt][h];
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        if (tq == 0) rss[warp][16 * mt + gq + 8 * h] = v;
      }
  }
  __syncthreads();
  int nw = PW;  // the partial tiles in red (and rss) to sum
  if constexpr (SPLIT) {
    // This slice's tile, warps summed, to ws; the last slice to finish sums
    // every slice's into red[0] (rss[0]) for the epilogue.
    constexpr int NP = MT * NT8 * 4 * 32, NR = NORM ? 16 * MT : 0;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    const size_t tiles = (size_t)gridDim.x * gridDim.y;
    float* mine = g.ws + ((size_t)blockIdx.z * tiles + tile) * split_partials(MT, NT8, NORM);
    for (int i = threadIdx.x; i < NP + NR; i += PT) {
      float v = 0.f;
      if (i < NP) {
#pragma unroll
        for (int w = 0; w < PW; w++) v += red[w][i >> 5][i & 31];
      } else {
#pragma unroll
        for (int w = 0; w < PW; w++) v += rss[NORM ? w : 0][i - NP];
      }
      mine[i] = v;
    }
    __shared__ bool last;
    __threadfence();  // the partials reach L2 before the ticket counts them
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(g.tickets + tile, 1u) == gridDim.z - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = threadIdx.x; i < NP + NR; i += PT) {
      float v = 0.f;
      for (int z = 0; z < (int)gridDim.z; z++)
        v += __ldcg(g.ws + ((size_t)z * tiles + tile) * split_partials(MT, NT8, NORM) + i);
      if (i < NP)
        red[0][i >> 5][i & 31] = v;
      else
        rss[0][i - NP] = v;
    }
    if (threadIdx.x == 0) g.tickets[tile] = 0;  // ready for the next launch (stream order)
    __syncthreads();
    nw = 1;
  }
  // Accumulator e of lane l in tile (mt, j): row 16mt + l/4 + 8(e/2), column 8j + 2(l%4) + e%2.
  for (int i = threadIdx.x; i < MT * P * 4 * 32; i += PT) {
    const int l = i & 31, e = (i >> 5) & 3, j = (i >> 7) % P, mt = (i >> 7) / P;
    const int row = m0 + 16 * mt + (l >> 2) + 8 * (e >> 1);
    if (row >= g.M) continue;
    const int col = n0 + 8 * j + 2 * (l & 3) + (e & 1);
    float v = 0.f, scale = 1.f;
#pragma unroll
    for (int w = 0; w < PW; w++)
      if (!SPLIT || w < nw) v += red[w][(mt * NT8 + j) * 4 + e][l];
    if constexpr (NORM) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < PW; w++)
        if (!SPLIT || w < nw) t += rss[w][row - m0];
      scale = rms_scale(t, g.K, g.eps);
      v *= scale;
    }
    float u = 0.f;
    if constexpr (EPI == EPI_SILU) {
#pragma unroll
      for (int w = 0; w < PW; w++)
        if (!SPLIT || w < nw) u += red[w][(mt * NT8 + j + P) * 4 + e][l];
      u *= scale;
    }
    put_output<EPI>(g.C + (size_t)row * g.ldc + col, v, u);
  }
}

// The products of the batched decode and of the prefills on Hopper
// (gemm_staged; pf::gemm elsewhere). pf::gemm's warps split K and each CTA
// owns 8-32 columns, so every CTA reads all of A and splits it into bf16 terms
// itself, at 64 rows its accumulators take it to 141-198 registers (one CTA an
// SM), and its narrow products split K through global partials, a fence and a
// ticket. Here a CTA owns 64 output columns and its 8 warps share A: the CTA
// stages A's rows once per pass of SKP K columns, split into bf16 hi and lo
// terms in shared memory, and each warp multiplies them by its columns'
// weights (below: two 8-column tiles a warp). K is split over the CTAs
// of a thread-block cluster (gridDim.z = the cluster's size): each leaves its
// partial tile in its shared memory and, after a cluster barrier, reduces a
// share of the tile's outputs from every rank's, in rank order. A row's sums
// do not depend on the other rows, the row count or scheduling, so a stream
// gets the same bits in a batch of any size.
constexpr int SKP = 128;        // K columns staged per pass
constexpr int MAX_CLUSTER = 8;  // the portable cluster size

template <int MT, int EPI, bool NORM, bool SPLIT>
__global__ void __launch_bounds__(PT, 2) gemm_staged(const GemmArgs g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int R = 16 * MT;  // rows a CTA
  constexpr int KG = SKP / 32;  // 32-column K groups a pass
  // A warp multiplies each A fragment it reads by two 8-column weight tiles:
  // the gate's and the up's of its 8 columns (EPI_SILU), or those of its 16
  // columns over half of each pass's K groups (the other half is a partner
  // warp's, PW / 2 warps on, added before the epilogue). One tile a warp over
  // all of K read the staged A twice as often: the step at 64 streams 8.7 ->
  // 7.8 ms, at 16 4.6 -> 4.3 (0.6B, H100).
  constexpr int NJ = 2;
  constexpr int KH = EPI == EPI_SILU ? 1 : 2;  // warps that share a column tile's K
  constexpr int KGW = KG / KH;                 // K groups a warp takes of a pass
  constexpr int TPR = PT / R;                  // staging threads a row
  constexpr int QPT = SKP / 4 / TPR;           // float4s a staging thread loads a pass
  constexpr int NP = PW * MT * NJ * 4 * 32;    // a CTA's accumulators
  static_assert(PT % R == 0 && (SKP / 4) % TPR == 0 && TPR <= 32, "staging layout");
  // [hi, lo][K group][row][t]: lane t of a quad's four bf16 pairs, k 8t..8t+7
  // of the group (the fragment order of pf::gemm), so a warp's fragment reads
  // are 512 consecutive bytes. Afterwards the CTA's partial tiles.
  __shared__ uint4 sh[2][KG][R][4];
  static_assert(NP * sizeof(float) <= sizeof(sh), "partials fit the staging buffer");
  // NORM: the rows' sums of squares, in double so that the rounding of the
  // total does not depend on how many threads share a row (16 * MT rows): a
  // stream's results are the same in a batch of any size.
  __shared__ double rss[NORM ? R : 1];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int kh = warp / (PW / KH), cw = warp % (PW / KH);
  const int kg0 = kh * KGW;  // this warp's first K group of a pass
  // Tile j's first column: a 64-column CTA tile, 8 columns a warp (EPI_SILU)
  // or 16.
  int col[NJ];
  bool wact[NJ];
  const uint16_t* wrow[NJ];
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    col[j] = blockIdx.x * 8 * PW + (KH == 1 ? 8 * warp : 16 * cw + 8 * j);
    wact[j] = col[j] < g.N;
    wrow[j] = (KH == 1 && j ? g.W2 : g.W) + (size_t)(wact[j] ? col[j] + gq : 0) * g.K + 8 * tq;
  }
  const int m0 = blockIdx.y * R;
  const int kz = SPLIT ? blockIdx.z * g.kc : 0, kend = SPLIT ? min(g.K, kz + g.kc) : g.K;
  const int sr = threadIdx.x / TPR, sq = threadIdx.x % TPR;  // staging: row and first float4
  const bool srow = m0 + sr < g.M;
  const float* arow = g.A + (size_t)(srow ? m0 + sr : 0) * g.lda;
  double ss = 0.0;  // NORM: the staged row's sum of squares (this thread's part)
  float acc[MT][NJ][4] = {};

  // A pass's weights are loaded before its A is staged, so their DRAM round
  // trip overlaps the staging; the first pass's before dep_wait, and the
  // second pass's lines are asked into L2 there too (a warp's share of each
  // of its weight rows: two 128-byte lines a pass, lane t = 0, 1 of a quad,
  // for W and W2 at t = 0, 1 and 2, 3; one line at t = 0 and 1's tiles).
  // Every later pass into L2 at once made the 1.7B's steps at 16 and 64 rows
  // 2% slower (gate/up: its whole 50 MB for K split 2 ways); none, 5% slower
  // at 1 and 64 rows (0.6B, H100).
  uint4 w[NJ][KGW];
  const auto load_pass = [&](int kb) {
#pragma unroll
    for (int i = 0; i < KGW; i++)
#pragma unroll
      for (int j = 0; j < NJ; j++) {
        const int k = kb + 32 * (kg0 + i);
        w[j][i] = wact[j] && k + 8 * tq < kend ? ldw(reinterpret_cast<const uint4*>(wrow[j] + k))
                                               : make_uint4(0, 0, 0, 0);
      }
  };
  load_pass(kz);
  {
    const int j = KH == 1 ? tq >> 1 : tq;
    const int kb = kz + SKP + (KH == 1 ? 64 * (tq & 1) : 32 * kg0);
    if (j < NJ && wact[j] && kb < kend) asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow[j] - 8 * tq + kb));
  }
  dep_start();

  for (int kb = kz; kb < kend; kb += SKP) {
    if (kb != kz) {
      load_pass(kb);
      __syncthreads();  // every warp has read the last pass's A
    }
#pragma unroll
    for (int i = 0; i < QPT; i++) {
      const int q = sq + TPR * i, k = kb + 4 * q;
      float4 a = srow && k < kend ? __ldcg(reinterpret_cast<const float4*>(arow + k)) : make_float4(0.f, 0.f, 0.f, 0.f);
      if constexpr (NORM) {
        ss += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
        const uint2 nw = k < kend ? __ldg(reinterpret_cast<const uint2*>(g.norm + k)) : make_uint2(0, 0);
        a = make_float4(a.x * bflo(nw.x), a.y * bfhi(nw.x), a.z * bflo(nw.y), a.w * bfhi(nw.y));
      }
      uint32_t h0, l0, h1, l1;
      split_bf16x2(a.x, a.y, h0, l0);
      split_bf16x2(a.z, a.w, h1, l1);
      const int kg = q >> 3, t = (q >> 1) & 3, half = q & 1;
      reinterpret_cast<uint2*>(&sh[0][kg][sr][t])[half] = make_uint2(h0, h1);
      reinterpret_cast<uint2*>(&sh[1][kg][sr][t])[half] = make_uint2(l0, l1);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < KGW; i++) {
      const int kg = kg0 + i;
      if (kb + 32 * kg >= kend) break;
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        const int r = 16 * mt + gq;
        const uint4 h0 = sh[0][kg][r][tq], h1 = sh[0][kg][r + 8][tq];
        const uint4 l0 = sh[1][kg][r][tq], l1 = sh[1][kg][r + 8][tq];
#pragma unroll
        for (int j = 0; j < NJ; j++) {
          mma_bf16(acc[mt][j], h0.x, h1.x, h0.y, h1.y, w[j][i].x, w[j][i].y);
          mma_bf16(acc[mt][j], l0.x, l1.x, l0.y, l1.y, w[j][i].x, w[j][i].y);
          mma_bf16(acc[mt][j], h0.z, h1.z, h0.w, h1.w, w[j][i].z, w[j][i].w);
          mma_bf16(acc[mt][j], l0.z, l1.z, l0.w, l1.w, w[j][i].z, w[j][i].w);
        }
      }
    }
  }
  if constexpr (NORM) {
#pragma unroll
    for (int o = 1; o < TPR; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (sq == 0) rss[sr] = ss;
  }
  // Output e of a warp's tile (mt, j): row 16mt + gq + 8(e/2), column 2tq + e%2 of its 8.
  const auto store = [&](int row, int c, float v, float u, const double* sums) {
    if (row >= g.M || c >= g.N) return;
    const float scale = NORM ? rms_scale((float)sums[row - m0], g.K, g.eps) : 1.f;
    put_output<EPI>(g.C + (size_t)row * g.ldc + c, v * scale, epi_bias(EPI) ? bf(g.bias[c]) : u * scale);
  };
  if (SPLIT || KH > 1 || NORM) __syncthreads();  // every warp has read its last A fragments (and rss is in)
  // Partial tiles in shared memory, [warp][mt][j][e][lane].
  float* part = reinterpret_cast<float*>(sh);
  const auto at = [](int wp, int mt, int j, int e, int l) { return (((wp * MT + mt) * NJ + j) * 4 + e) * 32 + l; };
  const auto put_part = [&](int wp) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) part[at(wp, mt, j, e, lane)] = acc[mt][j][e];
  };
  if constexpr (KH > 1) {
    // The second K half's partial tiles added to the first's, in that order.
    if (kh) put_part(cw);
    __syncthreads();
    if (!kh) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[mt][j][e] += part[at(cw, mt, j, e, lane)];
      if (SPLIT) put_part(cw);  // each thread its own slots: no barrier between
    }
  } else if (SPLIT) {
    put_part(warp);
  }
  if constexpr (SPLIT) {
    namespace cg = cooperative_groups;
    const cg::cluster_group cl = cg::this_cluster();
    cl.sync();  // every rank's partials (and row sums) are in its shared memory
    const int ks = (int)cl.num_blocks(), rank = (int)cl.block_rank();
    // The ranks' values are loaded at once and then added in rank order: one
    // remote round trip instead of one a rank.
    __shared__ double tot[NORM ? R : 1];  // NORM: the rows' sums of squares over the whole of K
    if constexpr (NORM) {
      if (threadIdx.x < R) {
        double t[MAX_CLUSTER];
#pragma unroll
        for (int z = 0; z < MAX_CLUSTER; z++)
          if (z < ks) t[z] = cl.map_shared_rank(rss, z)[threadIdx.x];
        double sum = 0.0;
#pragma unroll
        for (int z = 0; z < MAX_CLUSTER; z++)
          if (z < ks) sum += t[z];
        tot[threadIdx.x] = sum;
      }
      __syncthreads();
    }
    // This rank's share of the tile's outputs: output (mt, e, lane) of the
    // 64 columns' 8-column group c8.
    constexpr int S = PW * MT * 4 * 32;
    const int per = (S + ks - 1) / ks;
    for (int s = rank * per + threadIdx.x; s < min(S, (rank + 1) * per); s += PT) {
      const int l = s & 31, e = (s >> 5) & 3, mt = (s >> 7) % MT, c8 = (s >> 7) / MT;
      const int gv = KH == 1 ? at(c8, mt, 0, e, l) : at(c8 >> 1, mt, c8 & 1, e, l);
      float xv[MAX_CLUSTER], xu[MAX_CLUSTER];
#pragma unroll
      for (int z = 0; z < MAX_CLUSTER; z++)
        if (z < ks) {
          const float* pz = cl.map_shared_rank(part, z);
          xv[z] = pz[gv];
          if constexpr (KH == 1) xu[z] = pz[gv + 4 * 32];  // j = 1: the up rows
        }
      float v = 0.f, u = 0.f;
#pragma unroll
      for (int z = 0; z < MAX_CLUSTER; z++)
        if (z < ks) {
          v += xv[z];
          if constexpr (KH == 1) u += xu[z];
        }
      store(m0 + 16 * mt + (l >> 2) + 8 * (e >> 1), blockIdx.x * 8 * PW + 8 * c8 + 2 * (l & 3) + (e & 1), v, u, tot);
    }
    cl.sync();  // no rank leaves while another reads its shared memory
  } else {
    if (kh) return;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int j = 0; j < (KH == 1 ? 1 : NJ); j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          store(m0 + 16 * mt + gq + 8 * (e >> 1), col[j] + 2 * tq + (e & 1), acc[mt][j][e],
                KH == 1 ? acc[mt][1][e] : 0.f, rss);
  }
#endif
}

// y[r] = RMSNorm(x[r]) * w for every row r (one CTA a row).
__global__ void __launch_bounds__(PT) rms_rows(const float* x, int ldx, int H, const uint16_t* w, float eps,
                                               float* y, int ldy) {
  __shared__ float part[PW];
  dep_start();
  const float* xr = x + (size_t)blockIdx.x * ldx;
  float s = 0.f;
  for (int i = threadIdx.x; i < H; i += PT) {
    const float v = xr[i];
    s += v * v;
  }
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  float tot = 0.f;
#pragma unroll
  for (int i = 0; i < PW; i++) tot += part[i];
  const float r = rsqrtf(tot / (float)H + eps);
  float* yr = y + (size_t)blockIdx.x * ldy;
  for (int i = threadIdx.x; i < H; i += PT) yr[i] = xr[i] * r * bf(w[i]);
}

struct RopeArgs {
  float* qkv;  // [M][qs]: q heads, k heads, v heads; q and k are normed and rotated in place
  int qs, M, nh, nkv;
  const uint16_t *q_norm, *k_norm;
  float eps;
  const float2* rope;  // the stack's RoPE table (rope_table)
  uint16_t *kc, *vc;  // this layer's caches [nkv][cap][HD]
  int cap;
  // Rows of several prompts one after another (the batched decode's
  // admissions): row r is position pos[r] of the stream whose caches are
  // slot[r] * slot_stride elements past kc and vc. NULL: one prompt, row r at
  // position r.
  const int32_t *pos, *slot;
  size_t slot_stride;
};

// One warp per (row, head vector): q and k get their RMSNorm and RoPE at the
// row's position, k and v go into the bf16 cache for the decode steps.
__global__ void __launch_bounds__(PT) rope_cache(const RopeArgs r) {
  const int lane = threadIdx.x & 31;
  const int per_row = r.nh + 2 * r.nkv;
  const int item = blockIdx.x * PW + (threadIdx.x >> 5);
  if (item >= r.M * per_row) return;
  const int row = item / per_row, v = item % per_row;
  const int pos = r.pos ? r.pos[row] : row;
  float* vec = r.qkv + (size_t)row * r.qs + v * HD;
  if (v < r.nh) {
    norm_rope(vec, r.q_norm, r.eps, pos, r.rope, vec);
    return;
  }
  const bool is_k = v < r.nh + r.nkv;
  const int kvh = is_k ? v - r.nh : v - r.nh - r.nkv;
  if (is_k) {
    norm_rope(vec, r.k_norm, r.eps, pos, r.rope, vec);
    __syncwarp();
  }
  const size_t stream = r.slot ? (size_t)r.slot[row] * r.slot_stride : 0;
  uint16_t* dst = (is_k ? r.kc : r.vc) + stream + ((size_t)kvh * r.cap + pos) * HD;
  for (int d = lane; d < HD; d += 32) dst[d] = f2bf(vec[d]);
}

// Online softmax: folds B scores s (-inf: no position; the first holds one)
// and their value rows v (this lane's 4 elements) into the running max m,
// weight sum l and context acc.
template <int B>
__device__ __forceinline__ void softmax_fold(const float (&s)[B], const float4 (&v)[B], float& m, float& l,
                                             float4& acc) {
  float mn = m;
#pragma unroll
  for (int b = 0; b < B; b++) mn = fmaxf(mn, s[b]);
  const float corr = expf(m - mn);
  l *= corr;
  acc.x *= corr;
  acc.y *= corr;
  acc.z *= corr;
  acc.w *= corr;
#pragma unroll
  for (int b = 0; b < B; b++) {
    const float p = expf(s[b] - mn);
    l += p;
    acc.x = fmaf(p, v[b].x, acc.x);
    acc.y = fmaf(p, v[b].y, acc.y);
    acc.z = fmaf(p, v[b].z, acc.z);
    acc.w = fmaf(p, v[b].w, acc.w);
  }
  m = mn;
}

// Causal attention of every (row, q head), one warp each, over the prompt's
// own fp32 k and v (as the cooperative prefill does within a pass). Writes
// the context vectors [M][nh*HD]. first (NULL: one prompt) holds each row's
// prompt's first row when the rows are several prompts one after another
// (the batched decode's admissions).
__global__ void __launch_bounds__(PT) attend_rows(const float* qkv, int qs, int M, int nh, int nkv, float* out,
                                                  const int* first = nullptr) {
  const int lane = threadIdx.x & 31;
  const int item = blockIdx.x * PW + (threadIdx.x >> 5);
  if (item >= M * nh) return;
  const int t = item / nh, h = item % nh, kvh = h / (nh / nkv);
  const float4 q = *reinterpret_cast<const float4*>(qkv + (size_t)t * qs + h * HD + lane * 4);
  const float* kb = qkv + (nh + kvh) * HD + lane * 4;
  const float* vb = qkv + (nh + nkv + kvh) * HD + lane * 4;
  const float scale = rsqrtf((float)HD);
  float m = -CUDART_INF_F, l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  constexpr int B = 4;  // positions in flight: their loads and warp sums overlap
  for (int j0 = first ? first[t] : 0; j0 <= t; j0 += B) {
    float4 k[B], v[B];
    float s[B];
#pragma unroll
    for (int b = 0; b < B; b++) {
      const int j = min(j0 + b, t);
      k[b] = *reinterpret_cast<const float4*>(kb + (size_t)j * qs);
      v[b] = *reinterpret_cast<const float4*>(vb + (size_t)j * qs);
    }
#pragma unroll
    for (int b = 0; b < B; b++) s[b] = q.x * k[b].x + q.y * k[b].y + q.z * k[b].z + q.w * k[b].w;
#pragma unroll
    for (int b = 0; b < B; b++) s[b] = j0 + b <= t ? warp_sum(s[b]) * scale : -CUDART_INF_F;
    softmax_fold(s, v, m, l, acc);  // positions past t weigh 0
  }
  const float inv = 1.f / l;
  *reinterpret_cast<float4*>(out + (size_t)t * nh * HD + h * HD + lane * 4) =
      make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

}  // namespace pf
}  // namespace tb
