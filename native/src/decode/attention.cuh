// Attention over the KV cache: chunked (five-phase layers) and fused with the O projection.
// Part of the decode kernel (kernel.cuh includes every part, in order:
// one compilation unit).
#pragma once
#include "norms.cuh"
#include "matvec.cuh"
#include "grid_barrier.cuh"

namespace tb {

// Writes one position's k and v (fp32, one warp) into layer l's bf16 cache of
// kv head kvh.
__device__ __forceinline__ void store_kv(const StackD& S, int l, int nkv, int kvh, int pos, const float* k,
                                         const float* v, int lane) {
  const size_t off = (((size_t)l * nkv + kvh) * S.cap + pos) * HD;
  for (int d = lane; d < HD; d += 32) {
    S.kc[off + d] = f2bf(k[d]);
    S.vc[off + d] = f2bf(v[d]);
  }
}

// This lane's 4 elements of cache rows pb + k * NW (k < KB) below p0, as bf16
// pairs, every load issued before any is used.
template <int KB>
__device__ __forceinline__ void load_cache_rows(const uint16_t* C, int pb, int p0, int lane, uint2 (&u)[KB]) {
#pragma unroll
  for (int k = 0; k < KB; k++) {
    const int p = pb + k * NW;
    u[k] = p < p0 ? __ldcg(reinterpret_cast<const uint2*>(C + (size_t)p * HD + lane * 4)) : make_uint2(0u, 0u);
  }
}

// Position p's 4 elements of this lane: unpacked from the loaded cache row u
// below p0, else from the fresh fp32 rows (row p - n0).
__device__ __forceinline__ void row4(uint2 u, const float* fresh, int p, int p0, int n0, int lane, float (&out)[4]) {
  if (p < p0) {
    out[0] = bflo(u.x); out[1] = bfhi(u.x); out[2] = bflo(u.y); out[3] = bfhi(u.y);
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) out[i] = fresh[(p - n0) * HD + lane * 4 + i];
  }
}

// acc += wgt x position p's value row (row4's source), lsum += wgt.
__device__ __forceinline__ void add_weighted(uint2 u, const float* fresh, int p, int p0, int n0, int lane, float wgt,
                                             float (&acc)[4], float& lsum) {
  float v4[4];
  row4(u, fresh, p, p0, n0, lane, v4);
#pragma unroll
  for (int i = 0; i < 4; i++) acc[i] = fmaf(wgt, v4[i], acc[i]);
  lsum += wgt;
}

// Online softmax of one query (q4: this lane's 4 elements) over positions
// [b0, b1), accumulated into mrun, lsum and acc: positions below p0 from the
// bf16 cache rows Kc/Vc, the others from the fresh rows snk/snv (row p - n0).
// A warp takes positions ts + warp + k * NW of each TILE and issues KB cache
// loads before using any: one L2 round trip per KB * NW positions (the chunked
// attention keeps KB = 1: its chunks are short, and more live registers grew
// the decode kernel's stack frame).
template <int KB>
__device__ __forceinline__ void attend_span(const uint16_t* Kc, const uint16_t* Vc, int b0, int b1, int p0, int n0,
                                            const float* snk, const float* snv, const float (&q4)[4], float* ssc,
                                            float* sred, float& mrun, float& lsum, float (&acc)[4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf((float)HD);
  for (int ts = b0; ts < b1; ts += TILE) {
    const int te = min(ts + TILE, b1);
    float tmax = -CUDART_INF_F;
    for (int pb = ts + warp; pb < te; pb += KB * NW) {
      uint2 ku[KB];
      load_cache_rows<KB>(Kc, pb, p0, lane, ku);
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int p = pb + k * NW;
        if (p < te) {
          float k4[4];
          row4(ku[k], snk, p, p0, n0, lane, k4);
          float d = q4[0] * k4[0] + q4[1] * k4[1] + q4[2] * k4[2] + q4[3] * k4[3];
          d = warp_sum(d) * scale;
          if (lane == 0) ssc[p - ts] = d;
          tmax = fmaxf(tmax, d);
        }
      }
    }
    if (lane == 0) sred[warp] = tmax;
    __syncthreads();
    float mt = -CUDART_INF_F;
    for (int w = 0; w < NW; w++) mt = fmaxf(mt, sred[w]);
    const float mnew = fmaxf(mrun, mt);
    const float corr = expf(mrun - mnew);
    lsum *= corr;
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i] *= corr;
    for (int pb = ts + warp; pb < te; pb += KB * NW) {
      uint2 vu[KB];
      load_cache_rows<KB>(Vc, pb, p0, lane, vu);
#pragma unroll
      for (int k = 0; k < KB; k++) {
        const int p = pb + k * NW;
        if (p < te) add_weighted(vu[k], snv, p, p0, n0, lane, expf(ssc[p - ts] - mnew), acc, lsum);
      }
    }
    mrun = mnew;
    __syncthreads();
  }
}

