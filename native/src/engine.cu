// Host side of the CUDA engine: weight upload, buffers, launch geometry,
// cooperative launches and the C ABI of talkbox_native.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include <sched.h>

#include "../include/talkbox_native.h"
#include "kernel.cuh"
#include "prefill_tc.cuh"
#include "stream_priority.cuh"
#include "textproj.cuh"
#include "gemm_tiles.cuh"
#include "gemm_wg.cuh"

using namespace tb;

namespace {

thread_local std::string g_err;

int fail(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_err = buf;
  return -1;
}

#define CK(call)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) return fail("%s: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)

// One stream per device for every engine of the process: GPU work of all
// engines is serialised, so two persistent barrier kernels never run at once.
std::mutex g_stream_mu;
cudaStream_t g_streams[64];

int device_stream(int dev, cudaStream_t* out) {
  std::lock_guard<std::mutex> lk(g_stream_mu);
  if (dev < 0 || dev >= 64) return fail("device %d out of range", dev);
  if (!g_streams[dev]) CK(create_stream(&g_streams[dev], PRIO_LM));
  *out = g_streams[dev];
  return 0;
}

constexpr int SLOTS = 4;
// decode_kernel<true> (the talker's attention fused with O) up to this talker
// context, decode_kernel<false> (five phases a talker layer) after; both fuse
// the predictor's steps. From the H100 context sweep (docs/dev/LATENCY.md,
// Settings): the fused frame is 0.7% faster over positions
// 128-248, the five-phase one 2.6% faster over 256-376. tb_params.fused_max_len
// overrides it.
constexpr int FUSED_MAX_LEN = 224;
constexpr int DEFAULT_MAX_POSITIONS = 8192;
constexpr int OUTW = 18;

// gate_up_down's down shares (BuffersD::shares): four a CTA on every SM, and
// a multiple of the smaller grid that leaves SMs to the GPU codec (132 SMs:
// 528 shares, grids of 132 and 88), at most MAX_SHARES_PER_CTA on it.
constexpr int SHARES_PER_SM = 4;
constexpr int MAX_SHARES_PER_CTA = 8;

}  // namespace

// Device buffers freed together (tb_engine, tb_batch): alloc records each,
// regrow replaces one, free_all frees them all.
struct DeviceMem {
  std::vector<void*> allocs;

  template <class T>
  int alloc(T** p, size_t count) {
    void* v = nullptr;
    CK(cudaMalloc(&v, std::max<size_t>(count * sizeof(T), 16)));
    allocs.push_back(v);
    *p = static_cast<T*>(v);
    return 0;
  }

  // A grown buffer: frees *p (when set) and allocates count elements there.
  template <class T>
  int regrow(T** p, size_t count) {
    if (*p) {
      cudaFree(*p);
      allocs.erase(std::find(allocs.begin(), allocs.end(), (void*)*p));
      *p = nullptr;
    }
    return alloc(p, count);
  }

  void free_all() {
    for (void* p : allocs) cudaFree(p);
    allocs.clear();
  }
};

// The fp32 work buffers of a prompt's pass through the talker (tc_layers),
// grown on demand: the single stream's prefill (tb_engine) and the batch's
// admissions (tb_batch) each hold their own, so a long prompt never moves
// the buffers the batched step's captured graphs read.
struct PrefillBuffers {
  float* x = nullptr;    // residual [rows][H]
  float* in = nullptr;   // normed rows / attention contexts [rows][max(H, heads*HD)]
  float* qkv = nullptr;  // [rows][(heads + 2 kv heads) * HD]
  float* mlp = nullptr;  // SiLU(gate) * up [rows][I]
  int cap = 0;           // rows they hold

  // Room for n rows of stack S, from m's memory.
  int reserve(DeviceMem& m, const StackD& S, int n) {
    if (n <= cap) return 0;
    cap = 0;
    const size_t rows = n, AO = (size_t)S.nh * HD, QN = (size_t)(S.nh + 2 * S.nkv) * HD;
    if (m.regrow(&x, rows * S.H) || m.regrow(&in, rows * std::max<size_t>(S.H, AO)) || m.regrow(&qkv, rows * QN) ||
        m.regrow(&mlp, rows * S.I))
      return -1;
    cap = n;
    return 0;
  }
};

struct tb_engine : DeviceMem {
  int dev = 0;
  cudaStream_t stream = nullptr;
  Params P{};
  int grid = 0, smem = 0, mmax = 0, sms = 0;
  // The decode kernels' two grids (tb_reserve_sms, tb_leave_sms): every SM,
  // and the SMs less those left to the codec; equal when the kernels cannot
  // switch (tb_reserve_sms). grid is the one the next launch takes.
  int grid_all = 0, grid_left = 0;
  bool clusters = false;  // thread-block clusters and a gemm_staged built for them (Hopper or later)
  bool wgmma = false;     // the library's image carries wgmma (sm_90a): many-row products on gemm_wg
  int maxV = 0;  // largest vocabulary (tb_sample's bound)
  unsigned* bars = nullptr;  // the grid barrier's two counters (launch)
  int bar_parity = 0;
  int maxpos = 0;
  int Htk = 0, Hcp = 0;
  // pending frames
  cudaEvent_t ev[SLOTS]{};
  int32_t* h_out = nullptr;  // pinned [SLOTS][OUTW]
  int32_t* d_out = nullptr;  // [SLOTS+1][OUTW] (last slot: prefill)
  int head = 0, pending = 0;
  int frame = 0;     // next frame to submit
  // Early codes (tb_frame_codes): the kernel publishes each frame's codes to
  // mapped host memory before its talker step; slot_seq names the frame a
  // slot holds (h_early[0] == slot_seq once that frame's codes are there).
  int32_t* h_early = nullptr;  // mapped pinned [EARLYW]
  int32_t* d_early = nullptr;  // its device address
  int seq = 0;
  int slot_seq[SLOTS]{};
  int npre = 0;      // prefill length
  bool primed = false;
  // prompt buffers
  float* d_rows = nullptr;
  size_t rows_cap = 0;
  float* d_trail = nullptr;
  size_t trail_cap = 0;
  float* d_pad = nullptr;
  size_t hist_words = 0;
  int prefill_rows = 0;
  // Longest talker context (positions) decode_kernel<true> takes.
  int fused_max_len = FUSED_MAX_LEN;
  // Tensor-core prefill (prefill_tc.cuh): the talker's layers as the host
  // sees them, and fp32 buffers for all prompt rows (grown on demand).
  bool tc_prefill = false;
  std::vector<LayerD> tk_layers, cp_layers;
  PrefillBuffers prompt_work;
  // tb_project_text's weights, stream and buffers (textproj.cuh): touched by
  // nothing else, freed by its own destructor after this one's body.
  tbtp::TextProj tp;

  ~tb_engine() {
    cudaSetDevice(dev);
    if (stream) cudaStreamSynchronize(stream);
    for (auto& e : ev)
      if (e) cudaEventDestroy(e);
    if (h_out) cudaFreeHost(h_out);
    if (h_early) cudaFreeHost(h_early);
    free_all();
  }
};

namespace {

int upload(tb_engine* e, uint16_t** dst, const uint16_t* src, size_t n, const char* what) {
  if (!src) return fail("weights: %s is missing", what);
  if (e->alloc(dst, n)) return -1;
  CK(cudaMemcpy(*dst, src, n * 2, cudaMemcpyHostToDevice));
  return 0;
}

// out = in^T for a rows x cols bf16 matrix (32 x 32 tiles through shared memory).
__global__ void transpose_bf16(const uint16_t* in, uint16_t* out, int rows, int cols) {
  __shared__ uint16_t t[32][33];
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    const int r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) t[k][threadIdx.x] = in[(size_t)r * cols + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    const int c = c0 + k, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = t[threadIdx.x][k];
  }
}

