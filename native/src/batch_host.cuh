// Host side of the batched decode (batch.cuh): slots, admission, the step's
// launches and the tb_batch_* functions of talkbox_native.h. Included at the
// end of engine.cu (one compilation unit: it uses the engine's weights,
// helpers and tensor-core layer loop).
#include "batch.cuh"

struct tb_batch : DeviceMem {
  tb_engine* e = nullptr;
  int cap = 0, tcap = 0;       // slots, talker positions a slot holds
  int H = 0, Hp = 0, V = 0, Vp = 0, G = 0;
  bt::Slots s{};
  Params* d_prm = nullptr;      // [cap]
  std::vector<Params> prm;      // host copies
  std::vector<char> used;       // slot -> in use
  std::vector<int> last_row;    // slot -> its row of tlog in the last work (>= cap: its prefill)
  std::vector<int> pos;         // slot -> the talker position of its next step
  std::vector<float*> trail;    // slot -> its text rows
  std::vector<size_t> trail_cap;
  float* pad = nullptr;         // [cap][H]
  uint32_t* hist = nullptr;     // [cap][hist_words]
  size_t hist_words = 0;
  double* scratch = nullptr;    // sampler scratch [2 cap][2 maxV]
  int32_t* d_rows = nullptr;    // [2 cap] rows of a step (slot of each row)
  int32_t* d_prow = nullptr;    // admissions' prompt rows: positions, slots, first rows [3][prow_cap]
  int prow_cap = 0;
  int32_t* h_rows = nullptr;    // pinned staging of the row list
  int32_t* h_out = nullptr;     // pinned [cap][OUTW]
  int32_t* h_teach = nullptr;   // pinned [cap][1 + MAXG]
  // The step's work buffers, 2 cap rows (the predictor's first step).
  float *x = nullptr, *xin = nullptr, *in = nullptr, *qkv = nullptr, *mlp = nullptr, *hn = nullptr;
  float *tlog = nullptr, *plog = nullptr;  // [2 cap][V] (steps' rows, then admissions'), [cap][G - 1][Vp]
  SplitK sk;                               // the step's products' split-K scratch
  PrefillBuffers prompt_work;              // the admissions' prompts
  cudaEvent_t done = nullptr;
  // A step's launches as a CUDA graph for each row count (captured on first
  // use on their own stream, launched on the engine's): some 900 small
  // launches a frame, whose launch overhead is most of a small batch's step.
  // They hold the step's work buffers' addresses, which never move.
  cudaStream_t capture = nullptr;
  std::vector<cudaGraphExec_t> graphs;  // [cap + 1], by row count

  ~tb_batch() {
    if (!e) return;
    cudaSetDevice(e->dev);
    cudaStreamSynchronize(e->stream);
    for (cudaGraphExec_t g : graphs)
      if (g) cudaGraphExecDestroy(g);
    if (capture) cudaStreamDestroy(capture);
    if (done) cudaEventDestroy(done);
    for (void* p : {(void*)h_rows, (void*)h_out, (void*)h_teach})
      if (p) cudaFreeHost(p);
    for (float* t : trail)
      if (t) cudaFree(t);
    free_all();
  }
};