// attention_o's softmax, one query (q4: this lane's 4 elements) over
// positions [0, len): warp w takes positions w + NW k with its own running
// max (mrun), weight sum and context, so no CTA barrier separates the scores
// from the values, and a batch's K and V rows come in one round trip; the
// caller merges the warps. Positions below p0 from the bf16 cache, p0 from
// the fresh rows snk / snv.
template <int KB>
__device__ __forceinline__ void attend_warp(const uint16_t* Kc, const uint16_t* Vc, int len, int p0, const float* snk,
                                            const float* snv, const float (&q4)[4], float& mrun, float& lsum,
                                            float (&acc)[4], uint2 (&ku)[KB], uint2 (&vu)[KB]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf((float)HD);
  for (int pb = warp; pb < len; pb += KB * NW) {
    if (pb != warp) {  // the first batch: the caller's
      load_cache_rows<KB>(Kc, pb, p0, lane, ku);
      load_cache_rows<KB>(Vc, pb, p0, lane, vu);
    }
    float d[KB];
    float bmax = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < KB; k++) {
      const int p = pb + k * NW;
      d[k] = -CUDART_INF_F;
      if (p < len) {
        float k4[4];
        row4(ku[k], snk, p, p0, p0, lane, k4);
        d[k] = warp_sum(q4[0] * k4[0] + q4[1] * k4[1] + q4[2] * k4[2] + q4[3] * k4[3]) * scale;
        bmax = fmaxf(bmax, d[k]);
      }
    }
    const float mnew = fmaxf(mrun, bmax);  // finite: position pb < len is in the batch
    const float corr = expf(mrun - mnew);
    lsum *= corr;
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i] *= corr;
#pragma unroll
    for (int k = 0; k < KB; k++) {
      const int p = pb + k * NW;
      if (p < len) add_weighted(vu[k], snv, p, p0, p0, lane, expf(d[k] - mnew), acc, lsum);
    }
    mrun = mnew;
  }
}

// Work item = (q head, token, position chunk). Emits an online-softmax
// partial (unnormalised sums, max, weight sum) that the O-projection merges
// in a fixed order. Positions >= p0 (this launch's tokens) come from the
// freshly projected q/k/v; earlier ones from the bf16 cache.
__device__ void attention(const Params& a, const StackD& S, int l, int m, int p0, int C, float* sm) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = S.nh, nkv = S.nkv, grp = nh / nkv;
  float* sq = sm;
  float* snk = sq + HD;
  float* snv = snk + a.buf.mmax * HD;
  float* ssc = snv + a.buf.mmax * HD;
  float* sacc = ssc + TILE;
  float* sred = sacc + NW * HD;  // [NW] maxima, then [NW] weight sums
  const LayerD& Lw = S.layers[l];
  const int items = nh * m * C;
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    const int c = it % C, t = (it / C) % m, h = it / (C * m);
    const int kvh = h / grp, pos = p0 + t, len = pos + 1;
    const int b0 = (int)((long long)c * len / C), b1 = (int)((long long)(c + 1) * len / C);
    const int n0 = max(b0, p0);
    const uint16_t* Kc = S.kc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    const uint16_t* Vc = S.vc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    // q on the last warp: the new position's k (first positions' warps) runs alongside.
    if (warp == NW - 1)
      norm_rope(a.buf.qkv + (size_t)t * a.buf.qkv_stride + h * HD, Lw.q_norm, S.eps, pos, S.rope, sq);
    for (int j = n0 + warp; j < b1; j += NW) {
      const float* raw = a.buf.qkv + (size_t)(j - p0) * a.buf.qkv_stride;
      float* kd = snk + (j - n0) * HD;
      float* vd = snv + (j - n0) * HD;
      new_kv(raw + (nh + kvh) * HD, raw + (nh + nkv + kvh) * HD, Lw.k_norm, S.eps, j, S.rope, kd, vd);
      __syncwarp();
      // Exactly one item writes each new position.
      if (h % grp == 0 && j == pos) store_kv(S, l, nkv, kvh, pos, kd, vd, lane);
    }
    __syncthreads();
    float q4[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q4[i] = sq[lane * 4 + i];
    float mrun = -CUDART_INF_F, lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    attend_span<1>(Kc, Vc, b0, b1, p0, n0, snk, snv, q4, ssc, sred, mrun, lsum, acc);
#pragma unroll
    for (int i = 0; i < 4; i++) sacc[warp * HD + lane * 4 + i] = acc[i];
    if (lane == 0) sred[NW + warp] = lsum;
    __syncthreads();
    float* dst = a.buf.part + (((size_t)t * nh + h) * a.buf.cmax + c) * PSTRIDE;
    for (int d = threadIdx.x; d < HD; d += NT) {
      float s = 0.f;
      for (int w = 0; w < NW; w++) s += sacc[w * HD + d];
      dst[d] = s;
    }
    if (threadIdx.x == 0) {
      float L = 0.f;
      for (int w = 0; w < NW; w++) L += sred[NW + w];
      dst[HD] = mrun;
      dst[HD + 1] = L;
    }
    __syncthreads();
  }
}