int check_dims(const tb_stack_dims& d, const char* name) {
  if (d.hidden <= 0 || d.intermediate <= 0 || d.layers <= 0 || d.heads <= 0 || d.kv_heads <= 0 || d.vocab <= 0)
    return fail("%s: sizes must be positive", name);
  if (d.head_dim != HD) return fail("%s: head_dim %d; this engine needs %d", name, d.head_dim, HD);
  if (d.heads % d.kv_heads) return fail("%s: heads %d not a multiple of kv heads %d", name, d.heads, d.kv_heads);
  if (d.hidden % 8 || d.intermediate % 8) return fail("%s: hidden and intermediate must be multiples of 8", name);
  if (d.hidden > 8192 || d.intermediate > 16384 || d.vocab > 8192) return fail("%s: sizes too large", name);
  return 0;
}

int build_stack(tb_engine* e, const tb_stack_dims& d, const tb_layer* layers, const uint16_t* norm, int cap,
                StackD* S, std::vector<LayerD>* host_layers /* optional */, const char* name) {
  const size_t H = d.hidden, I = d.intermediate, QN = (size_t)(d.heads + 2 * d.kv_heads) * HD, AO = (size_t)d.heads * HD;
  std::vector<LayerD> hl(d.layers);
  for (int l = 0; l < d.layers; l++) {
    const tb_layer& w = layers[l];
    LayerD& L = hl[l];
    char what[96];
    snprintf(what, sizeof what, "%s layer %d", name, l);
    uint16_t* p;
    if (upload(e, &p, w.input_norm, H, what)) return -1;
    L.in_norm = p;
    if (upload(e, &p, w.post_norm, H, what)) return -1;
    L.post_norm = p;
    if (!w.q || !w.k || !w.v) return fail("weights: %s q/k/v missing", what);
    uint16_t* qkv;
    if (e->alloc(&qkv, QN * H)) return -1;
    CK(cudaMemcpy(qkv, w.q, AO * H * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(qkv + AO * H, w.k, (size_t)d.kv_heads * HD * H * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(qkv + (AO + (size_t)d.kv_heads * HD) * H, w.v, (size_t)d.kv_heads * HD * H * 2, cudaMemcpyHostToDevice));
    L.qkv = qkv;
    if (upload(e, &p, w.o, H * AO, what)) return -1;
    L.o = p;
    if (upload(e, &p, w.q_norm, HD, what)) return -1;
    L.q_norm = p;
    if (upload(e, &p, w.k_norm, HD, what)) return -1;
    L.k_norm = p;
    if (upload(e, &p, w.gate, I * H, what)) return -1;
    L.gate = p;
    if (upload(e, &p, w.up, I * H, what)) return -1;
    L.up = p;
    if (upload(e, &p, w.down, H * I, what)) return -1;
    L.down = p;
    // The one-phase MLP (gate_up_down) reads W_down by its input rows; the
    // prefill paths keep the checkpoint's layout.
    uint16_t* dt;
    if (e->alloc(&dt, H * I)) return -1;
    transpose_bf16<<<dim3((unsigned)((I + 31) / 32), (unsigned)((H + 31) / 32)), dim3(32, 8)>>>(p, dt, (int)H, (int)I);
    CK(cudaGetLastError());
    L.down_t = dt;
  }
  LayerD* dl;
  if (e->alloc(&dl, hl.size())) return -1;
  CK(cudaMemcpy(dl, hl.data(), hl.size() * sizeof(LayerD), cudaMemcpyHostToDevice));
  S->layers = dl;
  if (host_layers) *host_layers = hl;
  S->L = d.layers;
  S->H = d.hidden;
  S->I = d.intermediate;
  S->nh = d.heads;
  S->nkv = d.kv_heads;
  S->eps = d.rms_eps;
  uint16_t* fn;
  if (upload(e, &fn, norm, H, name)) return -1;
  S->final_norm = fn;
  S->cap = cap;
  const size_t cache = (size_t)d.layers * d.kv_heads * cap * HD;
  if (e->alloc(&S->kc, cache) || e->alloc(&S->vc, cache)) return -1;
  CK(cudaMemset(S->kc, 0, cache * 2));
  CK(cudaMemset(S->vc, 0, cache * 2));
  // inv_freq as the official code computes it: in float32.
  float inv[HD / 2];
  for (int j = 0; j < HD / 2; j++) inv[j] = 1.0f / powf(d.rope_theta, (float)(2 * j) / (float)HD);
  float* dinv;
  if (e->alloc(&dinv, HD / 2)) return -1;
  CK(cudaMemcpy(dinv, inv, sizeof inv, cudaMemcpyHostToDevice));
  // Every position's cosines and sines, once (512 bytes a position).
  float2* rope;
  if (e->alloc(&rope, (size_t)cap * (HD / 2))) return -1;
  rope_table<<<cap, HD / 2>>>(dinv, cap, rope);
  CK(cudaGetLastError());
  S->rope = rope;
  return 0;
}

// The decode kernel a launch takes: the talker's attention fused with O
// while its context (position tpos and the ones before it) is short. Both
// kernels run the same predictor step; predictor-only launches (tb_bench)
// take decode_kernel<true> whatever tpos is, so their timing comes from one
// compiled kernel.
const void* decode_fn(const tb_engine* e) {
  const bool fused = e->P.arg.mode == MODE_PREDICTOR || e->P.arg.tpos + 1 <= e->fused_max_len;
  return fused ? (const void*)decode_kernel<true> : (const void*)decode_kernel<false>;
}

int launch(tb_engine* e) {
  // Two grid-barrier counters, alternating: each launch zeroes the one the
  // next launch uses (the kernel's CTA 0, once it no longer needs it), so no
  // memset runs between launches.
  e->P.arg.bar = e->bars + e->bar_parity;
  e->P.arg.bar_next = e->bars + (e->bar_parity ^ 1);
  void* args[] = {&e->P};
  const void* fn = e->P.arg.mode == MODE_PREFILL ? (const void*)prefill_kernel : decode_fn(e);
  CK(cudaLaunchCooperativeKernel(fn, dim3(e->grid), dim3(NT), args, (size_t)e->smem,
                                 e->stream));
  e->bar_parity ^= 1;  // only for a queued launch: a refused one zeroed nothing
  return 0;
}

// Position chunks for attention: enough to spread long contexts over the
// grid, one per 32 positions of the shortest context in the launch.
int chunks_for(const tb_engine* e, int len_min, int tokens) {
  // From the larger grid whichever the launch takes (tb_leave_sms): the
  // chunks set the attention's summation order.
  const int by_grid = std::max(1, e->grid_all / (e->P.w.tk.nh * tokens));
  // 32 positions per chunk: each warp of an item then loads at most a couple
  // of K/V rows one after another (a dependent L2 round trip each).
  const int by_len = std::max(1, (len_min + 31) / 32);
  return std::max(1, std::min({by_grid, by_len, e->P.buf.cmax, len_min}));
}

int run_prefill_tc(tb_engine* e);

int run_prefill_launches(tb_engine* e) {
  if (e->tc_prefill) return run_prefill_tc(e);
  const int n = e->prefill_rows;
  const int H = e->Htk;
  for (int p0 = 0; p0 < n; p0 += e->mmax) {
    const int m = std::min(e->mmax, n - p0);
    e->P.arg.mode = MODE_PREFILL;
    e->P.arg.p0 = p0;
    e->P.arg.m = m;
    e->P.arg.rows = e->d_rows + (size_t)p0 * H;
    e->P.arg.chunks = chunks_for(e, p0 + 1, m);
    e->P.arg.last = p0 + m == n;
    e->P.arg.out = e->d_out + SLOTS * OUTW;
    if (launch(e)) return -1;
  }
  return 0;
}

// The tensor-core prefill's shape rules: K of every GEMM in whole 32-column
// steps, N in whole column tiles (gemm_run's widths).
bool tc_prefill_fits(const tb_stack_dims& d) {
  const int H = d.hidden, I = d.intermediate, AO = d.heads * HD, QN = (d.heads + 2 * d.kv_heads) * HD;
  const int k = pf::KSTEP;
  return H % k == 0 && I % k == 0 && AO % k == 0 && QN % 32 == 0 && H % 8 == 0 && I % 16 == 0;
}

// Row tiles per CTA (16 rows each): enough for the prompt in one pass up to 64 rows.
int gemm_mt(int rows) { return rows <= 16 ? 1 : rows <= 32 ? 2 : 4; }

// SplitK is the scratch that lets a product split K over CTAs (pf::GemmArgs:
// ws, tickets) when its column tiles are fewer than the SMs. Only the
// batched decode passes one: its products have 16-64 rows, so the tiles
// are few and each CTA's work is short.
struct SplitK {
  float* ws = nullptr;
  size_t ws_floats = 0;
  unsigned* tickets = nullptr;  // [sms], zero: a product splits only when it has fewer tiles
  int sms = 0;
  bool clusters = false;  // gemm_staged can run (Hopper or later)
  bool wgmma = false;     // gemm_wg can run (the library's image is sm_90a)
  // Launch with programmatic stream serialization (the batched step on
  // Hopper: dep_launch.cuh).
  bool dependent = false;
  // gemm_staged: K split from all the tiles, not the column tiles alone: a
  // prefill, whose row tiles may fill the GPU (64 prompts of 40 rows: 56 ->
  // 42 ms, H100). A stream admitted with others then differs from itself
  // admitted alone by the summation order (0.1% of the largest logit).
  bool all_tiles = false;
};

// The row tiles whose products split K in pf::gemm (the batched step before
// Hopper; on Hopper gemm_staged runs it): two (17-32 rows). There it took the
// batched step at 32 streams from 7.5 to 6.4 ms (H100, 0.6B); at one row
// tile it changed the step by -2% to +1% and at four (64 streams) made it
// 1% slower, so those keep the unsplit kernel.
constexpr bool split_k_rows(int MT) { return MT == 2; }

template <int MT, int NT8, int EPI, bool NORM>
void gemm_launch(cudaStream_t st, pf::GemmArgs g, const SplitK* sk) {
  const int cols = EPI == pf::EPI_SILU ? 4 * NT8 : 8 * NT8;
  dim3 grid(g.N / cols, (g.M + 16 * MT - 1) / (16 * MT));
  if constexpr (split_k_rows(MT)) {
    const int tiles = grid.x * grid.y, steps = (g.K + pf::KSTEP - 1) / pf::KSTEP;
    // Slices of at least two K steps a warp, enough of them for about one
    // CTA an SM.
    int ks = sk && tiles < sk->sms ? std::min(sk->sms / tiles, steps / (2 * pf::PW)) : 1;
    if (ks > 1) {
      const int per = (steps + ks - 1) / ks;
      ks = (steps + per - 1) / per;
      if ((size_t)ks * tiles * pf::split_partials(MT, NT8, NORM) <= sk->ws_floats) {
        grid.z = ks;
        g.kc = per * pf::KSTEP;
        g.ws = sk->ws;
        g.tickets = sk->tickets;
        pf::gemm<MT, NT8, EPI, NORM, true><<<grid, pf::PT, 0, st>>>(g);
        return;
      }
    }
  }
  pf::gemm<MT, NT8, EPI, NORM><<<grid, pf::PT, 0, st>>>(g);
}

// Column tiles per CTA (NT8): wide N (QKV, gate/up, heads) takes 4 tiles so a
// CTA reuses each activation load 4 times (2 at 4 row tiles, for registers);
// N = hidden (O, down) takes 1 so there are still ~128 CTAs to stream the
// weights, or the wide tiles when K may be split (sk). EPI_SILU's tiles are
// half gate, half up: at least 2. N must be a multiple of the narrowest
// choice's columns (8; EPI_SILU 4); the batched decode's tiny test shapes
// take it where the wide one does not divide N.
template <int MT, int EPI, bool NORM>
void gemm_cols(cudaStream_t st, const pf::GemmArgs& g, const SplitK* sk) {
  constexpr int wide = MT <= 2 ? 4 : 2;
  constexpr int narrow = EPI == pf::EPI_SILU ? 2 : 1;
  constexpr int unit = EPI == pf::EPI_SILU ? 4 : 8;
  if ((EPI != pf::EPI_ADD || (split_k_rows(MT) && sk)) && g.N % (wide * unit) == 0)
    gemm_launch<MT, wide, EPI, NORM>(st, g, sk);
  else
    gemm_launch<MT, narrow, EPI, NORM>(st, g, sk);
}

// gemm_staged over 64-column tiles, K split over a cluster of up to
// MAX_CLUSTER CTAs so that a launch of one row tile has about two CTAs an SM
// (what fits, by registers) where its column tiles are fewer. One CTA an SM
// or four gave slower steps at 64 streams (H200: 0.6B 8.81 and 9.19 ms
// against 8.86; 1.7B 11.86 and 11.67 against 11.26).
template <int MT, int EPI, bool NORM>
void staged_launch(cudaStream_t st, pf::GemmArgs g, const SplitK& sk) {
  dim3 grid((g.N + 8 * pf::PW - 1) / (8 * pf::PW), (g.M + 16 * MT - 1) / (16 * MT));
  const int steps = (g.K + 31) / 32;
  // A power of two (cluster shapes). In a step, from the column tiles alone:
  // a row's sums then do not depend on how many rows the launch has.
  const int tiles = (int)(grid.x * (sk.all_tiles ? grid.y : 1));
  const int want = std::min({pf::MAX_CLUSTER, 2 * sk.sms / tiles, steps});
  int ks = 1;
  while (2 * ks <= want) ks *= 2;
  if (ks > 1) {
    grid.z = ks;
    g.kc = (steps + ks - 1) / ks * 32;
    launch_ex(sk.dependent, ks, pf::gemm_staged<MT, EPI, NORM, true>, grid, pf::PT, 0, st, g);
    return;
  }
  launch_ex(sk.dependent, 1, pf::gemm_staged<MT, EPI, NORM, false>, grid, pf::PT, 0, st, g);
}

// Calls f(std::integral_constant<int, MT>{}) for the row tiles MT a CTA of
// the few-row products takes at `rows` (gemm_mt).
template <class F>
void with_row_tiles(int rows, F f) {
  switch (gemm_mt(rows)) {
    case 1:
      f(std::integral_constant<int, 1>{});
      return;
    case 2:
      f(std::integral_constant<int, 2>{});
      return;
    default:
      f(std::integral_constant<int, 4>{});
  }
}

// gemm_staged at the row tiles g.M takes (Hopper).
template <int EPI, bool NORM = false>
void staged_run(cudaStream_t st, const pf::GemmArgs& g, const SplitK& sk) {
  with_row_tiles(g.M, [&](auto mt) { staged_launch<decltype(mt)::value, EPI, NORM>(st, g, sk); });
}

// Whether gemm_run's many-row products take pf::gemm_wg.
inline bool wg_runs(const pf::GemmArgs& g, const SplitK* sk) { return sk->wgmma && pf::wg_fits(g); }

// Whether a product runs on a kernel made for many rows (pf::gemm_wg where
// the image is sm_90a, else pf::gemm_tiles) rather than gemm_staged
// (Hopper): from 256 rows, where its 128-row tiles fill at least half the
// SMs (gemm_tiles) or a quarter (gemm_wg). A layer's products on the 0.6B's
// shapes, H100: 2560 rows 1033 -> 752 us on gemm_tiles; at 640 rows QKV and
// gate/up 95-97 -> 73 us each, while O and down (40 tiles) stay on
// gemm_staged (they would go 57 -> 74 and 79 -> 103). At 320 rows QKV gains
// 61 -> 55 us and gate/up loses 55 -> 72; from 512 rows instead of 256, 64
// utterances at once end to end gave TTFC p95 50.0-57.2 ms against
// 49.1-49.8. gemm_wg (tools/gpu/micro/prefill_gemm.cu): at 2560 rows a layer
// 770 -> 498 us, at 640 280 -> 216 (O and down 56 -> 49 and 79 -> 66 us
// against gemm_staged there; at 320 rows they stay on it, 36 and 48 us
// against 49 and 66).
template <int EPI>
bool use_tiles(const pf::GemmArgs& g, const SplitK* sk) {
  if (!sk || !sk->clusters || g.M < 256 || g.K % pf::TBK || g.lda % 4) return false;
  const long tiles = (long)((g.N + pf::tile_out_cols(EPI) - 1) / pf::tile_out_cols(EPI)) * ((g.M + pf::TBM - 1) / pf::TBM);
  return (wg_runs(g, sk) ? 4 : 2) * tiles >= sk->sms;
}

// NORM: g.A's rows RMSNorm'd with g.norm on the way in (pf::gemm). sk: K
// may be split (SplitK).
template <int EPI, bool NORM = false>
void gemm_run(cudaStream_t st, const pf::GemmArgs& g, const SplitK* sk = nullptr) {
  if (use_tiles<EPI>(g, sk)) {
    if (wg_runs(g, sk))
      pf::wg_launch<EPI, NORM>(st, g, sk->sms, sk->dependent);
    else
      pf::tiles_launch<EPI, NORM>(st, g, sk->dependent);
    return;
  }
  if (sk && sk->clusters) {
    staged_run<EPI, NORM>(st, g, *sk);
    return;
  }
  with_row_tiles(g.M, [&](auto mt) { gemm_cols<decltype(mt)::value, EPI, NORM>(st, g, sk); });
}

// The tensor-core layer loop over n rows of x (stride S.H): the prefill's
// (rows are one stream's positions 0..n-1, or several streams' prompts one
// after another) and the batched step's (rows are streams). attend(l, L)
// runs between the QKV projection and O: it leaves each row's attention
// context in `in`. The norms run inside the products they feed (NORM), one
// launch instead of two; for the prefill that took 40 prompt rows from 2.06
// to 1.86 ms (H100, with gemm_staged).
template <class Attend>
void tc_layers(cudaStream_t st, const StackD& S, const LayerD* layers, int n, float* x, float* in, float* qkv,
               float* mlp, Attend attend, const SplitK* sk = nullptr) {
  const int H = S.H, I = S.I, AO = S.nh * HD, QN = (S.nh + 2 * S.nkv) * HD;
  for (int l = 0; l < S.L; l++) {
    const LayerD& L = layers[l];
    gemm_run<pf::EPI_STORE, true>(st, {L.qkv, nullptr, QN, H, x, H, n, qkv, QN, L.in_norm, S.eps}, sk);
    attend(l, L);
    gemm_run<pf::EPI_ADD>(st, {L.o, nullptr, H, AO, in, AO, n, x, H}, sk);
    gemm_run<pf::EPI_SILU, true>(st, {L.gate, L.up, I, H, x, H, n, mlp, I, L.post_norm, S.eps}, sk);
    gemm_run<pf::EPI_ADD>(st, {L.down, nullptr, H, I, mlp, I, n, x, H}, sk);
  }
}

int run_prefill_tc(tb_engine* e) {
  const int n = e->prefill_rows;
  const StackD& S = e->P.w.tk;
  const int H = S.H, QN = (S.nh + 2 * S.nkv) * HD;
  PrefillBuffers& pw = e->prompt_work;
  if (pw.reserve(*e, S, n)) return -1;
  const cudaStream_t st = e->stream;
  float* x = pw.x;
  CK(cudaMemcpyAsync(x, e->d_rows, (size_t)n * H * 4, cudaMemcpyDeviceToDevice, st));
  const int rope_blocks = (n * (S.nh + 2 * S.nkv) + pf::PW - 1) / pf::PW;
  const int attn_blocks = (n * S.nh + pf::PW - 1) / pf::PW;
  // On Hopper the products are gemm_staged's (its clusters need no split-K
  // scratch): 40 prompt rows 2.28 -> 2.06 ms (H100); from 256 rows
  // gemm_tiles' (use_tiles).
  SplitK sk{};
  sk.sms = e->sms;
  sk.clusters = e->clusters;
  sk.wgmma = e->wgmma;
  sk.all_tiles = true;
  tc_layers(st, S, e->tk_layers.data(), n, x, pw.in, pw.qkv, pw.mlp, [&](int l, const LayerD& L) {
    const size_t cache = (size_t)l * S.nkv * S.cap * HD;
    pf::rope_cache<<<rope_blocks, pf::PT, 0, st>>>(
        {pw.qkv, QN, n, S.nh, S.nkv, L.q_norm, L.k_norm, S.eps, S.rope, S.kc + cache, S.vc + cache, S.cap});
    pf::attend_rows<<<attn_blocks, pf::PT, 0, st>>>(pw.qkv, QN, n, S.nh, S.nkv, pw.in);
  }, e->clusters ? &sk : nullptr);
  CK(cudaGetLastError());
  // The last row's residual goes where the cooperative kernel's head reads
  // it; that kernel (m = 0: head and sampling only) draws group 0.
  CK(cudaMemcpyAsync(e->P.buf.x, x + (size_t)(n - 1) * H, (size_t)H * 4, cudaMemcpyDeviceToDevice, st));
  e->P.arg.mode = MODE_PREFILL;
  e->P.arg.m = 0;
  e->P.arg.last = 1;
  e->P.arg.out = e->d_out + SLOTS * OUTW;
  return launch(e);
}

int submit_kind(tb_engine* e, int mode, int step) {
  e->P.arg.mode = mode;
  e->P.arg.bench_step = step;
  e->P.arg.frame = e->frame;
  e->P.arg.tpos = e->npre + e->frame;
  e->P.arg.m = 1;
  e->P.arg.chunks = chunks_for(e, e->P.arg.tpos + 1, 1);
  return launch(e);
}

}  // namespace

extern "C" {

int tb_abi_version(void) { return TB_ABI_VERSION; }

const char* tb_last_error(void) { return g_err.c_str(); }

int tb_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int tb_device_info(int device, char* name, int name_cap, int* sm_count, int* cc_major, int* cc_minor) {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, device));
  if (name && name_cap > 0) snprintf(name, name_cap, "%s", p.name);
  if (sm_count) *sm_count = p.multiProcessorCount;
  if (cc_major) *cc_major = p.major;
  if (cc_minor) *cc_minor = p.minor;
  return 0;
}