namespace {

// Bytes a slot needs on the device: its caches, history, hidden state,
// tts_pad row and sampler view (its text rows come on admission).
size_t batch_slot_bytes(const tb_engine* e, int tcap) {
  const StackD& T = e->P.w.tk;
  const StackD& C = e->P.w.cp;
  return 2 * 2 * ((size_t)T.L * T.nkv * tcap * HD + (size_t)C.L * C.nkv * MAXG * HD) +
         (size_t)(e->P.w.V + 31) / 32 * 4 + 2 * (size_t)e->Htk * 4 + sizeof(Params) + (1 + MAXG + bt::OUTW + 3) * 4;
}

// The GEMMs' shape rules (gemm_run): K and N in multiples of 8.
// bt::rope_attend gives the k head and each q head of a kv head's group a
// warp of its own, for two rows at once.
bool batch_fits(const StackD& S) { return S.H % 8 == 0 && S.I % 8 == 0 && 2 * (S.nh / S.nkv + 1) <= bt::AW; }

// The sampler kernel's dynamic shared memory for vocabulary V.
size_t batch_sample_smem(int V) { return SM_XS + sample_region_bytes(V); }

// next: SAMPLE_PREDICTOR's rows for the next step (bt::sample).
void batch_sample(tb_batch* b, cudaStream_t st, const int32_t* rows, int n, const float* logits, size_t ld, int V,
                  int kind, int j, bool dependent = false, float* next = nullptr) {
  launch_ex(dependent, 1, bt::sample, n, NT, batch_sample_smem(V), st, b->s, rows, logits, ld, V, kind, j, b->H, next);
}

// One stack (talker or predictor) over the rows of m (its final norm is the
// caller's: it runs on the rows that produce logits).
void batch_stack(tb_batch* b, cudaStream_t st, const StackD& S, const std::vector<LayerD>& layers,
                 const bt::RowMap& m) {
  const int QN = (S.nh + 2 * S.nkv) * HD;
  tc_layers(
      st, S, layers.data(), m.n, b->x, b->in, b->qkv, b->mlp,
      [&](int l, const LayerD& L) {
        launch_ex(b->sk.dependent, 1, bt::rope_attend, m.n / bt::rows_per_stream(m) * S.nkv, bt::AT, 0, st, b->s, m,
                  S, l, L.q_norm, L.k_norm, b->qkv, QN, b->in);
      },
      &b->sk);
}

// The frame of every stream in rows[0..n) (device list b->d_rows): the code
// predictor's 15 steps, then the talker step that samples the next group 0.
int batch_frame(tb_batch* b, cudaStream_t st, int n) {
  tb_engine* e = b->e;
  const WeightsD& w = e->P.w;
  const StackD& T = w.tk;
  const StackD& C = w.cp;
  const int H = b->H, Hp = b->Hp;
  const bool dep = b->sk.dependent;
  // Raw inputs, projected to the predictor's width when it differs (1.7B).
  float* raw = w.proj_w ? b->xin : b->x;
  launch_ex(dep, 1, bt::predictor_input, n, pf::PT, 0, st, b->s, b->d_rows, w, H, raw);
  for (int j = 1; j < b->G; j++) {
    const int rows = j == 1 ? 2 * n : n;
    if (w.proj_w) {
      gemm_run<pf::EPI_STORE>(st, {w.proj_w, nullptr, Hp, H, b->xin, H, rows, b->x, Hp}, &b->sk);
      launch_ex(dep, 1, bt::add_bias, std::min(rows * Hp / pf::PT + 1, 1024), pf::PT, 0, st, b->x, rows, Hp, w.proj_b);
    }
    batch_stack(b, st, C, e->cp_layers, bt::RowMap{b->d_rows, rows, 0, j});
    // The step's logits come from each stream's last row: row 2r + 1 at step 1.
    const float* last = j == 1 ? b->x + Hp : b->x;
    const int ld = j == 1 ? 2 * Hp : Hp;
    gemm_run<pf::EPI_STORE, true>(st,
                                  {w.cp_heads + (size_t)(j - 1) * b->Vp * Hp, nullptr, b->Vp, Hp, last, ld, n,
                                   b->plog + (size_t)(j - 1) * b->Vp, (b->G - 1) * b->Vp, C.final_norm, C.eps},
                                  &b->sk);
    // The sampler writes the next step's raw rows, after the last group the talker's input.
    batch_sample(b, st, b->d_rows, n, b->plog + (size_t)(j - 1) * b->Vp, (size_t)(b->G - 1) * b->Vp, b->Vp,
                 bt::SAMPLE_PREDICTOR, j, dep, j + 1 < b->G ? raw : b->x);
  }
  batch_stack(b, st, T, e->tk_layers, bt::RowMap{b->d_rows, n, 1, 0});
  launch_ex(dep, 1, pf::rms_rows, n, pf::PT, 0, st, b->x, H, H, T.final_norm, T.eps, b->hn, H);
  launch_ex(dep, 1, bt::scatter_rows, n, pf::PT, 0, st, b->hn, H, b->d_rows, b->s.hidden);
  gemm_run<pf::EPI_STORE>(st, {w.codec_head, nullptr, b->V, H, b->hn, H, n, b->tlog, b->V}, &b->sk);
  batch_sample(b, st, b->d_rows, n, b->tlog, b->V, b->V, bt::SAMPLE_TALKER, 0, dep);
  CK(cudaGetLastError());
  return 0;
}

// The step graph for n rows, captured on first use.
int batch_graph(tb_batch* b, int n) {
  cudaGraphExec_t& ge = b->graphs[n];
  if (ge) return 0;
  cudaGraph_t g = nullptr;
  CK(cudaStreamBeginCapture(b->capture, cudaStreamCaptureModeThreadLocal));
  const int rc = batch_frame(b, b->capture, n);
  const cudaError_t end = cudaStreamEndCapture(b->capture, &g);
  if (rc) {
    if (g) cudaGraphDestroy(g);
    return -1;
  }
  CK(end);
  const cudaError_t inst = cudaGraphInstantiateWithFlags(&ge, g, 0);
  cudaGraphDestroy(g);
  if (inst != cudaSuccess) {
    ge = nullptr;
    return fail("batch step graph: %s", cudaGetErrorString(inst));
  }
  return 0;
}

int batch_check_slot(const tb_batch* b, int slot) {
  if (slot < 0 || slot >= b->cap || !b->used[slot]) return fail("batch slot %d is not in use", slot);
  return 0;
}

}  // namespace