// Merge the C partials of every (token, head) into xs[t][h*HD + d].
__device__ __forceinline__ void merge_attention(const Params& a, const StackD& S, int m, int C, float* xs, int xstride) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int pr = warp; pr < m * S.nh; pr += NW) {
    const int t = pr / S.nh, h = pr % S.nh;
    const float* base = a.buf.part + (((size_t)t * S.nh + h) * a.buf.cmax) * PSTRIDE;
    // Every load of the pair is issued before any is used (one L2 trip, not
    // one per chunk): lane c holds chunk c's max and weight sum, and the
    // sums of up to four chunks at a time are in flight.
    const float pm = lane < C ? __ldcg(base + lane * PSTRIDE + HD) : -CUDART_INF_F;
    const float pl = lane < C ? __ldcg(base + lane * PSTRIDE + HD + 1) : 0.f;
    float L = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    float M = -CUDART_INF_F;
    for (int c0 = 0; c0 < C; c0 += 4) {
      float4 v[4];
#pragma unroll
      for (int k = 0; k < 4; k++)
        if (c0 + k < C) v[k] = __ldcg(reinterpret_cast<const float4*>(base + (c0 + k) * PSTRIDE + lane * 4));
      if (c0 == 0) {
        for (int c = 0; c < C; c++) M = fmaxf(M, __shfl_sync(0xffffffffu, pm, c));
      }
#pragma unroll
      for (int k = 0; k < 4; k++) {
        if (c0 + k < C) {
          const float e = expf(__shfl_sync(0xffffffffu, pm, c0 + k) - M);
          L += __shfl_sync(0xffffffffu, pl, c0 + k) * e;
          o[0] += v[k].x * e;
          o[1] += v[k].y * e;
          o[2] += v[k].z * e;
          o[3] += v[k].w * e;
        }
      }
    }
    const float inv = 1.f / L;
#pragma unroll
    for (int i = 0; i < 4; i++) xs[t * xstride + h * HD + lane * 4 + i] = o[i] * inv;
  }
  __syncthreads();
}