tb_params tb_default_params(void) {
  tb_params p{};
  p.device = 0;
  p.max_positions = DEFAULT_MAX_POSITIONS;
  p.fused_max_len = FUSED_MAX_LEN;
  p.prefill = TB_PREFILL_TENSOR_CORES;
  return p;
}

tb_engine* tb_create(const tb_weights* w, const tb_params* params) {
  if (!w) {
    fail("tb_create: no weights");
    return nullptr;
  }
  const tb_params prm = params ? *params : tb_default_params();
  const int device = prm.device;
  if (prm.prefill != TB_PREFILL_TENSOR_CORES && prm.prefill != TB_PREFILL_PASSES) {
    fail("prefill %d: want TB_PREFILL_TENSOR_CORES or TB_PREFILL_PASSES", prm.prefill);
    return nullptr;
  }
  if (prm.fused_max_len < 0) {
    fail("fused_max_len %d must be >= 0", prm.fused_max_len);
    return nullptr;
  }
  if (check_dims(w->talker, "talker") || check_dims(w->predictor, "code predictor")) return nullptr;
  if (w->num_groups < 2 || w->num_groups > MAXG) {
    fail("num_groups %d outside 2..%d", w->num_groups, MAXG);
    return nullptr;
  }
  if (prm.max_positions < 16 || prm.max_positions > 1 << 20) {
    fail("max_positions %d outside 16..2^20", prm.max_positions);
    return nullptr;
  }
  if (w->predictor.hidden != w->talker.hidden && (!w->mtp_proj_weight || !w->mtp_proj_bias)) {
    fail("code predictor hidden %d differs from talker hidden %d but small_to_mtp_projection is missing",
         w->predictor.hidden, w->talker.hidden);
    return nullptr;
  }
  auto* e = new tb_engine();
  e->dev = device;
  auto bail = [&]() -> tb_engine* {
    std::string keep = g_err;
    delete e;
    g_err = keep;
    return nullptr;
  };
  if (cudaSetDevice(device) != cudaSuccess) {
    fail("cudaSetDevice(%d): %s", device, cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  if (device_stream(device, &e->stream)) return bail();
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    fail("cudaGetDeviceProperties: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  if (!prop.cooperativeLaunch) {
    fail("%s does not support cooperative launches", prop.name);
    return bail();
  }
  const tb_stack_dims& T = w->talker;
  const tb_stack_dims& C = w->predictor;
  e->Htk = T.hidden;
  e->Hcp = C.hidden;
  e->maxpos = prm.max_positions;
  e->sms = prop.multiProcessorCount;
  // The staged products need clusters and code built for them: a library
  // built for older GPUs only would run their PTX, where the kernel is empty.
  cudaFuncAttributes staged{};
  e->clusters = prop.major >= 9 &&
                cudaFuncGetAttributes(&staged, pf::gemm_staged<4, pf::EPI_STORE, false, true>) == cudaSuccess &&
                staged.ptxVersion >= 90;
  e->wgmma = e->clusters && tbwg::image_has_wgmma(device);

  // Shared memory: activations for mmax tokens, or attention / sampling scratch.
  int maxK = 0;
  for (const tb_stack_dims* d : {&T, &C}) maxK = std::max({maxK, d->hidden, d->intermediate, d->heads * HD});
  const int maxV = std::max(T.vocab, C.vocab);
  e->maxV = maxV;
  // red, sf, sint, codes, the layer pointers (load_layer_table), then xs
  const size_t fixed = SM_XS + layer_table_bytes(T.layers + C.layers);
  // Dynamic shared memory may use what the kernel's static arrays leave.
  size_t static_smem = 0;
  const void* kernels[] = {(const void*)decode_kernel<true>, (const void*)decode_kernel<false>,
                           (const void*)prefill_kernel};
  for (const void* fn : kernels) {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, fn) != cudaSuccess) {
      fail("cudaFuncGetAttributes: %s", cudaGetErrorString(cudaGetLastError()));
      return bail();
    }
    static_smem = std::max(static_smem, fa.sharedSizeBytes);
  }
  const size_t limit = prop.sharedMemPerBlockOptin - static_smem;
  int mmax = 8;
  // gate_up_down: normed x, act, residual and the down partials (up to
  // MAX_SHARES_PER_CTA shares a CTA).
  size_t mlp = 0;
  for (const tb_stack_dims* d : {&T, &C})
    mlp = std::max(mlp, (size_t)(2 * d->hidden + d->intermediate + MAX_SHARES_PER_CTA * d->hidden) * 4);
  auto need = [&](int mm) {
    const size_t xs = (size_t)mm * std::max(maxK, 2 * T.hidden) * 4;
    const size_t at = (size_t)(HD + 2 * mm * HD + TILE + NW * HD + 2 * NW) * 4;
    const size_t sa = sample_region_bytes(maxV);
    return fixed + std::max({xs, at, sa, mlp});
  };
  while (mmax > 2 && need(mmax) > limit) mmax /= 2;
  if (need(mmax) > limit) {
    fail("%s: %zu bytes of shared memory per block needed, %zu available", prop.name, need(mmax), limit);
    return bail();
  }
  e->mmax = mmax;
  e->smem = (int)need(mmax);
  for (const void* fn : kernels) {
    if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, e->smem) != cudaSuccess) {
      fail("cudaFuncSetAttribute: %s", cudaGetErrorString(cudaGetLastError()));
      return bail();
    }
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, NT, e->smem) != cudaSuccess) {
      fail("occupancy query: %s", cudaGetErrorString(cudaGetLastError()));
      return bail();
    }
    if (per_sm < 1) {
      fail("%s: the %s kernel (%d threads, %d bytes shared) cannot be resident on an SM", prop.name,
           fn == (const void*)prefill_kernel ? "prefill" : "decode", NT, e->smem);
      return bail();
    }
  }
  // One CTA per SM; cooperative launch refuses what cannot be co-resident.
  e->grid = e->grid_all = e->grid_left = prop.multiProcessorCount;

  Params& P = e->P;
  if (build_stack(e, T, w->talker_layers, w->talker_norm, prm.max_positions, &P.w.tk, &e->tk_layers, "talker") ||
      build_stack(e, C, w->predictor_layers, w->predictor_norm, MAXG, &P.w.cp, &e->cp_layers, "code predictor"))
    return bail();
  // The tensor-core prefill where its shape rules allow, else the cooperative passes.
  e->tc_prefill = prm.prefill == TB_PREFILL_TENSOR_CORES && tc_prefill_fits(T);
  e->fused_max_len = prm.fused_max_len;
  const int G = w->num_groups, V = T.vocab, Vp = C.vocab;
  uint16_t* p;
  if (upload(e, &p, w->codec_head, (size_t)V * T.hidden, "codec_head")) return bail();
  P.w.codec_head = p;
  if (upload(e, &p, w->codec_embedding, (size_t)V * T.hidden, "codec_embedding")) return bail();
  P.w.codec_emb = p;
  uint16_t *heads, *embs;
  if (e->alloc(&heads, (size_t)(G - 1) * Vp * C.hidden) || e->alloc(&embs, (size_t)(G - 1) * Vp * T.hidden))
    return bail();
  for (int g = 0; g < G - 1; g++) {
    if (!w->predictor_heads || !w->predictor_heads[g] || !w->predictor_embeddings || !w->predictor_embeddings[g]) {
      fail("weights: code predictor head/embedding %d missing", g);
      return bail();
    }
    if (cudaMemcpy(heads + (size_t)g * Vp * C.hidden, w->predictor_heads[g], (size_t)Vp * C.hidden * 2,
                   cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(embs + (size_t)g * Vp * T.hidden, w->predictor_embeddings[g], (size_t)Vp * T.hidden * 2,
                   cudaMemcpyHostToDevice) != cudaSuccess) {
      fail("upload code predictor tables: %s", cudaGetErrorString(cudaGetLastError()));
      return bail();
    }
  }
  P.w.cp_heads = heads;
  P.w.cp_embs = embs;
  if (C.hidden != T.hidden) {
    if (upload(e, &p, w->mtp_proj_weight, (size_t)C.hidden * T.hidden, "small_to_mtp_projection")) return bail();
    P.w.proj_w = p;
    if (upload(e, &p, w->mtp_proj_bias, C.hidden, "small_to_mtp_projection bias")) return bail();
    P.w.proj_b = p;
  }
  // The optional text projection (tb_project_text): all four tensors or none.
  if (w->text_fc1 || w->text_fc1_bias || w->text_fc2 || w->text_fc2_bias || w->text_hidden) {
    if (!w->text_fc1 || !w->text_fc1_bias || !w->text_fc2 || !w->text_fc2_bias) {
      fail("weights: text projection incomplete (fc1, fc1 bias, fc2 and fc2 bias go together)");
      return bail();
    }
    if (w->text_hidden <= 0 || w->text_hidden > 16384) {
      fail("weights: text_hidden %d outside 1..16384", w->text_hidden);
      return bail();
    }
    const char* what = "";
    const cudaError_t err = e->tp.init(device, w->text_hidden, T.hidden, w->text_fc1, w->text_fc1_bias, w->text_fc2,
                                       w->text_fc2_bias, &what);
    if (err != cudaSuccess) {
      fail("%s: %s", what, cudaGetErrorString(err));
      return bail();
    }
  }
  P.w.V = V;
  P.w.Vp = Vp;
  P.w.G = G;
  P.w.eos = w->codec_eos;
  P.w.supp_from = w->suppress_from;
  P.w.min_new = w->min_new_tokens;
  P.buf.mmax = mmax;
  P.buf.xstride = std::max(T.hidden, C.hidden);
  P.buf.qkv_stride = std::max((T.heads + 2 * T.kv_heads) * HD, (C.heads + 2 * C.kv_heads) * HD);
  P.buf.cmax = 16;
  P.buf.shares = SHARES_PER_SM * e->sms;
  P.buf.act_stride = std::max(T.intermediate, C.intermediate);
  const int nhmax = std::max(T.heads, C.heads);
  e->hist_words = (size_t)(V + 31) / 32;
  // xfix: the parity rows' copies and the O row (fix_row).
  const size_t fix_rows = (size_t)std::max(3, fix_row(1, NCOPY - 1) + 1);
  if (e->alloc(&P.buf.x, (size_t)mmax * P.buf.xstride) || e->alloc(&P.buf.xfix, fix_rows * P.buf.xstride) ||
      e->alloc(&P.buf.qkv, (size_t)mmax * P.buf.qkv_stride) ||
      // part: the chunked attention's partials.
      e->alloc(&P.buf.part, (size_t)mmax * nhmax * P.buf.cmax * PSTRIDE) ||
      e->alloc(&P.buf.act, (size_t)mmax * P.buf.act_stride) ||
      e->alloc(&P.buf.hidden, T.hidden) || e->alloc(&P.buf.tlogits, V) || e->alloc(&P.buf.plogits, (size_t)(G - 1) * Vp) ||
      e->alloc(&P.buf.hist, e->hist_words) || e->alloc(&P.buf.samp_scratch, (size_t)e->sms * 2 * std::max(V, Vp)) ||
      e->alloc(&P.buf.state, 32) || e->alloc(&e->d_out, (SLOTS + 1) * OUTW) ||
      e->alloc(&e->bars, 2) || e->alloc(&e->d_pad, T.hidden))
    return bail();
  if (cudaMemset(e->bars, 0, 2 * sizeof(unsigned)) != cudaSuccess) {
    fail("cudaMemset: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
#if TB_PROF
  if (e->alloc(&P.dbg.prof, PROF_WORDS)) return bail();
#endif
  if (cudaMallocHost(&e->h_out, SLOTS * OUTW * sizeof(int32_t)) != cudaSuccess) {
    fail("cudaMallocHost: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  if (cudaHostAlloc(&e->h_early, EARLYW * sizeof(int32_t), cudaHostAllocMapped) != cudaSuccess ||
      cudaHostGetDevicePointer(&e->d_early, e->h_early, 0) != cudaSuccess) {
    fail("mapped host memory: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  memset(e->h_early, 0, EARLYW * sizeof(int32_t));
  P.buf.early = e->d_early;
  for (auto& ev : e->ev)
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
      fail("cudaEventCreate: %s", cudaGetErrorString(cudaGetLastError()));
      return bail();
    }
  P.buf.pad = e->d_pad;
  P.arg.st = SamplerD{0, 1.f, 0, 1.f, 1.f};
  P.arg.sp = P.arg.st;
  if (tb_reset(e)) return bail();
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fail("create: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  return e;
}

void tb_destroy(tb_engine* e) { delete e; }

int tb_reserve_sms(tb_engine* e, int n) {
  if (!e) return fail("no engine");
  if (n < 0 || n > e->sms / 2) return fail("reserve %d SMs: want 0..%d (half of %d)", n, e->sms / 2, e->sms);
  if (e->pending > 0) return fail("reserve SMs: %d frames pending", e->pending);
  // Fewer CTAs than SMs: the free SMs run other streams' kernels (the GPU
  // codec) while the persistent kernel holds the rest. Every loop in the
  // kernel strides by gridDim.x, so any grid size is correct; the sums are
  // the same on both grids while the down shares are a multiple of each:
  // the first count from n up to half as many again that allows it (132
  // SMs: 33 -> 44).
  const int shares = SHARES_PER_SM * e->sms;
  for (int k = n; k <= std::min(e->sms / 2, n + n / 2); k++) {
    const int left = e->sms - k;
    if (shares % left == 0 && shares / left <= MAX_SHARES_PER_CTA) {
      e->grid_all = e->sms;
      e->grid = e->grid_left = left;
      e->P.buf.shares = shares;
      return 0;
    }
  }
  // None: every launch leaves the n SMs (and its sums differ from an engine
  // that reserves none).
  e->grid = e->grid_all = e->grid_left = e->sms - n;
  e->P.buf.shares = SHARES_PER_SM * e->grid;
  return 0;
}

int tb_leave_sms(tb_engine* e, int leave) {
  if (!e) return fail("no engine");
  e->grid = leave ? e->grid_left : e->grid_all;
  return e->grid;
}

int tb_geometry(tb_engine* e, int* grid, int* threads, int* smem, int* mmax) {
  if (!e) return fail("no engine");
  if (grid) *grid = e->grid;
  if (threads) *threads = NT;
  if (smem) *smem = e->smem;
  if (mmax) *mmax = e->mmax;
  return 0;
}

int tb_reset(tb_engine* e) {
  if (!e) return fail("no engine");
  CK(cudaSetDevice(e->dev));
  // Drain frames still in flight (a cancelled utterance), then clear the state.
  while (e->pending > 0) {
    CK(cudaEventSynchronize(e->ev[e->head]));
    e->head = (e->head + 1) % SLOTS;
    e->pending--;
  }
  CK(cudaMemsetAsync(e->P.buf.hist, 0, e->hist_words * 4, e->stream));
  CK(cudaMemsetAsync(e->P.buf.state, 0, 32 * 4, e->stream));
  CK(cudaStreamSynchronize(e->stream));
  e->head = 0;
  e->frame = 0;
  e->npre = 0;
  e->primed = false;
  return 0;
}

int tb_set_sampling(tb_engine* e, const tb_sampler* t, const tb_sampler* p, uint64_t seed, int mask_eos) {
  if (!e || !t || !p) return fail("tb_set_sampling: null argument");
  for (const tb_sampler* s : {t, p}) {
    if (s->do_sample && !(s->temperature > 0.f)) return fail("temperature %g must be > 0", s->temperature);
    if (s->top_k < 0) return fail("top_k %d must be >= 0", s->top_k);
    if (s->do_sample && !(s->top_p > 0.f && s->top_p <= 1.f)) return fail("top_p %g outside (0, 1]", s->top_p);
  }
  e->P.arg.st = SamplerD{t->do_sample, t->temperature, t->top_k, t->top_p, t->repetition_penalty};
  e->P.arg.sp = SamplerD{p->do_sample, p->temperature, p->top_k, p->top_p, 1.f};
  e->P.arg.seed = seed;
  e->P.arg.mask_eos = mask_eos != 0;
  return 0;
}

int tb_prefill(tb_engine* e, const float* rows, int n, const float* trailing, int n_trailing, const float* tts_pad,
               int32_t* g0) {
  if (!e || !rows || !tts_pad || !g0) return fail("tb_prefill: null argument");
  if (n <= 0) return fail("prefill needs at least one row");
  if (n >= e->maxpos) return fail("prefill of %d rows leaves no room in %d positions", n, e->maxpos);
  if (n_trailing < 0 || (n_trailing > 0 && !trailing)) return fail("bad trailing rows");
  if (tb_reset(e)) return -1;
  const int H = e->Htk;
  if ((size_t)n * H > e->rows_cap) {
    e->rows_cap = 0;  // nothing held if the allocation fails
    if (e->regrow(&e->d_rows, (size_t)n * H)) return -1;
    e->rows_cap = (size_t)n * H;
  }
  const size_t tn = (size_t)std::max(n_trailing, 1) * H;
  if (tn > e->trail_cap) {
    e->trail_cap = 0;
    if (e->regrow(&e->d_trail, tn)) return -1;
    e->trail_cap = tn;
  }
  CK(cudaMemcpyAsync(e->d_rows, rows, (size_t)n * H * 4, cudaMemcpyHostToDevice, e->stream));
  if (n_trailing > 0)
    CK(cudaMemcpyAsync(e->d_trail, trailing, (size_t)n_trailing * H * 4, cudaMemcpyHostToDevice, e->stream));
  CK(cudaMemcpyAsync(e->d_pad, tts_pad, (size_t)H * 4, cudaMemcpyHostToDevice, e->stream));
  e->P.arg.trail = e->d_trail;
  e->P.arg.ntrail = n_trailing;
  e->P.arg.use_teacher = 0;
  e->prefill_rows = n;
  if (run_prefill_launches(e)) return -1;
  int32_t res[OUTW];
  CK(cudaMemcpyAsync(res, e->d_out + SLOTS * OUTW, sizeof res, cudaMemcpyDeviceToHost, e->stream));
  CK(cudaStreamSynchronize(e->stream));
  if (res[17]) return fail("prefill: no finite group-0 logit to sample from");
  *g0 = res[16];
  e->npre = n;
  e->frame = 0;
  e->primed = true;
  return 0;
}

int tb_frame_submit(tb_engine* e, const int32_t* teacher) {
  if (!e) return fail("no engine");
  if (!e->primed) return fail("frame submitted before a prefill");
  if (e->pending >= SLOTS) return fail("%d frames already pending", SLOTS);
  if (e->npre + e->frame + 1 > e->maxpos) return fail("position %d exceeds the %d-position cache", e->npre + e->frame, e->maxpos);
  CK(cudaSetDevice(e->dev));
  e->P.arg.use_teacher = teacher != nullptr;
  if (teacher)
    for (int k = 0; k < e->P.w.G; k++) {
      const int lim = k == 0 ? e->P.w.V : e->P.w.Vp;
      if (teacher[k] < 0 || teacher[k] >= lim) return fail("teacher code %d of group %d outside 0..%d", teacher[k], k, lim - 1);
      e->P.arg.teacher[k] = teacher[k];
    }
  const int slot = (e->head + e->pending) % SLOTS;
  e->P.arg.out = e->d_out + slot * OUTW;
  e->P.arg.early_seq = e->slot_seq[slot] = ++e->seq;
  if (submit_kind(e, MODE_FRAME, 0)) return -1;
  CK(cudaMemcpyAsync(e->h_out + slot * OUTW, e->P.arg.out, OUTW * 4, cudaMemcpyDeviceToHost, e->stream));
  CK(cudaEventRecord(e->ev[slot], e->stream));
  e->pending++;
  e->frame++;
  return 0;
}

int tb_frame_codes(tb_engine* e, int32_t* codes) {
  if (!e || !codes) return fail(e ? "tb_frame_codes: null codes" : "no engine");
  if (e->pending == 0) return fail("no frame pending");
  CK(cudaSetDevice(e->dev));
  const int slot = e->head, want = e->slot_seq[slot];
  volatile int32_t* pub = e->h_early;
  for (int spins = 0;; spins++) {
    // A seqlock: the kernel zeroes the sequence word, writes the codes, then
    // the sequence (system-scope fences between); a copy taken between two
    // equal reads of it is whole.
    const int s1 = __atomic_load_n(&e->h_early[0], __ATOMIC_ACQUIRE);
    if (s1 == want) {
      int32_t c[EARLYW];
      for (int k = 0; k < EARLYW; k++) c[k] = pub[k];
      __atomic_thread_fence(__ATOMIC_ACQUIRE);
      if (__atomic_load_n(&e->h_early[0], __ATOMIC_ACQUIRE) == want) {
        if (c[1 + MAXG]) return fail("frame: no finite logit to sample from");
        for (int k = 0; k < e->P.w.G; k++) codes[k] = c[1 + k];
        return 0;
      }
    }
    // Overwritten by a later frame, or the launch is over: the full copy has
    // the same codes.
    const cudaError_t q = (spins & 63) == 63 || (s1 > want) ? cudaEventQuery(e->ev[slot]) : cudaErrorNotReady;
    if (q == cudaSuccess || s1 > want) {
      CK(cudaEventSynchronize(e->ev[slot]));
      const int32_t* o = e->h_out + slot * OUTW;
      if (o[17]) return fail("frame: no finite logit to sample from");
      for (int k = 0; k < e->P.w.G; k++) codes[k] = o[k];
      return 0;
    }
    if (q != cudaErrorNotReady) return fail("frame: %s", cudaGetErrorString(q));
    if (spins > 4096) sched_yield();
  }
}

int tb_frame_wait(tb_engine* e, int32_t* codes, int32_t* next_g0) {
  if (!e) return fail("no engine");
  if (e->pending == 0) return fail("no frame pending");
  CK(cudaSetDevice(e->dev));
  const int slot = e->head;
  CK(cudaEventSynchronize(e->ev[slot]));
  e->head = (e->head + 1) % SLOTS;
  e->pending--;
  const int32_t* o = e->h_out + slot * OUTW;
  if (o[17]) return fail("frame: no finite logit to sample from");
  if (codes)
    for (int k = 0; k < e->P.w.G; k++) codes[k] = o[k];
  if (next_g0) *next_g0 = o[16];
  return 0;
}

int tb_read_logits(tb_engine* e, float* talker, float* hidden, float* predictor) {
  if (!e) return fail("no engine");
  CK(cudaSetDevice(e->dev));
  if (e->pending) return fail("tb_read_logits with frames pending");
  if (talker) CK(cudaMemcpy(talker, e->P.buf.tlogits, (size_t)e->P.w.V * 4, cudaMemcpyDeviceToHost));
  if (hidden) CK(cudaMemcpy(hidden, e->P.buf.hidden, (size_t)e->Htk * 4, cudaMemcpyDeviceToHost));
  if (predictor)
    CK(cudaMemcpy(predictor, e->P.buf.plogits, (size_t)(e->P.w.G - 1) * e->P.w.Vp * 4, cudaMemcpyDeviceToHost));
  return 0;
}

int tb_sample(tb_engine* e, const float* logits, int n, int frame, int group, int exact, int32_t* out) {
  if (!e || !logits || !out) return fail("tb_sample: null argument");
  if (n <= 0 || n > e->maxV) return fail("tb_sample: %d logits, want 1..%d", n, e->maxV);
  if (e->pending) return fail("tb_sample with frames pending");
  CK(cudaSetDevice(e->dev));
  float* d;
  int32_t* d_id;
  CK(cudaMalloc(&d, (size_t)n * 4 + 16));
  d_id = reinterpret_cast<int32_t*>(d + n);
  int32_t id = -2;
  const size_t smem = SM_XS + sample_region_bytes(n);
  // Past 48 KB of dynamic shared memory (a 3072-entry vocabulary) a kernel must opt in.
  cudaError_t err = cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err == cudaSuccess) err = cudaMemcpyAsync(d, logits, (size_t)n * 4, cudaMemcpyHostToDevice, e->stream);
  if (err == cudaSuccess) {
    sample_kernel<<<1, NT, smem, e->stream>>>(e->P, d, n, frame, group, exact != 0, d_id);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpyAsync(&id, d_id, 4, cudaMemcpyDeviceToHost, e->stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(e->stream);
  cudaFree(d);
  if (err != cudaSuccess) return fail("tb_sample: %s", cudaGetErrorString(err));
  *out = id;
  return 0;
}

int tb_bench(tb_engine* e, int what, int iters, float* ms) {
  if (!e || !ms || iters <= 0) return fail("tb_bench: bad arguments");
  if (!e->primed) return fail("tb_bench needs a prefill first");
  if (e->pending) return fail("tb_bench with frames pending");
  CK(cudaSetDevice(e->dev));
  std::vector<cudaEvent_t> ev(iters + 1);
  for (auto& x : ev) CK(cudaEventCreate(&x));
  const int frame0 = e->frame;
#if TB_PROF
  CK(cudaMemsetAsync(e->P.dbg.prof, 0, PROF_WORDS * 8, e->stream));
#endif
  e->P.arg.use_teacher = 0;
  e->P.arg.out = e->d_out + SLOTS * OUTW;
  int rc = 0;
  CK(cudaEventRecord(ev[0], e->stream));
  for (int i = 0; i < iters && rc == 0; i++) {
    switch (what) {
      case TB_BENCH_TALKER_STEP:
        rc = submit_kind(e, MODE_TALKER, 0);
        break;
      case TB_BENCH_PREDICTOR_STEP:
        rc = submit_kind(e, MODE_PREDICTOR, 1 + i % (e->P.w.G - 1));
        break;
      case TB_BENCH_FRAME:
        if (e->npre + e->frame + 1 > e->maxpos) {
          rc = fail("bench ran past the %d-position cache", e->maxpos);
          break;
        }
        rc = submit_kind(e, MODE_FRAME, 0);
        e->frame++;
        break;
      case TB_BENCH_PREFILL:
        rc = run_prefill_launches(e);
        break;
      default:
        rc = fail("unknown bench kind %d", what);
    }
    if (rc == 0) CK(cudaEventRecord(ev[i + 1], e->stream));
  }
  cudaError_t se = cudaStreamSynchronize(e->stream);
  for (int i = 0; i < iters && rc == 0 && se == cudaSuccess; i++) cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]);
  for (auto& x : ev) cudaEventDestroy(x);
#if TB_PROF
  if (se == cudaSuccess && rc == 0) {
    unsigned long long h[PROF_WORDS];
    if (cudaMemcpy(h, e->P.dbg.prof, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess && h[PROF_WORDS - 1] > 0) {
      const double n = (double)h[PROF_WORDS - 1];
      const double ghz = (double)h[PROF_WORDS - 3] / (double)h[PROF_WORDS - 2];
      static const char* names[NPH] = {"qkv", "attn", "o", "gateup", "down", "head", "sample", "proj", "other", "s-load", "s-kth", "s-comp",
                                       "a-rope", "a-kv", "a-ctx"};
      fprintf(stderr, "prof kind=%d do_sample=%d/%d launches=%.0f clock=%.3fGHz launch=%.2fus (CTA 0, us per launch: work / barrier wait)\n",
              what, e->P.arg.st.do_sample, e->P.arg.sp.do_sample, n, ghz, h[PROF_WORDS - 2] / n / 1e3);
      for (int st = 0; st < 2; st++) {
        double tw = 0, tb = 0;
        for (int ph = 0; ph < NPH; ph++) {
          const double w = h[(st * NPH + ph) * 2] / n / ghz / 1e3, b = h[(st * NPH + ph) * 2 + 1] / n / ghz / 1e3;
          tw += w;
          tb += b;
          if (w + b > 0) fprintf(stderr, "prof   %s %-7s %9.2f %9.2f\n", st ? "cp" : "tk", names[ph], w, b);
        }
        if (tw + tb > 0) fprintf(stderr, "prof   %s total   %9.2f %9.2f\n", st ? "cp" : "tk", tw, tb);
      }
    }
  }
#endif
  if (what != TB_BENCH_FRAME) e->frame = frame0;
  if (se != cudaSuccess) return fail("bench: %s", cudaGetErrorString(se));
  return rc;
}

int tb_project_text(tb_engine* e, const float* x, int rows, float* out) {
  if (!e || !x || !out) return fail("tb_project_text: null argument");
  if (!e->tp.ready()) return fail("tb_project_text: the engine was created without the text projection weights");
  if (rows <= 0) return fail("tb_project_text: %d rows, want at least 1", rows);
  CK(cudaSetDevice(e->dev));
  const char* what = "";
  // On Hopper both Linears run on gemm_staged, its K split from the column
  // tiles alone: a row's bits do not depend on the rows beside it, and its
  // weights are read once for 64 rows where linear_bf16 re-reads them every
  // 8 (which made the text projections of 64 prompts at once wait ~16 ms
  // for one another, H100). Its 16-byte loads need widths of 8.
  const bool staged = e->clusters && e->tp.textH % 8 == 0 && e->tp.H % 8 == 0;
  SplitK sk{};
  sk.sms = e->sms;
  sk.clusters = true;
  const auto linear = [&](bool silu, const uint16_t* W, const uint16_t* b, const float* in, int n, int K, int N,
                          float* y, cudaStream_t s) -> cudaError_t {
    if (!staged)
      return (silu ? tbtp::launch_linear<true> : tbtp::launch_linear<false>)(K % 8 == 0, W, b, in, n, K, N, y, s);
    pf::GemmArgs g{W, nullptr, N, K, in, K, n, y, N};
    g.bias = b;
    (silu ? staged_run<pf::EPI_BIAS_SILU> : staged_run<pf::EPI_BIAS>)(s, g, sk);
    return cudaGetLastError();
  };
  const cudaError_t err = e->tp.run(x, rows, out, &what, linear);
  if (err != cudaSuccess) return fail("tb_project_text: %s: %s", what, cudaGetErrorString(err));
  return 0;
}

}  // extern "C"

#include "batch_host.cuh"
