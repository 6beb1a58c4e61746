// The products of a prefill with many rows on Hopper's warpgroup tensor-core
// instruction (wgmma, sm_90a): C = A W^T over tiles of 128 rows x 128 or 256
// weight rows, as gemm_tiles (gemm_tiles.cuh) does with mma.sync, which it
// replaces where the library's image is sm_90a (tb_engine::wgmma).
//
// Each of a CTA's two warpgroups owns 64 rows. A (fp32) and W (bf16) arrive
// by cp.async, two or three 64-deep stages ahead of the one multiplied; W
// lands in the 128-byte swizzled K-major layout the tensor cores read from
// shared memory, and each warp splits its rows of A into bf16 hi and lo terms
// in registers (the m16n8k16 A layout), two wgmmas a k16 step.
//
// The arithmetic is gemm_tiles': A split into two bf16 terms (about 16
// significant bits), W in bf16, fp32 accumulation, a row's sum of squares in
// float in one fixed order (NORM), the epilogues of put_output. A row's sums
// run in one fixed order (k ascending, hi before lo in each k16 step), so its
// result does not depend on the other rows or on scheduling; it differs from
// gemm_tiles' by the summation order.
#pragma once
#include <cstdint>

#include "cp_async.cuh"
#include "dep_launch.cuh"
#include "prefill_tc.cuh"
#include "wgmma_sm90.cuh"

namespace tb {
namespace pf {

constexpr int WGM_BM = 128;       // rows a CTA
constexpr int WGM_BK = 64;        // K columns a stage: one 128-byte swizzled row of W
constexpr int WGM_THREADS = 256;  // two warpgroups
constexpr int WGM_AROW = WGM_BK + 8;  // floats a staged A row takes: float2 fragment reads without conflicts
constexpr int WGM_ABYTES = WGM_BM * WGM_AROW * 4;

// A CTA takes BN weight rows (EPI_SILU: BN / 2 gate and BN / 2 up rows, for
// BN / 2 output columns): 256 reads A half as often, 128 fills more SMs when
// the tiles are few (wg_tile_rows chooses). Buffers: the stage multiplied and
// the ones in flight, as many as fit.
__host__ __device__ constexpr int wg_stages(int BN) { return BN == 256 ? 3 : 4; }
// Dynamic shared memory: room to align to 1024 bytes, then W's stages, then A's.
__host__ __device__ constexpr int wg_smem(int BN) { return 1024 + wg_stages(BN) * (BN * 128 + WGM_ABYTES); }
__host__ __device__ constexpr int wg_out_cols(int EPI, int BN) { return EPI == EPI_SILU ? BN / 2 : BN; }

// d += A B^T for one m64 x nN x k16 step of a warpgroup: A's bf16 terms from
// the thread's four registers, B (N weight rows) through a shared-memory
// descriptor.
template <int N>
__device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc);
template <>
__device__ __forceinline__ void wgmma_bf16<128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
#ifdef TB_WGMMA
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#endif
}

template <>
__device__ __forceinline__ void wgmma_bf16<256>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc) {
#ifdef TB_WGMMA
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#endif
}