// One token at position pos, attention fused with the O projection. Work item
// = (q head h, block rb of the H O rows), RB = grid / nh blocks a head so every
// CTA has one item. The item computes head h's attention over positions
// 0..pos itself (attend_warp; the RB items of a head redundantly: cheap for
// short contexts; for long ones each warp pays a dependent K and V load per
// 4 x NW positions, where the chunked path spreads them over CTAs), then its
// head's share of its O rows, W_o[r, h*HD:(h+1)*HD] . ctx_h, added with
// 64-bit fixed-point red.add into xfix row 2 (run_stack zeroed it; the 16
// heads' integer sums do not depend on their order). norm_resid (the next
// phase) adds the layer's input to it.
// Register notes (ptxas, decode_kernel at 128 registers): 64-bit divisions
// here (subroutine calls) grew the kernel's stack frame; so did a run-time
// choice between this and the five-phase path (both inlined), hence the
// compile-time FUSE.
__device__ void attention_o(const Params& a, const StackD& S, int l, int pos, const uint16_t* Wo,
                            const uint16_t* qn, const uint16_t* kn, float* sm, Grid* gp = nullptr) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = S.nh, nkv = S.nkv, grp = nh / nkv, H = S.H, AO = nh * HD;
  float* sq = sm;          // q, then the context vector
  float* snk = sq + HD;    // the new position's k
  float* snv = snk + HD;   // and v
  float* sacc = snv + HD;
  float* sred = sacc + NW * HD;  // [NW] maxima, then [NW] weight sums
  const int RB = max(1, (int)gridDim.x / nh), items = nh * RB, len = pos + 1;
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    const int h = it / RB, rb = it - h * RB, kvh = h / grp;
    // O rows r0..r1-1 of this block, columns of head h: a half-warp a row
    // (16 lanes x 8 bf16), four rows a half-warp in flight. The trip count
    // is uniform over the CTA, so the half-warp shuffles are convergent.
    const int r0 = rb * H / RB, r1 = (rb + 1) * H / RB;  // 32-bit: H <= 8192, RB <= grid
    const int hl = lane & 15, hw = threadIdx.x >> 4;
    constexpr int HW = NT / 16;
    const uint16_t* Wh = Wo + h * HD + hl * 8;
    uint4 w[4];
    auto load_o = [&](int base) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int r = base + u * HW + hw;
        w[u] = r < r1 ? ldw(reinterpret_cast<const uint4*>(Wh + (size_t)r * AO)) : make_uint4(0, 0, 0, 0);
      }
    };
    const uint16_t* Kc = S.kc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    const uint16_t* Vc = S.vc + (((size_t)l * nkv + kvh) * S.cap) * HD;
    uint2 ku[4], vu[4];
    // This warp's first K and V cache rows do not depend on q, k or v: in
    // flight with them (H100: talker step -3..4 us).
    load_cache_rows<4>(Kc, warp, pos, lane, ku);
    load_cache_rows<4>(Vc, warp, pos, lane, vu);
    // q on the last warp, the new position's k and v on warp 0.
    if (warp == NW - 1) norm_rope(a.buf.qkv + h * HD, qn, S.eps, pos, S.rope, sq);
    if (warp == 0) {
      new_kv(a.buf.qkv + (nh + kvh) * HD, a.buf.qkv + (nh + nkv + kvh) * HD, kn, S.eps, pos, S.rope, snk, snv);
      __syncwarp();
      // Exactly one item writes each kv head's new position (read by later
      // steps only: every item of this launch has it from a.buf.qkv).
      if (h % grp == 0 && rb == 0) store_kv(S, l, nkv, kvh, pos, snk, snv, lane);
    }
    __syncthreads();
    float q4[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q4[i] = sq[lane * 4 + i];
    {  // A scope of its own: the form that was measured (ptxas spills less in it)
    float mrun = -CUDART_INF_F, lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    prof_mark(gp, PH_AROPE);
    attend_warp<4>(Kc, Vc, len, pos, snk, snv, q4, mrun, lsum, acc, ku, vu);
    prof_mark(gp, PH_AKV);
    // This half-warp's first W_o rows, in flight while the warps' partial
    // contexts are merged (the whole slice when RB x 128 >= H: the 0.6B).
    load_o(r0);
#pragma unroll
    for (int i = 0; i < 4; i++) sacc[warp * HD + lane * 4 + i] = acc[i];
    if (lane == 0) {
      sred[warp] = mrun;
      sred[NW + warp] = lsum;
    }
    __syncthreads();
    // The context vector: the warps' sums rescaled to the largest maximum.
    // sq is free: every warp read its q before the barrier.
    const int nwa = min(NW, len);  // warps w >= len had no position (predictor steps: 1.0 us a step)
    for (int d = threadIdx.x; d < HD; d += NT) {
      float M = -CUDART_INF_F;
      for (int w = 0; w < nwa; w++) M = fmaxf(M, sred[w]);
      float s = 0.f, L = 0.f;
      for (int w = 0; w < nwa; w++) {
        const float e = expf(sred[w] - M);
        s = fmaf(e, sacc[w * HD + d], s);
        L = fmaf(e, sred[NW + w], L);
      }
      sq[d] = s * (1.f / L);
    }
    __syncthreads();
    prof_mark(gp, PH_ACTX);
    }
    long long* att = a.buf.xfix + 2 * (size_t)a.buf.xstride;
    for (int base = r0; base < r1; base += 4 * HW) {
      if (base != r0) load_o(base);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        float d = dot8(w[u], sq + hl * 8);
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        const int r = base + u * HW + hw;
        if (hl == 0 && r < r1)
          asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(att + r), "l"(to_fix(d)) : "memory");
      }
    }
    __syncthreads();
  }
}

}  // namespace tb
