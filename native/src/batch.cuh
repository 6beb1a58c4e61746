// Batched decode: one frame for B streams at once (tb_batch_*). Each step is
// a sequence of ordinary launches over B rows, one row a stream (two for the
// code predictor's first step), so every weight is read once per step for all
// streams: the tensor-core GEMMs of prefill_tc.cuh, plus the kernels below
// for what differs per stream: the input embeddings, RoPE and the KV cache at
// the stream's own position, attention over the stream's own cache, and
// sampling with the stream's own parameters, seed and history.
//
// Every per-stream fact lives on the device (Slots), so a step needs no host
// work between its launches and one host sync at its end (the codes). On
// Hopper each launch may start while the one before it ends
// (dep_launch.cuh): every kernel here begins with dep_start.
#pragma once
#include "prefill_tc.cuh"

namespace tb {
namespace bt {

constexpr int AT = 256;         // attention threads: 8 warps split one (row, head)'s positions
constexpr int AW = AT / 32;
constexpr int OUTW = 18;        // a slot's output: codes[16], next group 0, bad flag

// Per-slot state, [cap] or [cap][...] by slot index.
struct Slots {
  int32_t* codes;   // [cap][MAXG]: the codes fed back this frame; [0] is the group 0 sampled last
  int32_t* tpos;    // [cap]: the talker position of the next step
  int32_t* frame;   // [cap]: the frame the next step makes
  int32_t* out;     // [cap][OUTW]: the last frame's codes, its next group 0 and a no-candidate flag
  int32_t* teach;   // [cap][1 + MAXG]: [0] != 0 feeds back [1..] instead of the sampled codes
  float* hidden;    // [cap][Htk]: the talker's final-normed state (the predictor's first input)
  uint16_t *tk_k, *tk_v;  // talker caches [cap][L][nkv][tcap][HD]
  size_t tk_slot;   // elements of one slot's talker cache
  int tcap;         // talker positions a slot holds
  uint16_t *cp_k, *cp_v;  // predictor caches [cap][L][nkv][MAXG][HD]
  size_t cp_slot;
  const Params* prm;  // [cap]: each slot's sampler view (sampling, seed, EOS mask, history, text rows)
};

// Which rows a launch covers and where each row's position and cache are:
// row r is stream rows[r] (predictor step 1: rows 2r and 2r + 1 are stream
// rows[r] at positions 0 and 1); the talker's position is tpos, the
// predictor's step j's is j.
struct RowMap {
  const int32_t* rows;
  int n;      // rows of the launch
  int talker; // 1: the talker's stack, 0: the predictor's step `step`
  int step;
};

__device__ __forceinline__ void row_slot_pos(const Slots& s, const RowMap& m, int r, int& slot, int& pos) {
  if (m.talker) {
    slot = m.rows[r];
    pos = __ldcg(s.tpos + slot);
  } else if (m.step == 1) {
    slot = m.rows[r >> 1];
    pos = r & 1;
  } else {
    slot = m.rows[r];
    pos = m.step;
  }
}

// This layer's K (or V) cache of one stream's kv head, as [positions][HD].
__device__ __forceinline__ uint16_t* cache_at(const Slots& s, const StackD& S, bool talker, bool v, int slot, int l,
                                              int kvh) {
  uint16_t* base = talker ? (v ? s.tk_v : s.tk_k) : (v ? s.cp_v : s.cp_k);
  const size_t per = talker ? s.tk_slot : s.cp_slot;
  const int cap = talker ? s.tcap : MAXG;
  return base + per * slot + (((size_t)l * S.nkv + kvh) * cap) * HD;
}

// Attention of q heads h0..h0+group-1 of one row (this CTA, all warps) over
// positions 0..pos of one kv head: position pos from the fresh fp32 k and v
// rows fk, fv, the ones before from the bf16 caches kc, vc. out: the row's
// context [nh * HD].
__device__ __forceinline__ void attend_group(const float* row, const float* fk, const float* fv, const uint16_t* kc,
                                             const uint16_t* vc, int pos, int h0, int group,
                                             float (*sm)[HD + 2], float* out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf((float)HD);
  for (int g = 0; g < group; g++) {
    const int h = h0 + g;
    const float4 q = *reinterpret_cast<const float4*>(row + h * HD + lane * 4);
    float mx = -CUDART_INF_F, sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    constexpr int B = 4;
    for (int p0 = warp; p0 <= pos; p0 += B * AW) {
      float4 k[B], v[B];
#pragma unroll
      for (int b = 0; b < B; b++) {
        const int p = min(p0 + b * AW, pos);
        if (p == pos) {
          k[b] = *reinterpret_cast<const float4*>(fk + lane * 4);
          v[b] = *reinterpret_cast<const float4*>(fv + lane * 4);
        } else {
          const uint2 ku = __ldcg(reinterpret_cast<const uint2*>(kc + (size_t)p * HD + lane * 4));
          const uint2 vu = __ldcg(reinterpret_cast<const uint2*>(vc + (size_t)p * HD + lane * 4));
          k[b] = make_float4(bflo(ku.x), bfhi(ku.x), bflo(ku.y), bfhi(ku.y));
          v[b] = make_float4(bflo(vu.x), bfhi(vu.x), bflo(vu.y), bfhi(vu.y));
        }
      }
      float sc[B];
#pragma unroll
      for (int b = 0; b < B; b++) {
        const float d = q.x * k[b].x + q.y * k[b].y + q.z * k[b].z + q.w * k[b].w;
        sc[b] = p0 + b * AW <= pos ? warp_sum(d) * scale : -CUDART_INF_F;
      }
      pf::softmax_fold(sc, v, mx, sum, acc);  // positions past pos weigh 0
    }
    // Merge: warps with no position have mx = -inf and weigh nothing.
    sm[warp][lane * 4 + 0] = acc.x;
    sm[warp][lane * 4 + 1] = acc.y;
    sm[warp][lane * 4 + 2] = acc.z;
    sm[warp][lane * 4 + 3] = acc.w;
    if (lane == 0) {
      sm[warp][HD] = mx;
      sm[warp][HD + 1] = sum;
    }
    __syncthreads();
    if (threadIdx.x < HD) {
      float M = -CUDART_INF_F;
      for (int w = 0; w < AW; w++) M = fmaxf(M, sm[w][HD]);
      float L = 0.f, a = 0.f;
      for (int w = 0; w < AW; w++) {
        if (sm[w][HD] == -CUDART_INF_F) continue;
        const float c = expf(sm[w][HD] - M);
        L += c * sm[w][HD + 1];
        a += c * sm[w][threadIdx.x];
      }
      out[h * HD + threadIdx.x] = a / L;
    }
    __syncthreads();  // sm is reused by the next head
  }
}

// Rows a stream has in a launch: two at the predictor's first step.
__host__ __device__ __forceinline__ int rows_per_stream(const RowMap& m) { return !m.talker && m.step == 1 ? 2 : 1; }

// One CTA per (stream, kv head): RMSNorm and RoPE of the head's k and of its
// group's q heads at each of the stream's rows' positions, k and v into the
// stream's cache, then attention of each q head over that cache, positions
// 0..pos: the row's own position from its fresh fp32 k and v (as the decode
// kernel does), the ones before from the bf16 cache (the predictor's first
// step: its second row reads the first's, written by this CTA). Warp w takes
// positions w, w + AW, ... with its own running max, four in flight; the
// warps merge at the end. Writes the context [n][nh * HD].
__global__ void __launch_bounds__(AT) rope_attend(const Slots s, const RowMap m, const StackD S, int l,
                                                  const uint16_t* q_norm, const uint16_t* k_norm, float* qkv, int qs,
                                                  float* out) {
  __shared__ float sm[AW][HD + 2];
  dep_start();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int per = rows_per_stream(m), group = S.nh / S.nkv;
  const int r0 = blockIdx.x / S.nkv * per, kvh = blockIdx.x % S.nkv;
  // Warp q (group + 1): row r0 + q's k (normed and rotated in place) and v
  // into the cache; the next group warps: that row's q heads.
  for (int q = 0; q < per; q++) {
    const int w0 = q * (group + 1), r = r0 + q;
    if (warp < w0 || warp > w0 + group) continue;
    int slot, pos;
    row_slot_pos(s, m, r, slot, pos);
    float* row = qkv + (size_t)r * qs;
    if (warp == w0) {
      float* fk = row + (S.nh + kvh) * HD;
      const float* fv = row + (S.nh + S.nkv + kvh) * HD;
      norm_rope(fk, k_norm, S.eps, pos, S.rope, fk);
      __syncwarp();
      uint16_t* kc = cache_at(s, S, m.talker, false, slot, l, kvh) + (size_t)pos * HD;
      uint16_t* vc = cache_at(s, S, m.talker, true, slot, l, kvh) + (size_t)pos * HD;
      for (int d = lane; d < HD; d += 32) {
        kc[d] = f2bf(fk[d]);
        vc[d] = f2bf(fv[d]);
      }
    } else {
      float* qh = row + (kvh * group + warp - w0 - 1) * HD;
      norm_rope(qh, q_norm, S.eps, pos, S.rope, qh);
    }
  }
  __syncthreads();
  for (int q = 0; q < per; q++) {
    const int r = r0 + q;
    int slot, pos;
    row_slot_pos(s, m, r, slot, pos);
    const float* row = qkv + (size_t)r * qs;
    const float* fk = row + (S.nh + kvh) * HD;
    const float* fv = row + (S.nh + S.nkv + kvh) * HD;
    const uint16_t* kc = cache_at(s, S, m.talker, false, slot, l, kvh);
    const uint16_t* vc = cache_at(s, S, m.talker, true, slot, l, kvh);
    attend_group(row, fk, fv, kc, vc, pos, kvh * group, group, sm, out + (size_t)r * S.nh * HD);
  }
}

// The talker's input row of one stream, x[0..H): the 16 embeddings of the
// codes fed back (the last one, code G - 1, passed in: its sampler has just
// drawn it) plus the text row of its frame (tts_pad past its text), summed in
// the decode kernel's order. Every thread of the block takes every
// blockDim.x-th element.
__device__ __forceinline__ void talker_input_row(const Slots& s, int slot, int last, int H, float* x) {
  const Params& a = s.prm[slot];
  const WeightsD& w = a.w;
  const int32_t* c = s.codes + slot * MAXG;
  const int f = __ldcg(s.frame + slot);
  const float* text = f < a.arg.ntrail ? a.arg.trail + (size_t)f * H : a.buf.pad;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    float v = bf(w.codec_emb[(size_t)__ldcg(c) * H + i]);
    for (int k = 1; k < w.G; k++) {
      const int code = k == w.G - 1 ? last : __ldcg(c + k);
      v += bf(w.cp_embs[((size_t)(k - 1) * w.Vp + code) * H + i]);
    }
    x[i] = v + text[i];
  }
}

// The code predictor's raw input rows of its first step (one CTA a stream):
// the talker's hidden state and the embedding of group 0. Here a frame
// starts: the group 0 fed back enters the history, a teacher replaces it, the
// no-candidate flag clears. The later steps' rows come from the sampler
// (sample, SAMPLE_PREDICTOR), which has the code they embed.
__global__ void __launch_bounds__(pf::PT) predictor_input(const Slots s, const int32_t* rows, const WeightsD w, int H,
                                                          float* x) {
  dep_start();
  const int slot = rows[blockIdx.x];
  int32_t* c = s.codes + slot * MAXG;
  const int32_t* t = s.teach + slot * (1 + MAXG);
  int g0 = __ldcg(c);
  if (__ldcg(t)) g0 = __ldcg(t + 1);
  __syncthreads();  // every thread read c[0] before thread 0 replaces it
  if (threadIdx.x == 0) {
    c[0] = g0;
    if (g0 >= 0 && g0 < w.V) s.prm[slot].buf.hist[g0 >> 5] |= 1u << (g0 & 31);
    s.out[slot * OUTW + 17] = 0;
  }
  const float* hid = s.hidden + (size_t)slot * H;
  float* x0 = x + (size_t)(2 * blockIdx.x) * H;
  for (int i = threadIdx.x; i < H; i += pf::PT) {
    x0[i] = __ldcg(hid + i);
    x0[H + i] = bf(w.codec_emb[(size_t)g0 * H + i]);
  }
}

// y[r][i] += b[i] (the 1.7B's small_to_mtp_projection bias).
__global__ void __launch_bounds__(pf::PT) add_bias(float* y, int n, int H, const uint16_t* b) {
  dep_start();
  for (int i = blockIdx.x * pf::PT + threadIdx.x; i < n * H; i += gridDim.x * pf::PT) y[i] += bf(b[i % H]);
}

// dst[rows[r]] = src[r] for rows of H floats (the talker's hidden state, kept per stream).
__global__ void __launch_bounds__(pf::PT) scatter_rows(const float* src, int H, const int32_t* rows, float* dst) {
  dep_start();
  const int slot = rows[blockIdx.x];
  for (int i = threadIdx.x; i < H; i += pf::PT) dst[(size_t)slot * H + i] = src[(size_t)blockIdx.x * H + i];
}

enum SampleKind { SAMPLE_PREDICTOR = 0, SAMPLE_TALKER = 1, SAMPLE_PREFILL = 2 };

// One CTA a stream draws from its logits row (ld floats apart) with the
// stream's sampler (sample_block, the decode kernel's sampler):
// SAMPLE_PREDICTOR: code j of the frame, and the stream's next input row into
// row blockIdx.x of next (H floats a row): the embedding of code j for
// predictor step j + 1, or after the last group the talker's input
// (talker_input_row), so no launch of its own a step makes them;
// SAMPLE_TALKER: group 0 of the next frame, the frame's codes published to out
// and the stream moved one position on; SAMPLE_PREFILL: group 0 of frame 0.
__global__ void __launch_bounds__(NT, 1) sample(const Slots s, const int32_t* rows, const float* logits, size_t ld,
                                                int V, int kind, int j, int H, float* next) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  dep_start();
  float* red = reinterpret_cast<float*>(smem_raw);
  float* sf = red + 64;
  int* sint = reinterpret_cast<int*>(sf + 64);
  float* region = reinterpret_cast<float*>(smem_raw + SM_XS);
  const int slot = rows[blockIdx.x];
  const Params& a = s.prm[slot];
  const float* lg = logits + ld * blockIdx.x;
  int32_t* c = s.codes + slot * MAXG;
  int32_t* out = s.out + slot * OUTW;
  const int32_t* t = s.teach + slot * (1 + MAXG);
  const int f = __ldcg(s.frame + slot);
  int id;  // the same in every thread (sample_block)
  if (kind == SAMPLE_PREDICTOR) id = sample_block<false>(a, lg, V, a.arg.sp, f, j, region, sf, sint);
  else id = sample_block<true>(a, lg, V, a.arg.st, kind == SAMPLE_PREFILL ? 0 : f + 1, 0, region, sf, sint);
  if (kind == SAMPLE_PREDICTOR) {
    const int code = __ldcg(t) ? __ldcg(t + 1 + j) : (id < 0 ? 0 : id);
    float* x = next + (size_t)blockIdx.x * H;
    if (j + 1 < a.w.G) {
      const uint16_t* e = a.w.cp_embs + ((size_t)(j - 1) * a.w.Vp + code) * H;
      for (int i = threadIdx.x; i < H; i += NT) x[i] = bf(e[i]);
    } else {
      talker_input_row(s, slot, code, H, x);
    }
    if (threadIdx.x != 0) return;
    c[j] = code;
    if (id < 0) out[17] = 1;
    return;
  }
  if (threadIdx.x != 0) return;
  if (kind == SAMPLE_TALKER) {
    // The codes emitted are the ones fed back (a teacher's too), as in the decode kernel.
    for (int k = 0; k < a.w.G; k++) out[k] = __ldcg(c + k);
    s.tpos[slot] = __ldcg(s.tpos + slot) + 1;
    s.frame[slot] = f + 1;
    out[17] |= id < 0;
  } else {
    out[17] = id < 0;
  }
  out[16] = id;
  c[0] = id;
}

}  // namespace bt
}  // namespace tb