template <int EPI, bool NORM, int BN>
__global__ void __launch_bounds__(WGM_THREADS, 1) gemm_wg(const GemmArgs g) {
#ifdef TB_WGMMA
  constexpr int ST = wg_stages(BN), AHEAD = ST - 1, NA = BN / 2, WBYTES = BN * 128;
  extern __shared__ unsigned char wgm_raw[];
  unsigned char* base = tbwg::align1024(wgm_raw);
  const auto ws = [&](int s) { return base + s * WBYTES; };
  const auto as = [&](int s) { return reinterpret_cast<float*>(base + ST * WBYTES + s * WGM_ABYTES); };
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int wr = 16 * warp;  // the warp's first row of the tile (warpgroup warp / 4 owns 64)
  const int m0 = blockIdx.y * WGM_BM, oc0 = blockIdx.x * wg_out_cols(EPI, BN);

  // Copies of a stage, 16 bytes each: W chunk q = tid + 256 i is weight row
  // q / 8, bf16s 8 (q % 8); A chunk q is row q / 16, floats 4 (q % 16).
  constexpr int WCOPIES = BN * 8 / WGM_THREADS, ACOPIES = WGM_BM * WGM_BK / 4 / WGM_THREADS;
  const uint16_t* wsrc[WCOPIES];
  uint32_t woff[WCOPIES];
  bool wok[WCOPIES];
#pragma unroll
  for (int i = 0; i < WCOPIES; i++) {
    const int q = tid + WGM_THREADS * i, r = q >> 3;
    const bool up = EPI == EPI_SILU && r >= BN / 2;
    const int col = oc0 + (up ? r - BN / 2 : r);
    wok[i] = col < g.N;
    wsrc[i] = (up ? g.W2 : g.W) + (size_t)(wok[i] ? col : 0) * g.K + 8 * (q & 7);
    woff[i] = tbwg::sw128_offset(r, q & 7);
  }
  const float* asrc[ACOPIES];
  bool aok[ACOPIES];
#pragma unroll
  for (int i = 0; i < ACOPIES; i++) {
    const int q = tid + WGM_THREADS * i, r = q >> 4;
    aok[i] = m0 + r < g.M;
    asrc[i] = g.A + (size_t)(aok[i] ? m0 + r : 0) * g.lda + 4 * (q & 15);
  }
  const int nk = g.K / WGM_BK;
  const auto copy_stage = [&](int kt) {
    if (kt < nk) {
      const int kb = kt * WGM_BK, s = kt % ST;
      unsigned char* w = ws(s);
      float* a = as(s);
#pragma unroll
      for (int i = 0; i < WCOPIES; i++) cp_async16(w + woff[i], wsrc[i] + kb, wok[i]);
#pragma unroll
      for (int i = 0; i < ACOPIES; i++) {
        const int q = tid + WGM_THREADS * i;
        cp_async16(a + (q >> 4) * WGM_AROW + 4 * (q & 15), asrc[i] + kb, aok[i]);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");  // empty past the end: one group a stage
  };

  float acc[NA];
#pragma unroll
  for (int i = 0; i < NA; i++) acc[i] = 0.f;
  // A fragments of a stage's k16 steps, [0] the hi terms and [1] the lo
  // terms. They are rebuilt only after the stage before has finished its
  // products: ptxas serializes every wgmma of a kernel whose input registers
  // are written while earlier ones may still run (C7513).
  uint32_t fa[WGM_BK / 16][2][4];
  float ss0 = 0.f, ss1 = 0.f;  // NORM: this thread's part of rows wr + gq and wr + gq + 8's sums of squares
  dep_start();
#pragma unroll
  for (int s = 0; s < AHEAD; s++) copy_stage(s);
  // do-while: K >= WGM_BK (wg_fits), and no path past the loop may bring
  // the zeroed accumulators around the products (ptxas would serialize them).
  int kt = 0;
  do {
    asm volatile("cp.async.wait_group %0;" ::"n"(AHEAD - 1) : "memory");
    tbwg::fence_proxy_async();  // this thread's copies of W, for the tensor cores
    // Stage kt - 1's products are done: the fragments and its buffer are free.
    tbwg::wait<0>();
#pragma unroll
    for (int kk = 0; kk < WGM_BK / 16; kk++)
#pragma unroll
      for (int i = 0; i < 4; i++) tbwg::keep(fa[kk][0][i]), tbwg::keep(fa[kk][1][i]);
    __syncthreads();  // stage kt is in; both warpgroups are past stage kt - 1
    copy_stage(kt + AHEAD);
    const int s = kt % ST;
    const float* a = as(s) + (wr + gq) * WGM_AROW + 2 * tq;
#pragma unroll
    for (int kk = 0; kk < WGM_BK / 16; kk++) {
      // a0: row gq, k 2tq..; a1: row gq + 8; a2, a3: the same at k + 8.
      float2 x[4] = {*reinterpret_cast<const float2*>(a + 16 * kk),
                     *reinterpret_cast<const float2*>(a + 8 * WGM_AROW + 16 * kk),
                     *reinterpret_cast<const float2*>(a + 16 * kk + 8),
                     *reinterpret_cast<const float2*>(a + 8 * WGM_AROW + 16 * kk + 8)};
      if constexpr (NORM) {
        ss0 = fmaf(x[0].x, x[0].x, ss0);
        ss0 = fmaf(x[0].y, x[0].y, ss0);
        ss0 = fmaf(x[2].x, x[2].x, ss0);
        ss0 = fmaf(x[2].y, x[2].y, ss0);
        ss1 = fmaf(x[1].x, x[1].x, ss1);
        ss1 = fmaf(x[1].y, x[1].y, ss1);
        ss1 = fmaf(x[3].x, x[3].x, ss1);
        ss1 = fmaf(x[3].y, x[3].y, ss1);
        const uint16_t* nk0 = g.norm + kt * WGM_BK + 16 * kk + 2 * tq;
        const uint32_t n0 = __ldg(reinterpret_cast<const uint32_t*>(nk0));
        const uint32_t n1 = __ldg(reinterpret_cast<const uint32_t*>(nk0 + 8));
        x[0].x *= bflo(n0), x[0].y *= bfhi(n0), x[1].x *= bflo(n0), x[1].y *= bfhi(n0);
        x[2].x *= bflo(n1), x[2].y *= bfhi(n1), x[3].x *= bflo(n1), x[3].y *= bfhi(n1);
      }
#pragma unroll
      for (int i = 0; i < 4; i++) split_bf16x2(x[i].x, x[i].y, fa[kk][0][i], fa[kk][1][i]);
    }
    tbwg::fence();
    const unsigned char* w = ws(s);
#pragma unroll
    for (int kk = 0; kk < WGM_BK / 16; kk++) {
      const uint64_t d = tbwg::desc_sw128(w + 32 * kk);
      wgmma_bf16<BN>(acc, fa[kk][0], d);
      wgmma_bf16<BN>(acc, fa[kk][1], d);
    }
    tbwg::commit();
  } while (++kt < nk);
  tbwg::wait<0>();
#pragma unroll
  for (int i = 0; i < NA; i++) tbwg::keep(acc[i]);
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  float sc[2] = {1.f, 1.f};
  if constexpr (NORM) {
    float t[2] = {ss0, ss1};
#pragma unroll
    for (int h = 0; h < 2; h++) {
      t[h] += __shfl_xor_sync(0xffffffffu, t[h], 1);
      t[h] += __shfl_xor_sync(0xffffffffu, t[h], 2);
      sc[h] = rms_scale(t[h], g.K, g.eps);
    }
  }
  // acc[4 j + 2 h + c] is row wr + gq + 8 h, column 8 j + 2 tq + c of the tile's weight rows.
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int row = m0 + wr + gq + 8 * h;
    if (row >= g.M) continue;
    float* crow = g.C + (size_t)row * g.ldc;
#pragma unroll
    for (int j = 0; j < (EPI == EPI_SILU ? BN / 16 : BN / 8); j++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        const int n = oc0 + 8 * j + 2 * tq + c;
        if (n < g.N)
          put_output<EPI>(crow + n, acc[4 * j + 2 * h + c] * sc[h],
                          EPI == EPI_SILU ? acc[4 * (j + BN / 16) + 2 * h + c] * sc[h] : epi_bias(EPI) ? bf(g.bias[n]) : 0.f);
      }
  }
#endif
}

// Whether gemm_wg takes g: K a positive multiple of WGM_BK, A's rows 16-byte aligned.
inline bool wg_fits(const GemmArgs& g) { return g.K >= WGM_BK && g.K % WGM_BK == 0 && g.lda % 4 == 0; }

// The weight rows a CTA takes for g: 256 where its waves of tiles (one CTA
// an SM) cost less than 128's, a 256-row tile taking 1.6 times a 128-row
// one (its A is read half as often). On the 0.6B's shapes (H100,
// tools/gpu/micro/prefill_gemm.cu) this picks the faster of the two for
// every product at 320-2560 rows but QKV at 2560 (a tie): a layer at 2560
// rows 563 -> 498 us, at 640 232 -> 216.
inline int wg_tile_rows(int EPI, const GemmArgs& g, int sms) {
  const auto waves = [&](int bn) {
    const long tiles = (long)((g.N + wg_out_cols(EPI, bn) - 1) / wg_out_cols(EPI, bn)) * ((g.M + WGM_BM - 1) / WGM_BM);
    return (tiles + sms - 1) / sms;
  };
  return 8 * waves(256) < 5 * waves(128) ? 256 : 128;
}

template <int EPI, bool NORM, int BN>
cudaError_t wg_launch_bn(cudaStream_t st, const GemmArgs& g, bool dependent) {
  // Per launch: the attribute belongs to the current device.
  cudaError_t err = cudaFuncSetAttribute(gemm_wg<EPI, NORM, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, wg_smem(BN));
  if (err != cudaSuccess) return err;
  const dim3 grid((g.N + wg_out_cols(EPI, BN) - 1) / wg_out_cols(EPI, BN), (g.M + WGM_BM - 1) / WGM_BM);
  return launch_ex(dependent, 1, gemm_wg<EPI, NORM, BN>, grid, WGM_THREADS, wg_smem(BN), st, g);
}

// Launches gemm_wg over g (wg_fits) with the tile wg_tile_rows picks.
template <int EPI, bool NORM>
cudaError_t wg_launch(cudaStream_t st, const GemmArgs& g, int sms, bool dependent) {
  return wg_tile_rows(EPI, g, sms) == 256 ? wg_launch_bn<EPI, NORM, 256>(st, g, dependent)
                                          : wg_launch_bn<EPI, NORM, 128>(st, g, dependent);
}

}  // namespace pf
}  // namespace tb