extern "C" {

tb_batch* tb_batch_create(tb_engine* e, int max_streams, int max_positions) {
  if (!e) {
    fail("tb_batch_create: no engine");
    return nullptr;
  }
  if (!batch_fits(e->P.w.tk) || !batch_fits(e->P.w.cp) || e->P.w.V % 8 || e->P.w.Vp % 8) {
    fail("batched decode needs hidden, intermediate and vocabulary sizes in multiples of 8 and at most %d q heads a kv head",
         bt::AW / 2 - 1);
    return nullptr;
  }
  if (max_streams < 0 || max_streams > TB_BATCH_MAX_STREAMS) {
    fail("max_streams %d outside 0..%d", max_streams, TB_BATCH_MAX_STREAMS);
    return nullptr;
  }
  if (max_positions < 16 || max_positions > e->maxpos) {
    fail("max_positions %d outside 16..%d (the engine's)", max_positions, e->maxpos);
    return nullptr;
  }
  if (cudaSetDevice(e->dev) != cudaSuccess) {
    fail("cudaSetDevice: %s", cudaGetErrorString(cudaGetLastError()));
    return nullptr;
  }
  const WeightsD& w = e->P.w;
  const int H = e->Htk, Hp = e->Hcp;
  const int maxV = std::max(w.V, w.Vp);
  // Work buffers for 2 x TB_BATCH_MAX_STREAMS rows at most; the slots take
  // what free memory allows, keeping a quarter of it (and 1 GiB) for the rest.
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    fail("cudaMemGetInfo: %s", cudaGetErrorString(cudaGetLastError()));
    return nullptr;
  }
  const size_t per = batch_slot_bytes(e, max_positions);
  const size_t keep = std::max<size_t>(free_b / 4, (size_t)1 << 30);
  const size_t fit = free_b > keep ? (free_b - keep) / per : 0;
  const int want = max_streams ? max_streams : TB_BATCH_MAX_STREAMS;
  const int cap = (int)std::min<size_t>(want, fit);
  if (cap < 1) {
    fail("no room for a batch stream: %zu MiB free, %zu MiB a stream of %d positions", free_b >> 20, per >> 20,
         max_positions);
    return nullptr;
  }
  auto* b = new tb_batch();
  b->e = e;
  auto bail = [&]() -> tb_batch* {
    std::string keep_err = g_err;
    delete b;
    g_err = keep_err;
    return nullptr;
  };
  b->cap = cap;
  b->tcap = max_positions;
  b->H = H;
  b->Hp = Hp;
  b->V = w.V;
  b->Vp = w.Vp;
  b->G = w.G;
  const StackD& T = w.tk;
  const StackD& C = w.cp;
  b->s.tcap = max_positions;
  b->s.tk_slot = (size_t)T.L * T.nkv * max_positions * HD;
  b->s.cp_slot = (size_t)C.L * C.nkv * MAXG * HD;
  b->hist_words = (size_t)(w.V + 31) / 32;
  const int rows = 2 * cap;
  const int maxW = std::max(H, Hp);
  const int QN = std::max((T.nh + 2 * T.nkv) * HD, (C.nh + 2 * C.nkv) * HD);
  const int AOmax = std::max(T.nh, C.nh) * HD;
  const int Imax = std::max(T.I, C.I);
  if (b->alloc(&b->s.codes, (size_t)cap * MAXG) || b->alloc(&b->s.tpos, cap) || b->alloc(&b->s.frame, cap) ||
      b->alloc(&b->s.out, (size_t)cap * bt::OUTW) || b->alloc(&b->s.teach, (size_t)cap * (1 + MAXG)) ||
      b->alloc(&b->s.hidden, (size_t)cap * H) || b->alloc(&b->s.tk_k, b->s.tk_slot * cap) ||
      b->alloc(&b->s.tk_v, b->s.tk_slot * cap) || b->alloc(&b->s.cp_k, b->s.cp_slot * cap) ||
      b->alloc(&b->s.cp_v, b->s.cp_slot * cap) || b->alloc(&b->d_prm, cap) || b->alloc(&b->pad, (size_t)cap * H) ||
      b->alloc(&b->hist, b->hist_words * cap) || b->alloc(&b->scratch, (size_t)rows * 2 * maxV) ||
      b->alloc(&b->d_rows, rows) || b->alloc(&b->x, (size_t)rows * maxW) || b->alloc(&b->xin, (size_t)rows * H) ||
      b->alloc(&b->in, (size_t)rows * std::max(maxW, AOmax)) || b->alloc(&b->qkv, (size_t)rows * QN) ||
      b->alloc(&b->mlp, (size_t)rows * Imax) || b->alloc(&b->hn, (size_t)rows * maxW) ||
      b->alloc(&b->tlog, (size_t)2 * cap * w.V) || b->alloc(&b->plog, (size_t)cap * (w.G - 1) * w.Vp))
    return bail();
  // Split K only where the tiles are fewer than the SMs, into about one CTA
  // an SM: at most 2 sms slices' partials of the largest tile shape.
  b->sk.sms = e->sms;
  b->sk.ws_floats = (size_t)2 * e->sms * pf::split_partials(4, 2, true);
  b->sk.clusters = e->clusters;
  b->sk.wgmma = e->wgmma;
  b->sk.dependent = e->clusters;
  if (b->alloc(&b->sk.ws, b->sk.ws_floats) || b->alloc(&b->sk.tickets, e->sms) ||
      cudaMemset(b->sk.tickets, 0, e->sms * sizeof(unsigned)) != cudaSuccess)
    return bail();
  if (cudaMallocHost(&b->h_rows, rows * sizeof(int32_t)) != cudaSuccess ||
      cudaMallocHost(&b->h_out, (size_t)cap * bt::OUTW * sizeof(int32_t)) != cudaSuccess ||
      cudaMallocHost(&b->h_teach, (size_t)cap * (1 + MAXG) * sizeof(int32_t)) != cudaSuccess ||
      cudaEventCreateWithFlags(&b->done, cudaEventDisableTiming) != cudaSuccess ||
      cudaStreamCreateWithFlags(&b->capture, cudaStreamNonBlocking) != cudaSuccess) {
    fail("batch host buffers: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  memset(b->h_teach, 0, (size_t)cap * (1 + MAXG) * sizeof(int32_t));
  if (cudaMemset(b->s.teach, 0, (size_t)cap * (1 + MAXG) * 4) != cudaSuccess ||
      cudaMemset(b->s.tk_k, 0, b->s.tk_slot * cap * 2) != cudaSuccess ||
      cudaMemset(b->s.tk_v, 0, b->s.tk_slot * cap * 2) != cudaSuccess) {
    fail("cudaMemset: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  b->s.prm = b->d_prm;
  b->prm.assign(cap, e->P);
  b->used.assign(cap, 0);
  b->last_row.assign(cap, -1);
  b->pos.assign(cap, 0);
  b->graphs.assign(cap + 1, nullptr);
  b->trail.assign(cap, nullptr);
  b->trail_cap.assign(cap, 0);
  for (int i = 0; i < cap; i++) {
    Params& p = b->prm[i];
    p.buf.hist = b->hist + b->hist_words * i;
    p.buf.samp_scratch = b->scratch;  // indexed by the sampling CTA
    p.buf.pad = b->pad + (size_t)H * i;
    p.arg.trail = nullptr;
    p.arg.ntrail = 0;
  }
  if (cudaFuncSetAttribute(bt::sample, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)batch_sample_smem(maxV)) !=
      cudaSuccess) {
    fail("batch sampler shared memory: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fail("batch create: %s", cudaGetErrorString(cudaGetLastError()));
    return bail();
  }
  return b;
}

void tb_batch_destroy(tb_batch* b) { delete b; }

int tb_batch_capacity(const tb_batch* b) { return b ? b->cap : 0; }

int tb_batch_add_many(tb_batch* b, const tb_batch_request* req, int k, int* slots, int32_t* g0) {
  if (!b || !req || !slots || !g0) return fail("tb_batch_add_many: null argument");
  if (k < 1 || k > b->cap) return fail("tb_batch_add_many: %d streams, want 1..%d", k, b->cap);
  int total = 0;
  for (int i = 0; i < k; i++) {
    const tb_batch_request& q = req[i];
    if (!q.rows || !q.tts_pad) return fail("stream %d: null prompt", i);
    if (q.n <= 0) return fail("prefill needs at least one row");
    if (q.n >= b->tcap) return fail("prefill of %d rows leaves no room in %d positions", q.n, b->tcap);
    if (q.n_trailing < 0 || (q.n_trailing > 0 && !q.trailing)) return fail("bad trailing rows");
    for (const tb_sampler* t : {&q.talker, &q.predictor}) {
      if (t->do_sample && !(t->temperature > 0.f)) return fail("temperature %g must be > 0", t->temperature);
      if (t->top_k < 0) return fail("top_k %d must be >= 0", t->top_k);
      if (t->do_sample && !(t->top_p > 0.f && t->top_p <= 1.f)) return fail("top_p %g outside (0, 1]", t->top_p);
    }
    total += q.n;
  }
  int found = 0;
  for (int i = 0; i < b->cap && found < k; i++)
    if (!b->used[i]) slots[found++] = i;
  if (found < k) return fail("batch full: %d of %d streams in use, %d asked for", b->cap - found, b->cap, k);
  tb_engine* e = b->e;
  CK(cudaSetDevice(e->dev));
  const cudaStream_t st = e->stream;
  const int H = b->H;
  const StackD& T = e->P.w.tk;
  // The prompts one after another through the talker into their slots'
  // caches, in the admissions' buffers (grown for long prompts; the step's
  // stay where its graphs read them). The products are the step's (b->sk:
  // gemm_staged on Hopper), whose 64-column tiles read the rows' activations a
  // quarter as often as pf::gemm's: 64 prompts of 40 rows 80 -> 48 ms (0.6B,
  // H100). From 256 rows gemm_run takes a kernel made for many rows instead
  // (use_tiles).
  PrefillBuffers& pw = b->prompt_work;
  if (pw.reserve(*b, T, total)) return -1;
  if (total > b->prow_cap) {
    b->prow_cap = 0;
    if (b->regrow(&b->d_prow, (size_t)3 * total)) return -1;
    b->prow_cap = total;
  }
  std::vector<int32_t> prow(3 * (size_t)total);  // per row: position, slot, first row of its prompt
  for (int i = 0, r0 = 0; i < k; r0 += req[i].n, i++) {
    const tb_batch_request& q = req[i];
    const int slot = slots[i];
    const size_t tn = (size_t)std::max(q.n_trailing, 1) * H;
    if (tn > b->trail_cap[slot]) {
      if (b->trail[slot]) cudaFree(b->trail[slot]);
      b->trail[slot] = nullptr;
      b->trail_cap[slot] = 0;
      CK(cudaMalloc(&b->trail[slot], tn * 4));
      b->trail_cap[slot] = tn;
    }
    Params& prm = b->prm[slot];
    prm.arg.st = SamplerD{q.talker.do_sample, q.talker.temperature, q.talker.top_k, q.talker.top_p,
                          q.talker.repetition_penalty};
    prm.arg.sp = SamplerD{q.predictor.do_sample, q.predictor.temperature, q.predictor.top_k, q.predictor.top_p, 1.f};
    prm.arg.seed = q.seed;
    prm.arg.mask_eos = q.mask_eos != 0;
    prm.arg.trail = b->trail[slot];
    prm.arg.ntrail = q.n_trailing;
    CK(cudaMemcpyAsync(b->d_prm + slot, &prm, sizeof(Params), cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(pw.x + (size_t)r0 * H, q.rows, (size_t)q.n * H * 4, cudaMemcpyHostToDevice, st));
    if (q.n_trailing > 0)
      CK(cudaMemcpyAsync(b->trail[slot], q.trailing, (size_t)q.n_trailing * H * 4, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(b->pad + (size_t)H * slot, q.tts_pad, (size_t)H * 4, cudaMemcpyHostToDevice, st));
    CK(cudaMemsetAsync(prm.buf.hist, 0, b->hist_words * 4, st));
    CK(cudaMemsetAsync(b->s.codes + slot * MAXG, 0, MAXG * 4, st));
    CK(cudaMemsetAsync(b->s.teach + slot * (1 + MAXG), 0, (1 + MAXG) * 4, st));
    CK(cudaMemsetAsync(b->s.frame + slot, 0, 4, st));
    CK(cudaMemcpyAsync(b->s.tpos + slot, &q.n, 4, cudaMemcpyHostToDevice, st));
    for (int r = 0; r < q.n; r++) {
      prow[r0 + r] = r;
      prow[total + r0 + r] = slot;
      prow[2 * total + r0 + r] = r0;
    }
  }
  CK(cudaMemcpyAsync(b->d_prow, prow.data(), prow.size() * 4, cudaMemcpyHostToDevice, st));
  const int32_t* pos = b->d_prow;
  const int32_t* pslot = b->d_prow + total;
  const int32_t* first = b->d_prow + 2 * total;
  const int QN = (T.nh + 2 * T.nkv) * HD;
  const int rope_blocks = (total * (T.nh + 2 * T.nkv) + pf::PW - 1) / pf::PW;
  const int attn_blocks = (total * T.nh + pf::PW - 1) / pf::PW;
  SplitK sk = b->sk;
  sk.all_tiles = true;
  tc_layers(st, T, e->tk_layers.data(), total, pw.x, pw.in, pw.qkv, pw.mlp, [&](int l, const LayerD& L) {
    const size_t cache = (size_t)l * T.nkv * b->tcap * HD;
    pf::rope_cache<<<rope_blocks, pf::PT, 0, st>>>({pw.qkv, QN, total, T.nh, T.nkv, L.q_norm, L.k_norm, T.eps, T.rope,
                                                    b->s.tk_k + cache, b->s.tk_v + cache, b->tcap, pos, pslot,
                                                    b->s.tk_slot});
    pf::attend_rows<<<attn_blocks, pf::PT, 0, st>>>(pw.qkv, QN, total, T.nh, T.nkv, pw.in, first);
  }, &sk);
  // Each prompt's last row: its head and group 0 of frame 0; its hidden
  // state is the predictor's first input. Logits into tlog rows cap..cap+k-1
  // (tb_batch_read_logits, until the next admission).
  for (int i = 0, r0 = 0; i < k; r0 += req[i].n, i++)
    pf::rms_rows<<<1, pf::PT, 0, st>>>(pw.x + (size_t)(r0 + req[i].n - 1) * H, H, H, T.final_norm, T.eps,
                                       b->hn + (size_t)i * H, H);
  for (int i = 0; i < k; i++) b->h_rows[i] = slots[i];
  CK(cudaMemcpyAsync(b->d_rows, b->h_rows, (size_t)k * 4, cudaMemcpyHostToDevice, st));
  bt::scatter_rows<<<k, pf::PT, 0, st>>>(b->hn, H, b->d_rows, b->s.hidden);
  float* lg = b->tlog + (size_t)b->cap * b->V;
  gemm_run<pf::EPI_STORE>(st, {e->P.w.codec_head, nullptr, b->V, H, b->hn, H, k, lg, b->V}, &b->sk);
  batch_sample(b, st, b->d_rows, k, lg, b->V, b->V, bt::SAMPLE_PREFILL, 0);
  CK(cudaGetLastError());
  for (int i = 0; i < k; i++)
    CK(cudaMemcpyAsync(b->h_out + slots[i] * bt::OUTW, b->s.out + slots[i] * bt::OUTW, bt::OUTW * 4,
                       cudaMemcpyDeviceToHost, st));
  CK(cudaStreamSynchronize(st));
  for (int i = 0; i < k; i++)
    if (b->h_out[slots[i] * bt::OUTW + 17]) return fail("prefill of stream %d: no finite group-0 logit to sample from", i);
  for (int i = 0; i < k; i++) {
    b->used[slots[i]] = 1;
    b->last_row[slots[i]] = b->cap + i;
    b->pos[slots[i]] = req[i].n;
    g0[i] = b->h_out[slots[i] * bt::OUTW + 16];
  }
  return 0;
}

int tb_batch_remove(tb_batch* b, int slot) {
  if (!b) return fail("no batch");
  if (batch_check_slot(b, slot)) return -1;
  b->used[slot] = 0;
  b->last_row[slot] = -1;
  return 0;
}

int tb_batch_step(tb_batch* b, const int32_t* slots, int n, const int32_t* teacher, int32_t* out) {
  if (!b || !slots || !out) return fail("tb_batch_step: null argument");
  if (n <= 0 || n > b->cap) return fail("tb_batch_step: %d streams, want 1..%d", n, b->cap);
  tb_engine* e = b->e;
  for (int r = 0; r < n; r++) {
    const int slot = slots[r];
    if (batch_check_slot(b, slot)) return -1;
    for (int q = 0; q < r; q++)
      if (slots[q] == slot) return fail("tb_batch_step: slot %d listed twice", slot);
    if (b->pos[slot] + 1 > b->tcap)
      return fail("slot %d: position %d exceeds the %d-position cache", slot, b->pos[slot], b->tcap);
    int32_t* th = b->h_teach + slot * (1 + MAXG);
    th[0] = teacher && teacher[r * MAXG] >= 0;
    for (int k = 0; k < MAXG; k++) {
      const int c = th[0] && k < b->G ? teacher[r * MAXG + k] : 0;
      const int lim = k == 0 ? b->V : b->Vp;
      if (th[0] && k < b->G && (c < 0 || c >= lim))
        return fail("teacher code %d of group %d outside 0..%d", c, k, lim - 1);
      th[1 + k] = c;
    }
    b->h_rows[r] = slot;
  }
  CK(cudaSetDevice(e->dev));
  const cudaStream_t st = e->stream;
  // Positions: checked on the host from the slot's frame count kept below.
  CK(cudaMemcpyAsync(b->d_rows, b->h_rows, n * 4, cudaMemcpyHostToDevice, st));
  CK(cudaMemcpyAsync(b->s.teach, b->h_teach, (size_t)b->cap * (1 + MAXG) * 4, cudaMemcpyHostToDevice, st));
  if (batch_graph(b, n)) return -1;
  CK(cudaGraphLaunch(b->graphs[n], st));
  // Every slot's output in one copy (a few KB): n copies of 72 bytes cost a
  // copy's latency each.
  CK(cudaMemcpyAsync(b->h_out, b->s.out, (size_t)b->cap * bt::OUTW * 4, cudaMemcpyDeviceToHost, st));
  CK(cudaEventRecord(b->done, st));
  CK(cudaEventSynchronize(b->done));
  for (int r = 0; r < n; r++) {
    b->last_row[slots[r]] = r;
    b->pos[slots[r]]++;
    memcpy(out + r * bt::OUTW, b->h_out + slots[r] * bt::OUTW, bt::OUTW * 4);
  }
  return 0;
}

int tb_batch_prepare(tb_batch* b) {
  if (!b) return fail("no batch");
  CK(cudaSetDevice(b->e->dev));
  for (int n = 1; n <= b->cap; n++)
    if (batch_graph(b, n)) return -1;
  return 0;
}

int tb_batch_read_logits(tb_batch* b, int slot, float* talker, float* hidden, float* predictor) {
  if (!b) return fail("no batch");
  if (batch_check_slot(b, slot)) return -1;
  CK(cudaSetDevice(b->e->dev));
  const int r = b->last_row[slot];
  if (talker) CK(cudaMemcpy(talker, b->tlog + (size_t)r * b->V, (size_t)b->V * 4, cudaMemcpyDeviceToHost));
  if (hidden) CK(cudaMemcpy(hidden, b->s.hidden + (size_t)slot * b->H, (size_t)b->H * 4, cudaMemcpyDeviceToHost));
  if (predictor) {
    if (r >= b->cap) return fail("no frame since the prefill of slot %d", slot);
    CK(cudaMemcpy(predictor, b->plog + (size_t)r * (b->G - 1) * b->Vp, (size_t)(b->G - 1) * b->Vp * 4,
                  cudaMemcpyDeviceToHost));
  }
  return 0;
}

}  // extern "C"
