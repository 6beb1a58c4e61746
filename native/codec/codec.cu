// Host side of the streaming codec decoder: weight upload, per-stream state,
// the forward sequence of one push (captured once per push size into a CUDA
// graph), and the C ABI of talkbox_codec.h.
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <array>
#include <vector>

#include "kernels.cuh"
#include "wgmma.cuh"
#include "gemm_rows.cuh"
#include "../src/stream_priority.cuh"
#include "../include/talkbox_codec.h"

using namespace tbc;

namespace {

thread_local char g_err[1024];

void set_err(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_err, sizeof g_err, fmt, ap);
	va_end(ap);
}

#define CK(x)                                                                                                   \
	do {                                                                                                        \
		cudaError_t e_ = (x);                                                                                   \
		if (e_ != cudaSuccess) {                                                                                \
			set_err("%s: %s (%s:%d)", #x, cudaGetErrorString(e_), __FILE__, __LINE__);                        \
			return -1;                                                                                          \
		}                                                                                                       \
	} while (0)

// Frames per graph launch: a push of more frames runs in sub-pushes of at
// most this many. It sizes every per-stream buffer (~6 MB per frame at the
// released shapes) and the K/V ring (window - 1 + kMaxT rows).
constexpr int kMaxT = 8;

struct DevLayer {
	float *in_norm, *post_norm, *attn_scale, *mlp_scale;
	float *wqkv, *wo, *wgu, *wdown; // [q;k;v], o, [gate;up], down
};
struct DevConv {
	float *w = nullptr, *b = nullptr;
	// w rounded to nearest TF32, for k_gemm_wg (its tensor cores read W
	// from shared memory and would truncate it): convolutions of several
	// taps on a device with wgmma only.
	float *wt = nullptr;
	int in = 0, out = 0, k = 1, dil = 1;
};
struct DevUp {
	DevConv up; // transposed conv as a conv: k = taps, out = stride*latent
	int stride = 1;
	float *dw, *dw_b, *ln_w, *ln_b, *gamma;
	DevConv pw1, pw2;
};
struct DevSnake {
	float *a, *ib;
};
struct DevUnit {
	DevSnake act1, act2;
	DevConv conv1, conv2;
};
struct DevBlock {
	DevSnake act;
	DevConv up;
	int stride = 1, out = 0;
	DevUnit units[3];
};

} // namespace

struct tbc_model {
	int device = 0, sms = 1;
	// Dynamic shared memory that leaves room for one CTA an SM of
	// k_gemm_tc<64, 64, true> and <128, 32, true> (tbc_pool::one_cta_per_sm);
	// 0 where the device does not allow it.
	size_t tc_pad[2] = {0, 0};
	// wg_bytes: k_gemm_wg<96> and <128>'s dynamic shared memory, alone and
	// one CTA an SM; 0 where this build or device has no wgmma (the
	// products of several streams then run on k_gemm_tc).
	size_t wg_bytes[2][2] = {{0, 0}, {0, 0}};
	bool clusters = false; // thread-block clusters (sm_90 and later): k_gemm_rows
	bool cuda_graphs = true; // tbc_params.cuda_graphs, for its streams
	tbc_weights cfg; // shapes only: the host pointers are not kept
	int spf = 0, qkvw = 0;
	std::vector<void *> allocs;
	float *books = nullptr, *proj = nullptr, *inv_freq = nullptr;
	DevConv pre_conv, in_proj, out_proj;
	float *final_norm = nullptr;
	std::vector<DevLayer> layers;
	std::vector<DevUp> ups;
	DevConv voc0;
	std::vector<DevBlock> blocks;
	DevSnake final_act;
	DevConv final_conv;
};

namespace {

// Ext is a causal op's input: per slot, H history rows then room for the new
// rows of a push of up to kMaxT frames (R0 rows a frame), rows C wide. Slot
// i starts i·slotRows() rows after slot 0.
struct Ext {
	float *p = nullptr;
	int C = 0, H = 0, R0 = 0;
	int slotRows() const { return H + kMaxT * R0; }
};

// Member counts a pool captures graphs for: those of kBuckets below its
// slot count, then the slot count. A push of n streams runs as the smallest
// bucket >= n, the extra members decoding zeros into the scratch slot.
// Powers of two and 1.5 times them waste at most a third.
constexpr int kBuckets[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192};
constexpr int kMaxSlots = 256;
// The widest launch whose tensor-core products run one CTA an SM (tbc_pool::one_cta_per_sm).
constexpr int kOneCtaMaxStreams = 16;

} // namespace

// tbc_pool holds the decoder state of up to `slots` streams in slotted
// arrays (one more slot, the scratch, when slots > 1) and the dense scratch
// buffers of one push of every slot at once.
struct tbc_pool {
	tbc_model *m = nullptr;
	cudaStream_t st = nullptr;       // pushes (PRIO_CODEC)
	cudaStream_t st_first = nullptr; // resets and a stream's first push (PRIO_LM)
	std::vector<char> fresh;         // [slots]: reset, not pushed since
	bool dry = false, use_graph = true;
	int slots = 0, nslots = 0; // usable slots; allocated (with the scratch)
	std::vector<int> buckets;  // ascending, the last is slots
	size_t ws_need = 0, ws_floats = 0;
	float *ws = nullptr;
	// one_pass: the launch being issued decodes several streams, and its
	// tensor-core products take one TF32 pass (k_gemm_tc); a stream alone
	// keeps float32-accurate products.
	bool one_pass = false;
	// one_cta_per_sm: the launch being issued decodes 2..kOneCtaMaxStreams
	// streams, and its tensor-core products ask for enough shared memory
	// (tbc_model::tc_pad) that an SM holds one of their CTAs, not three. The
	// batched LM step runs beside these launches, and each of its ~550 short
	// kernels waits for SMs that the codec's CTAs (tens of us each) hold; with
	// one codec CTA an SM, an LM CTA always fits beside it (H100, 16 streams at
	// once end to end: RTF 0.0732-0.0738 -> 0.0709-0.0713, 1.7B 0.0863 ->
	// 0.0823, though the 16-stream launch alone takes 2.48 -> 2.95 ms). Wider
	// launches are the larger share of a frame and need the throughput: 32
	// streams 0.1019 -> 0.1431, 64: 0.162 -> 0.199 with it.
	bool one_cta_per_sm = false;
	// dependent: the launch being issued decodes one stream, and its kernels
	// start while the one before them ends (dep_launch.cuh). H100, one
	// launch of B streams' frames: B = 1 1.06 -> 1.00 ms, but 16 streams
	// 2.47 -> 2.59 and 64 6.34 -> 6.49, so wider launches keep plain ones.
	bool dependent = false;
	int64_t *d_pos = nullptr;                   // [nslots]
	int32_t *d_in = nullptr, *h_in = nullptr;   // a push's codes [B][T][16], then its slots [B]
	float *d_out = nullptr, *h_out = nullptr;   // [maxB][kMaxT·spf]
	float *z = nullptr, *x0 = nullptr, *h = nullptr, *qkv = nullptr, *att = nullptr, *gu = nullptr, *tn = nullptr,
	      *ln = nullptr, *pw = nullptr, *xr = nullptr, *a2 = nullptr;
	float *kc = nullptr, *vc = nullptr; // [nslots][layers][cap][kv width]
	int cap = 0;
	size_t kvSlot = 0; // floats of one slot's K (or V) ring, all layers
	Ext pre, voc0, fin;
	std::vector<Ext> upin, dw, tc;
	std::vector<std::array<Ext, 3>> unit;
	std::vector<Ext *> exts; // every Ext above, for reset
	std::vector<void *> allocs;
	std::vector<std::array<cudaGraphExec_t, kMaxT + 1>> graphs; // [bucket][frames]
	cudaEvent_t ev0 = nullptr, ev1 = nullptr;
};

namespace {

int dev_alloc(std::vector<void *> &list, float **p, size_t n) {
	void *q = nullptr;
	CK(cudaMalloc(&q, std::max<size_t>(n, 1) * sizeof(float)));
	list.push_back(q);
	*p = (float *)q;
	return 0;
}

int upload(tbc_model *m, float **dst, const float *src, size_t n, const char *what) {
	if (!src) {
		set_err("codec weights: %s is missing", what);
		return -1;
	}
	if (dev_alloc(m->allocs, dst, n)) return -1;
	CK(cudaMemcpy(*dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
	return 0;
}

int upload_vec(tbc_model *m, float **dst, const std::vector<float> &v) {
	if (dev_alloc(m->allocs, dst, v.size())) return -1;
	CK(cudaMemcpy(*dst, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
	return 0;
}

// upload_tf32 gives a conv of several taps, whose weights d.w are on the
// device, their copy rounded to nearest TF32 (DevConv::wt) where k_gemm_wg
// may take it: ~50 M such weights (~200 MB at the released shapes), rounded
// on the device. Rounding them in k_gemm_wg's shared memory, at every tile,
// cost ~0.1 ms of a launch of 64 streams (docs/dev/batch.md).
int upload_tf32(tbc_model *m, DevConv &d) {
	if (d.k < 2 || !m->wg_bytes[0][0]) return 0;
	const size_t n = (size_t)d.out * d.k * d.in;
	if (dev_alloc(m->allocs, &d.wt, n)) return -1;
	k_round_tf32<<<(unsigned)std::min<size_t>((n + 255) / 256, 4096), 256>>>(d.w, d.wt, n);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(0)); // the pools' streams do not wait for the default stream
	return 0;
}

int up_conv(tbc_model *m, DevConv &d, const tbc_conv &c, int in, int out, const char *what) {
	if (c.in != in || c.out != out || c.k < 1 || c.dil < 1) {
		set_err("codec weights: %s is %dx%d k%d d%d, want in %d out %d", what, c.in, c.out, c.k, c.dil, in, out);
		return -1;
	}
	d.in = in, d.out = out, d.k = c.k, d.dil = c.dil;
	if (upload(m, &d.w, c.w, (size_t)out * c.k * in, what) || upload_tf32(m, d)) return -1;
	if (c.b && upload(m, &d.b, c.b, out, what)) return -1;
	return 0;
}

// A transposed conv (k = taps*stride) becomes a causal conv with k = taps
// over its input, out = stride*out: the host rows hold [tap for x[t] | tap
// for x[t-1]], and the ext buffer gives x[t-1] first, so the halves swap.
int up_transconv(tbc_model *m, DevConv &d, const tbc_transconv &t, int in, const char *what) {
	if (t.in != in || t.taps < 1 || t.taps > 2 || t.stride < 1 || !t.w || !t.b) {
		set_err("codec weights: %s: in %d taps %d stride %d, want in %d, taps 1 or 2", what, t.in, t.taps, t.stride,
		        in);
		return -1;
	}
	const int N = t.stride * t.out, K = t.taps * in;
	std::vector<float> w((size_t)N * K);
	for (int n = 0; n < N; n++) {
		const float *src = t.w + (size_t)n * K;
		float *dst = w.data() + (size_t)n * K;
		if (t.taps == 1) {
			memcpy(dst, src, sizeof(float) * K);
		} else {
			memcpy(dst, src + in, sizeof(float) * in);
			memcpy(dst + in, src, sizeof(float) * in);
		}
	}
	d.in = in, d.out = N, d.k = t.taps, d.dil = 1;
	if (upload_vec(m, &d.w, w) || upload_tf32(m, d)) return -1;
	return upload(m, &d.b, t.b, N, what);
}

int up_snake(tbc_model *m, DevSnake &s, const tbc_snake &h, int ch, const char *what) {
	if (upload(m, &s.a, h.a, ch, what)) return -1;
	return upload(m, &s.ib, h.ib, ch, what);
}

// cat stacks row blocks of matrices with the same K (rows [a; b; c]).
std::vector<float> cat_rows(std::initializer_list<std::pair<const float *, size_t>> parts) {
	std::vector<float> v;
	for (auto &p : parts) v.insert(v.end(), p.first, p.first + p.second);
	return v;
}

// k_attn's shared memory at the largest head_dim and window build_model takes.
static_assert(attn_smem(1024, 4096) <= 48 * 1024, "k_attn needs no opt-in shared memory");

int build_model(tbc_model *m, const tbc_weights *w) {
	m->cfg = *w;
	const tbc_weights &c = *w;
	if (c.codebook_size < 1 || c.cb_dim < 1 || c.codebook_dim < 1 || c.latent < 1 || c.hidden < 1 || c.heads < 1 ||
	    c.kv_heads < 1 || c.heads % c.kv_heads || c.head_dim < 4 || c.head_dim % 4 || c.head_dim > 1024 ||
	    c.intermediate < 1 || c.layers < 0 || c.layers > TBC_MAX_LAYERS || c.window < 1 || c.window > 4096 ||
	    c.n_up < 0 || c.n_up > TBC_MAX_UP || c.n_blocks < 1 || c.n_blocks > TBC_MAX_BLOCKS) {
		set_err("codec config out of range (layers %d, up %d, blocks %d, head_dim %d, window %d)", c.layers, c.n_up,
		        c.n_blocks, c.head_dim, c.window);
		return -1;
	}
	// Codebooks in one [16][rows][cb] array; the two 1x1 projections as one [W_first | W_rest].
	size_t book = (size_t)c.codebook_size * c.cb_dim;
	std::vector<float> books(book * TBC_GROUPS);
	for (int q = 0; q < TBC_GROUPS; q++) {
		if (!c.codebooks[q]) {
			set_err("codec weights: codebook %d is missing", q);
			return -1;
		}
		memcpy(books.data() + q * book, c.codebooks[q], book * sizeof(float));
	}
	if (upload_vec(m, &m->books, books)) return -1;
	if (!c.proj_first || !c.proj_rest) {
		set_err("codec weights: quantizer output projections are missing");
		return -1;
	}
	std::vector<float> proj((size_t)c.codebook_dim * 2 * c.cb_dim);
	for (int n = 0; n < c.codebook_dim; n++) {
		memcpy(&proj[(size_t)n * 2 * c.cb_dim], c.proj_first + (size_t)n * c.cb_dim, c.cb_dim * sizeof(float));
		memcpy(&proj[(size_t)n * 2 * c.cb_dim + c.cb_dim], c.proj_rest + (size_t)n * c.cb_dim, c.cb_dim * sizeof(float));
	}
	if (upload_vec(m, &m->proj, proj)) return -1;
	if (up_conv(m, m->pre_conv, c.pre_conv, c.codebook_dim, c.latent, "pre_conv")) return -1;

	tbc_conv lin = {c.in_proj_w, c.in_proj_b, c.latent, c.hidden, 1, 1};
	if (up_conv(m, m->in_proj, lin, c.latent, c.hidden, "pre_transformer.input_proj")) return -1;
	lin = {c.out_proj_w, c.out_proj_b, c.hidden, c.latent, 1, 1};
	if (up_conv(m, m->out_proj, lin, c.hidden, c.latent, "pre_transformer.output_proj")) return -1;
	if (upload(m, &m->final_norm, c.final_norm, c.hidden, "pre_transformer.norm")) return -1;
	if (upload(m, &m->inv_freq, c.inv_freq, c.head_dim / 2, "rope inv_freq")) return -1;
	const size_t H = c.hidden, A = (size_t)c.heads * c.head_dim, KV = (size_t)c.kv_heads * c.head_dim,
	             I = c.intermediate;
	m->qkvw = (int)(A + 2 * KV);
	for (int l = 0; l < c.layers; l++) {
		const tbc_layer &L = c.layer[l];
		if (!L.q || !L.k || !L.v || !L.o || !L.gate || !L.up || !L.down) {
			set_err("codec weights: pre_transformer layer %d is incomplete", l);
			return -1;
		}
		DevLayer d{};
		if (upload(m, &d.in_norm, L.in_norm, H, "input_layernorm") ||
		    upload(m, &d.post_norm, L.post_norm, H, "post_attention_layernorm") ||
		    upload(m, &d.attn_scale, L.attn_scale, H, "self_attn_layer_scale") ||
		    upload(m, &d.mlp_scale, L.mlp_scale, H, "mlp_layer_scale") ||
		    upload_vec(m, &d.wqkv, cat_rows({{L.q, A * H}, {L.k, KV * H}, {L.v, KV * H}})) ||
		    upload(m, &d.wo, L.o, H * A, "o_proj") || upload_vec(m, &d.wgu, cat_rows({{L.gate, I * H}, {L.up, I * H}})) ||
		    upload(m, &d.wdown, L.down, H * I, "down_proj"))
			return -1;
		m->layers.push_back(d);
	}
	const int Lt = c.latent;
	for (int i = 0; i < c.n_up; i++) {
		const tbc_upsample &u = c.up[i];
		DevUp d{};
		char name[64];
		snprintf(name, sizeof name, "upsample.%d", i);
		if (u.up.out != Lt || up_transconv(m, d.up, u.up, Lt, name)) {
			if (u.up.out != Lt) set_err("codec weights: %s: out %d, want %d", name, u.up.out, Lt);
			return -1;
		}
		d.stride = u.up.stride;
		if (upload(m, &d.dw, u.dw, (size_t)Lt * 7, name) || upload(m, &d.dw_b, u.dw_b, Lt, name) ||
		    upload(m, &d.ln_w, u.ln_w, Lt, name) || upload(m, &d.ln_b, u.ln_b, Lt, name) ||
		    upload(m, &d.gamma, u.gamma, Lt, name))
			return -1;
		tbc_conv p1 = {u.pw1_w, u.pw1_b, Lt, u.pw_hidden, 1, 1}, p2 = {u.pw2_w, u.pw2_b, u.pw_hidden, Lt, 1, 1};
		if (up_conv(m, d.pw1, p1, Lt, u.pw_hidden, name) || up_conv(m, d.pw2, p2, u.pw_hidden, Lt, name)) return -1;
		m->ups.push_back(d);
	}
	if (up_conv(m, m->voc0, c.voc0, Lt, c.voc0.out, "decoder.0")) return -1;
	int ch = c.voc0.out, spf = 1;
	for (int i = 0; i < c.n_up; i++) spf *= m->ups[i].stride;
	for (int b = 0; b < c.n_blocks; b++) {
		const tbc_block &B = c.block[b];
		DevBlock d{};
		char name[64];
		snprintf(name, sizeof name, "decoder.%d", b + 1);
		if (up_snake(m, d.act, B.act, ch, name) || up_transconv(m, d.up, B.up, ch, name)) return -1;
		d.stride = B.up.stride, d.out = B.up.out;
		spf *= d.stride;
		for (int u = 0; u < 3; u++) {
			const tbc_unit &U = B.units[u];
			if (up_snake(m, d.units[u].act1, U.act1, d.out, name) || up_snake(m, d.units[u].act2, U.act2, d.out, name) ||
			    up_conv(m, d.units[u].conv1, U.conv1, d.out, d.out, name) ||
			    up_conv(m, d.units[u].conv2, U.conv2, d.out, d.out, name))
				return -1;
			if (U.conv2.k != 1) {
				set_err("codec weights: %s unit %d: conv2 kernel %d, want 1", name, u, U.conv2.k);
				return -1;
			}
		}
		m->blocks.push_back(d);
		ch = d.out;
	}
	if (up_snake(m, m->final_act, c.final_act, ch, "final snake") ||
	    up_conv(m, m->final_conv, c.final_conv, ch, 1, "final conv"))
		return -1;
	m->spf = spf;
	return 0;
}

// --- forward --------------------------------------------------------------

// A launch of a push; where s->dependent, with programmatic stream
// serialization (dep_launch.cuh: every kernel here calls dep_wait before it
// reads what an earlier launch wrote) except the first after a copy
// (LAUNCH_AFTER_COPY).
#define LAUNCH_EX(dep, cluster, kernel, grid, block, smem, ...)                                               \
	do {                                                                                                        \
		if (!s->dry) {                                                                                          \
			CK(launch_ex(dep, cluster, kernel, grid, block, smem, s->st, __VA_ARGS__));                       \
			CK(cudaGetLastError());                                                                             \
		}                                                                                                       \
	} while (0)
#define LAUNCH_DEP(dep, kernel, grid, block, smem, ...) LAUNCH_EX(dep, 1, kernel, grid, block, smem, __VA_ARGS__)
#define LAUNCH(kernel, grid, block, smem, ...) LAUNCH_DEP(s->dependent, kernel, grid, block, smem, __VA_ARGS__)
#define LAUNCH_AFTER_COPY(kernel, grid, block, smem, ...) LAUNCH_DEP(false, kernel, grid, block, smem, __VA_ARGS__)

// Push is the shape of one launch: B members, T frames each, the members'
// slots in device memory; single when the pool has one slot.
struct Push {
	int B, T;
	const int *slot;
	bool single;
};

Rows dense() { return Rows{nullptr, 1, 0, 0}; }

// ext_rows addresses x from its first history row (a causal op's input),
// ext_new from its first new row (where the producing op writes); R is a
// member's rows in units of the product's rows. A pool of one slot has one
// member in slot 0: its rows are dense, with no slot table to read.
Rows ext_rows(const Push &p, const Ext &x, int R) {
	return Rows{p.single ? nullptr : p.slot, R, (size_t)x.slotRows() * x.C, 0};
}
Rows ext_new(const Push &p, const Ext &x, int R) {
	return Rows{p.single ? nullptr : p.slot, R, (size_t)x.slotRows() * x.C, (size_t)x.H * x.C};
}

Epi epi0() {
	Epi e;
	memset(&e, 0, sizeof e); // every Rows dense
	e.snC = 1;
	return e;
}

Epi epi_out(float *out1, const float *bias) {
	Epi e = epi0();
	e.out1 = out1;
	e.bias = bias;
	return e;
}

// epi_ext writes the new rows of x; R is a member's rows of the product.
Epi epi_ext(const Push &p, const Ext &x, int R, const float *bias) {
	Epi e = epi_out(x.p, bias);
	e.rout1 = ext_new(p, x, R);
	return e;
}

// with_snake adds SnakeBeta sn (ch channels) of each element, written to
// out2 at the rows rows gives.
Epi with_snake(Epi e, float *out2, Rows rows, const DevSnake &sn, int ch) {
	e.out2 = out2;
	e.rout2 = rows;
	e.snA = sn.a;
	e.snIB = sn.ib;
	e.snC = ch;
	return e;
}

// snake_ext is with_snake into the new rows of x.
Epi snake_ext(Epi e, const Push &p, const Ext &x, int R, const DevSnake &sn, int ch) {
	return with_snake(e, x.p, ext_new(p, x, R), sn, ch);
}

// skinny launches k_skinny2 in the given A mode (see kernels.cuh) with KS
// warps per output column: enough columns x slices for ~4096 warps, each
// slice at least 128 values of K.
int skinny(tbc_pool *s, int mode, AOp a, const float *nw, double eps, const float *W, int M, int N, int K,
           const Epi &e) {
	const bool v4 = a.cin % 4 == 0 && K % 4 == 0;
	int KS = 1;
	while (KS < 8 && (long)N * KS < 4096 && K / (2 * KS) >= 128) KS *= 2;
	dim3 grid((N + 8 / KS - 1) / (8 / KS));
	const bool slot = a.rows.slot != nullptr;
	if (slot && mode >= 2) {
		set_err("codec: skinny product mode %d on slotted rows", mode);
		return -1;
	}
	void (*f)(AOp, const float *, double, const float *, int, int, int, int, Epi) = nullptr;
	switch (mode * 4 + (v4 ? 2 : 0) + (slot ? 1 : 0)) {
	case 0: f = k_skinny2<0, false, false>; break;
	case 1: f = k_skinny2<0, false, true>; break;
	case 2: f = k_skinny2<0, true, false>; break;
	case 3: f = k_skinny2<0, true, true>; break;
	case 4: f = k_skinny2<1, false, false>; break;
	case 5: f = k_skinny2<1, false, true>; break;
	case 6: f = k_skinny2<1, true, false>; break;
	case 7: f = k_skinny2<1, true, true>; break;
	case 8: f = k_skinny2<2, false, false>; break;
	case 10: f = k_skinny2<2, true, false>; break;
	case 12: f = k_skinny2<3, false, false>; break;
	default: f = k_skinny2<3, true, false>; break;
	}
	LAUNCH(f, grid, 256, 0, a, nw, eps, W, M, N, K, KS, e);
	return 0;
}

// TilePlan is how a product of M > SK_MAXM rows runs: its tiled kernel,
// grid (gridDim.z K slices of kChunk, summed by k_splitk_epi when S > 1)
// and dynamic shared memory.
struct TilePlan {
	void (*kernel)(AOp, const float *, int, int, int, int, Epi, float *);
	dim3 grid;
	int kChunk, S;
	size_t smem;
};

// wg_choice says whether k_gemm_wg takes a product of a launch of several
// streams (one_pass), and with which tiles: -1 none, 0 BN 96, 1 BN 128. It
// takes the convolutions of several taps (K > cin), whose K is long
// enough for its pipeline; the 1x1 convolutions and Linears, 3-24 K tiles
// deep, stay on k_gemm_tc. H100, tools/gpu/micro/codec_wg.cu, 64 streams:
// the vocoder's k7 convolutions 225-291 -> 157-223 us, decoder.0 108 -> 62,
// its 1x1 convolutions 44-79 -> 49-145; one 32-deep K tile a stage, as two
// were slower at 64 streams (b2's k7 157 -> 200 us).
int wg_choice(const tbc_model *m, const AOp &a, int M, int N, int K) {
	const int wgi = N % 128 == 0 ? 1 : N % 96 == 0 ? 0 : -1;
	if (wgi < 0 || !m->wg_bytes[wgi][0] || a.cin % 4 || K % 4 || M <= 32 || K <= a.cin) return -1;
	return wgi;
}

// plan_tiled picks the tiled kernel for a product of M > SK_MAXM rows. wg:
// wg_choice's answer, or -1 for the mma.sync kernels.
TilePlan plan_tiled(const tbc_model *m, bool one_pass, bool one_cta, const AOp &a, int M, int N, int K, int wg) {
	const bool v4 = a.cin % 4 == 0 && K % 4 == 0;
	// Tensor-core tiles 128 x 32 when N is an odd multiple of 32 (64-wide
	// tiles would compute a third more columns than there are).
	const bool tc = v4 && M > 32, narrow = tc && N % 64 == 32;
	const int BM = M <= 32 ? 32 : wg >= 0 ? WG_BM : narrow ? 128 : 64, BN = wg >= 0 ? (wg ? 128 : 96) : narrow ? 32 : 64;
	const int BK = 32;
	const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
	const int nK = (K + BK - 1) / BK;
	const int target = (wg >= 0 ? 2 : 4) * m->sms;
	int S = 1;
	if (tiles < m->sms) {
		S = std::min((target + tiles - 1) / tiles, std::max(1, nK / 2));
		S = std::min(S, 64);
	}
	const int per = (nK + S - 1) / S;
	S = (nK + per - 1) / per;
	TilePlan p{nullptr, dim3((N + BN - 1) / BN, (M + BM - 1) / BM, S), per * BK, S, 0};
	if (wg >= 0) {
		p.kernel = wg ? k_gemm_wg<128> : k_gemm_wg<96>;
		p.smem = m->wg_bytes[wg][one_cta];
		return p;
	}
	p.kernel = BM == 32 ? (v4 ? k_gemm<32, 32, true> : k_gemm<32, 32, false>)
	           : narrow ? (one_pass ? k_gemm_tc<128, 32, true> : k_gemm_tc<128, 32, false>)
	           : tc     ? (one_pass ? k_gemm_tc<64, 64, true> : k_gemm_tc<64, 64, false>)
	                    : k_gemm<64, 32, false>;
	p.smem = tc && one_cta ? m->tc_pad[narrow] : 0;
	return p;
}

// rows_split is the cluster size (K slices) k_gemm_rows takes for a product
// of M dense rows in a launch of several streams, 0 where it does not take
// it: slices of at most GR_KC, more of them (down to 32 of K) while the
// column tiles leave SMs idle.
int rows_split(const tbc_pool *s, int M, int N, int K) {
	if (!s->m->clusters || !s->one_pass || M <= SK_MAXM || M > GR_MAXM || N % GR_BN || K % 32) return 0;
	int ks = 1;
	while (ks <= GR_MAXKS && (K % (32 * ks) || K / ks > GR_KC)) ks *= 2;
	if (ks > GR_MAXKS) return 0;
	while (2 * ks <= GR_MAXKS && (N / GR_BN) * ks < s->m->sms && K % (64 * ks) == 0) ks *= 2;
	return ks;
}

// rows_gemm launches k_gemm_rows (A mode as k_skinny2's: 1 plain, 2
// RMSNorm, 3 SwiGLU) in clusters of ks, rows_split's answer.
int rows_gemm(tbc_pool *s, int mode, const float *x, const float *nw, double eps, const float *W, int M, int N, int K,
              const Epi &e, int ks) {
	void (*f)(const float *, const float *, double, const float *, int, int, int, Epi) =
	    mode == 2 ? k_gemm_rows<2> : mode == 3 ? k_gemm_rows<3> : k_gemm_rows<1>;
	LAUNCH_EX(s->dependent, ks, f, dim3(N / GR_BN, 1, ks), 256, 0, x, nw, eps, W, M, N, K, e);
	return 0;
}

// gemm computes the M x N product of an implicit im2col A (K = taps*cin) and
// weights W [N][K], with epilogue e. M <= SK_MAXM takes a warp-per-column
// kernel; larger M the tiled one, split over K when the tiles alone would
// leave most multiprocessors idle. Wt: W rounded to TF32 (DevConv::wt),
// without which k_gemm_wg does not take the product.
int gemm(tbc_pool *s, AOp a, const float *W, int M, int N, int K, const Epi &e, const float *Wt = nullptr) {
	if (M <= 0) return 0;
	if (M <= SK_MAXM) return skinny(s, K == a.cin ? 1 : 0, a, nullptr, 0, W, M, N, K, e);
	if (K == a.cin && !a.rows.slot)
		if (const int ks = rows_split(s, M, N, K)) return rows_gemm(s, 1, a.x + a.rows.off, nullptr, 0, W, M, N, K, e, ks);
	const int wg = s->one_pass && Wt ? wg_choice(s->m, a, M, N, K) : -1;
	const TilePlan p = plan_tiled(s->m, s->one_pass, s->one_cta_per_sm, a, M, N, K, wg);
	if (p.S > 1) {
		s->ws_need = std::max(s->ws_need, (size_t)p.S * M * N);
		if (!s->dry && (size_t)p.S * M * N > s->ws_floats) {
			set_err("codec: split-K workspace too small (%zu > %zu floats)", (size_t)p.S * M * N, s->ws_floats);
			return -1;
		}
	}
	LAUNCH(p.kernel, p.grid, 256, p.smem, a, wg >= 0 ? Wt : W, M, N, K, p.kChunk, e, s->ws);
	if (p.S > 1) {
		int blocks = (int)std::min<size_t>(((size_t)M * N + 255) / 256, 4096);
		LAUNCH(k_splitk_epi, blocks, 256, 0, s->ws, p.S, M, N, e);
	}
	return 0;
}

// conv runs c over the ext buffer x for a push: R new rows a member.
int conv(tbc_pool *s, const Push &p, const Ext &x, const DevConv &c, int R, const Epi &e) {
	return gemm(s, AOp{x.p, c.in, c.dil, ext_rows(p, x, R)}, c.w, p.B * R, c.out, c.k * c.in, e, c.wt);
}

int linear(tbc_pool *s, const float *x, const DevConv &c, int M, const Epi &e) {
	return gemm(s, AOp{x, c.in, 1, dense()}, c.w, M, c.out, c.in, e);
}

// norm_linear is W · RMSNorm(x) (weight nw) over M dense rows of width K:
// the norm inside the skinny kernel's loads while M fits it, else a norm
// pass into s->tn and the tiled product.
int norm_linear(tbc_pool *s, const float *x, const float *nw, double eps, const float *W, int M, int N, int K,
                const Epi &e) {
	if (M <= SK_MAXM) return skinny(s, 2, AOp{x, K, 1, dense()}, nw, eps, W, M, N, K, e);
	if (const int ks = rows_split(s, M, N, K)) return rows_gemm(s, 2, x, nw, eps, W, M, N, K, e, ks);
	LAUNCH(k_rmsnorm_rows, M, 256, 0, x, nw, eps, K, s->tn);
	return gemm(s, AOp{s->tn, K, 1, dense()}, W, M, N, K, e);
}

// swiglu_linear is W · (silu(gate) · up) over M dense rows [gate | up] of
// width 2K, the same way.
int swiglu_linear(tbc_pool *s, const float *gu, const float *W, int M, int N, int K, const Epi &e) {
	if (M <= SK_MAXM) return skinny(s, 3, AOp{gu, K, 1, dense()}, nullptr, 0, W, M, N, K, e);
	if (const int ks = rows_split(s, M, N, K)) return rows_gemm(s, 3, gu, nullptr, 0, W, M, N, K, e, ks);
	LAUNCH(k_swiglu_rows, M, 256, 0, gu, K, s->tn);
	return gemm(s, AOp{s->tn, K, 1, dense()}, W, M, N, K, e);
}

// A push's slots follow its codes, so one copy takes both.
size_t slots_at(int B, int T) { return (size_t)B * T * 16; }

// forward enqueues one push of T <= kMaxT frames for B members (bucket
// size), whose codes ([B][T][16]) and slots are staged in s->h_in; the
// samples ([B][T·spf]) land in s->h_out. With s->dry it only sizes the
// split-K workspace.
int forward(tbc_pool *s, int B, int T) {
	tbc_model *m = s->m;
	const tbc_weights &c = m->cfg;
	const Push p{B, T, s->d_in + slots_at(B, T), s->nslots == 1};
	const int BT = B * T;
	s->one_pass = B > 1;
	s->one_cta_per_sm = B > 1 && B <= kOneCtaMaxStreams;
	s->dependent = B == 1;
	if (!s->dry)
		CK(cudaMemcpyAsync(s->d_in, s->h_in, sizeof(int32_t) * (slots_at(B, T) + B), cudaMemcpyHostToDevice, s->st));
	LAUNCH_AFTER_COPY(k_dequant, BT, 128, 0, s->d_in, m->books, c.codebook_size, c.cb_dim, s->z);
	if (gemm(s, AOp{s->z, 2 * c.cb_dim, 1, dense()}, m->proj, BT, c.codebook_dim, 2 * c.cb_dim,
	         epi_ext(p, s->pre, T, nullptr)))
		return -1;
	if (conv(s, p, s->pre, m->pre_conv, T, epi_out(s->x0, m->pre_conv.b))) return -1;
	if (linear(s, s->x0, m->in_proj, BT, epi_out(s->h, m->in_proj.b))) return -1;

	const int nh = c.heads, nkv = c.kv_heads, hd = c.head_dim, Hd = c.hidden, I = c.intermediate;
	const size_t kvl = (size_t)s->cap * nkv * hd;
	const TRows tr{p.slot, T, s->kvSlot, s->d_pos};
	// RMSNorm and SwiGLU are folded into the products' A reads while the
	// rows fit the skinny kernel, so a layer is 6 launches: qkv, RoPE,
	// attention, o, gate/up, down.
	for (int l = 0; l < c.layers; l++) {
		const DevLayer &L = m->layers[l];
		float *kc = s->kc + l * kvl, *vc = s->vc + l * kvl;
		if (norm_linear(s, s->h, L.in_norm, c.rms_eps, L.wqkv, BT, m->qkvw, Hd, epi_out(s->qkv, nullptr))) return -1;
		LAUNCH(k_rope_kv2, dim3(((nh + nkv) * hd / 2 + 255) / 256, BT), 256, 0, s->qkv, kc, vc, m->inv_freq, tr, nh,
		       nkv, hd, s->cap);
		const float scale = (float)(1.0 / sqrt((double)hd));
		if (B == 1)
			LAUNCH(k_attn_lone, dim3(nh, BT), 128, sizeof(float) * (hd + c.window), s->qkv, kc, vc, s->att, tr, nh,
			       nkv, hd, c.window, s->cap, scale);
		else
			LAUNCH(k_attn, dim3(nh, BT), ATT_T, attn_smem(hd, c.window), s->qkv, kc, vc, s->att, tr, nh, nkv, hd,
			       c.window, s->cap, scale);
		Epi e = epi_out(s->h, nullptr);
		e.scale = L.attn_scale;
		e.res = s->h;
		if (gemm(s, AOp{s->att, nh * hd, 1, dense()}, L.wo, BT, Hd, nh * hd, e)) return -1;
		if (norm_linear(s, s->h, L.post_norm, c.rms_eps, L.wgu, BT, 2 * I, Hd, epi_out(s->gu, nullptr))) return -1;
		e.scale = L.mlp_scale;
		if (swiglu_linear(s, s->gu, L.wdown, BT, Hd, I, e)) return -1;
	}
	// Upsampler: transposed conv, then ConvNeXt; the output of each stage is
	// written straight into the next op's ext buffer. R counts a member's
	// rows.
	const int Lt = c.latent;
	int R = T;
	const Ext &first = m->ups.empty() ? s->voc0 : s->upin[0];
	if (norm_linear(s, s->h, m->final_norm, c.rms_eps, m->out_proj.w, BT, Lt, Hd, epi_ext(p, first, T, m->out_proj.b)))
		return -1;
	for (size_t i = 0; i < m->ups.size(); i++) {
		const DevUp &U = m->ups[i];
		// Each product row is U.stride rows of dw[i]: the Rows of its
		// output count in rows that wide.
		if (conv(s, p, s->upin[i], U.up, R, epi_ext(p, s->dw[i], R, U.up.b))) return -1;
		R *= U.stride;
		LAUNCH(k_dwconv_ln, B * R, 256, sizeof(float) * Lt, s->dw[i].p, ext_rows(p, s->dw[i], R), U.dw, U.dw_b,
		       U.ln_w, U.ln_b, s->ln, Lt, 7);
		Epi g = epi_out(s->pw, U.pw1.b);
		g.gelu = 1;
		if (linear(s, s->ln, U.pw1, B * R, g)) return -1;
		const Ext &next = i + 1 < m->ups.size() ? s->upin[i + 1] : s->voc0;
		Epi e = epi_ext(p, next, R, U.pw2.b);
		e.scale = U.gamma;
		e.res = s->dw[i].p;
		e.rres = ext_new(p, s->dw[i], R);
		if (linear(s, s->pw, U.pw2, B * R, e)) return -1;
	}

	// Vocoder. Every SnakeBeta is applied once, in the epilogue of the op that
	// produces its input, and the activated rows are what the ext buffers keep.
	Epi e = snake_ext(epi0(), p, s->tc[0], R, m->blocks[0].act, m->voc0.out);
	e.bias = m->voc0.b;
	if (conv(s, p, s->voc0, m->voc0, R, e)) return -1;
	for (size_t b = 0; b < m->blocks.size(); b++) {
		const DevBlock &Bk = m->blocks[b];
		const int C = Bk.out;
		// The transposed conv's product rows are Bk.stride rows of xr and of
		// unit 0's ext each: R product rows a member.
		e = snake_ext(epi_out(s->xr, Bk.up.b), p, s->unit[b][0], R, Bk.units[0].act1, C);
		if (conv(s, p, s->tc[b], Bk.up, R, e)) return -1;
		R *= Bk.stride;
		for (int u = 0; u < 3; u++) {
			const DevUnit &U = Bk.units[u];
			e = with_snake(epi0(), s->a2, dense(), U.act2, C);
			e.bias = U.conv1.b;
			if (conv(s, p, s->unit[b][u], U.conv1, R, e)) return -1;
			e = epi0();
			e.bias = U.conv2.b;
			e.res = s->xr;
			if (u < 2) {
				e.out1 = s->xr;
				e = snake_ext(e, p, s->unit[b][u + 1], R, Bk.units[u + 1].act1, C);
			} else if (b + 1 < m->blocks.size()) {
				e = snake_ext(e, p, s->tc[b + 1], R, m->blocks[b + 1].act, C);
			} else {
				e = snake_ext(e, p, s->fin, R, m->final_act, C);
			}
			if (linear(s, s->a2, U.conv2, B * R, e)) return -1;
		}
	}
	const DevConv &F = m->final_conv;
	LAUNCH(k_final_conv, (B * R + 7) / 8, 256, 0, s->fin.p, ext_rows(p, s->fin, R), F.w, F.b, F.in, F.k, F.dil, B * R,
	       s->d_out);

	// Histories for the next push, and the RoPE positions.
	ShiftArgs sa;
	memset(&sa, 0, sizeof sa);
	int n = 0, maxC = 1;
	bool overflow = false;
	auto add = [&](const Ext &x, int rows) {
		if (x.H == 0) return;
		if (n == SHIFT_MAX) {
			overflow = true;
			return;
		}
		sa.d[n++] = ShiftDesc{x.p, x.C, x.H, rows, (size_t)x.slotRows() * x.C};
		maxC = std::max(maxC, x.C);
	};
	add(s->pre, T);
	R = T;
	for (size_t i = 0; i < m->ups.size(); i++) {
		add(s->upin[i], R);
		R *= m->ups[i].stride;
		add(s->dw[i], R);
	}
	add(s->voc0, R);
	for (size_t b = 0; b < m->blocks.size(); b++) {
		add(s->tc[b], R);
		R *= m->blocks[b].stride;
		for (int u = 0; u < 3; u++) add(s->unit[b][u], R);
	}
	add(s->fin, R);
	if (overflow) {
		set_err("codec: more than %d causal histories", SHIFT_MAX);
		return -1;
	}
	sa.slot = p.slot;
	sa.pos = s->d_pos;
	sa.T = T;
	if (n == 0) sa.d[n++] = ShiftDesc{s->fin.p, 1, 0, 1, 0}; // the launch still advances the positions
	LAUNCH(k_shift, dim3((maxC + 31) / 32, n, B), dim3(32, 8), 0, sa);
	if (!s->dry) CK(cudaMemcpyAsync(s->h_out, s->d_out, sizeof(float) * B * R, cudaMemcpyDeviceToHost, s->st));
	return 0;
}

// preload makes the runtime load every kernel now, so that no module load
// happens inside a stream capture.
int preload() {
	cudaFuncAttributes fa;
	CK(cudaFuncGetAttributes(&fa, k_gemm<32, 32, true>));
	CK(cudaFuncGetAttributes(&fa, k_gemm<32, 32, false>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_tc<64, 64, false>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_tc<128, 32, false>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_tc<64, 64, true>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_tc<128, 32, true>));
	CK(cudaFuncGetAttributes(&fa, k_gemm<64, 32, false>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_wg<96>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_wg<128>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<0, true, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<0, true, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<0, false, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<0, false, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<1, true, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<1, true, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<1, false, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<1, false, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<2, true, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<2, false, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<3, true, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<3, false, false>));
	CK(cudaFuncGetAttributes(&fa, k_rope_kv2));
	CK(cudaFuncGetAttributes(&fa, k_attn));
	CK(cudaFuncGetAttributes(&fa, k_attn_lone));
	CK(cudaFuncGetAttributes(&fa, k_splitk_epi));
	CK(cudaFuncGetAttributes(&fa, k_dequant));
	CK(cudaFuncGetAttributes(&fa, k_dwconv_ln));
	CK(cudaFuncGetAttributes(&fa, k_final_conv));
	CK(cudaFuncGetAttributes(&fa, k_shift));
	CK(cudaFuncGetAttributes(&fa, k_rmsnorm_rows));
	CK(cudaFuncGetAttributes(&fa, k_swiglu_rows));
	CK(cudaFuncGetAttributes(&fa, k_gemm_rows<1>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_rows<2>));
	CK(cudaFuncGetAttributes(&fa, k_gemm_rows<3>));
	return 0;
}

// alloc_ext gives x its slotted buffer: every slot H history rows and room
// for kMaxT frames of R0 rows, C wide.
int alloc_ext(tbc_pool *s, Ext &x, int C, int H, int R0) {
	x.C = C, x.H = H, x.R0 = R0;
	if (dev_alloc(s->allocs, &x.p, (size_t)s->nslots * x.slotRows() * C)) return -1;
	s->exts.push_back(&x);
	return 0;
}

// SmemLimits are a device's shared-memory sizes: an SM's, the part the
// runtime reserves a CTA, and the most a CTA may opt in to.
struct SmemLimits {
	int per_sm = 0, reserved = 0, optin = 0;
	// Dynamic shared memory that, with a kernel's static, takes a CTA past
	// half an SM's, so that an SM holds one (tbc_pool::one_cta_per_sm).
	long one_cta(size_t static_bytes) const { return (long)per_sm / 2 - reserved - (long)static_bytes + 16; }
};

bool smem_limits(int device, SmemLimits &l) {
	if (cudaDeviceGetAttribute(&l.per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) == cudaSuccess &&
	    cudaDeviceGetAttribute(&l.reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) == cudaSuccess &&
	    cudaDeviceGetAttribute(&l.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess)
		return true;
	cudaGetLastError();
	return false;
}

// wgmma_smem sets m->wg_bytes[i] where this build's kernels carry wgmma (an
// sm_90a image: tbwg::image_has_wgmma) and the device gives k_gemm_wg<BN> its shared
// memory: wg_bytes[i][0] what it needs, [1] that or half an SM's if more (one
// CTA an SM, tbc_pool::one_cta_per_sm).
template <class K> void wgmma_smem(tbc_model *m, int i, int BN, K *k) {
	SmemLimits l;
	if (!smem_limits(m->device, l)) return;
	const size_t alone = wg_smem(BN), one = std::max(alone, (size_t)l.one_cta(0));
	if (one > (size_t)l.optin || cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)one) != cudaSuccess) {
		cudaGetLastError();
		return;
	}
	m->wg_bytes[i][0] = alone;
	m->wg_bytes[i][1] = one;
}

// one_cta_pad is the dynamic shared memory that makes kernel k's CTAs (its
// static shared memory plus the per-CTA reservation) take over half of an
// SM's shared memory, opted in for k; 0 where that is more than a CTA may
// have or the attributes are unknown (the launches then run as before).
template <class K> size_t one_cta_pad(int device, K *k) {
	SmemLimits l;
	cudaFuncAttributes fa;
	if (!smem_limits(device, l)) return 0;
	if (cudaFuncGetAttributes(&fa, k) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	const long pad = l.one_cta(fa.sharedSizeBytes);
	if (pad <= 0 || pad + (long)fa.sharedSizeBytes > l.optin ||
	    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)pad) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return (size_t)pad;
}

int build_pool(tbc_pool *s) {
	tbc_model *m = s->m;
	const tbc_weights &c = m->cfg;
	for (int b : kBuckets)
		if (b < s->slots) s->buckets.push_back(b);
	s->buckets.push_back(s->slots);
	s->graphs.assign(s->buckets.size(), {});
	s->nslots = s->slots == 1 ? 1 : s->slots + 1;
	const int MB = s->slots, T = kMaxT, MBT = MB * T;
	CK(create_stream(&s->st, PRIO_CODEC));
	CK(create_stream(&s->st_first, PRIO_LM));
	s->fresh.assign(s->slots, 0);
	CK(cudaEventCreate(&s->ev0));
	CK(cudaEventCreate(&s->ev1));
	const size_t inN = (size_t)MBT * 16 + MB;
	CK(cudaHostAlloc((void **)&s->h_in, sizeof(int32_t) * inN, cudaHostAllocDefault));
	CK(cudaHostAlloc((void **)&s->h_out, sizeof(float) * m->spf * MBT, cudaHostAllocDefault));
	void *q;
	CK(cudaMalloc(&q, sizeof(int64_t) * s->nslots));
	s->allocs.push_back(q);
	s->d_pos = (int64_t *)q;
	CK(cudaMalloc(&q, sizeof(int32_t) * inN));
	s->allocs.push_back(q);
	s->d_in = (int32_t *)q;
	auto A = [&](float **p, size_t n) { return dev_alloc(s->allocs, p, n); };
	const int Lt = c.latent, Hd = c.hidden, I = c.intermediate;
	s->cap = c.window - 1 + T;
	s->kvSlot = (size_t)c.layers * s->cap * c.kv_heads * c.head_dim;
	const size_t kv = s->kvSlot * s->nslots;
	if (A(&s->d_out, (size_t)m->spf * MBT) || A(&s->z, (size_t)MBT * 2 * c.cb_dim) || A(&s->x0, (size_t)MBT * Lt) ||
	    A(&s->h, (size_t)MBT * Hd) || A(&s->qkv, (size_t)MBT * m->qkvw) ||
	    A(&s->att, (size_t)MBT * c.heads * c.head_dim) || A(&s->gu, (size_t)MBT * 2 * I) ||
	    A(&s->tn, (size_t)MBT * std::max(Hd, I)) || A(&s->kc, kv) || A(&s->vc, kv))
		return -1;
	if (alloc_ext(s, s->pre, c.codebook_dim, (m->pre_conv.k - 1) * m->pre_conv.dil, 1)) return -1;
	int R0 = 1; // rows a frame
	size_t lnMax = 1, pwMax = 1;
	s->upin.resize(m->ups.size());
	s->dw.resize(m->ups.size());
	for (size_t i = 0; i < m->ups.size(); i++) {
		if (alloc_ext(s, s->upin[i], Lt, m->ups[i].up.k - 1, R0)) return -1;
		R0 *= m->ups[i].stride;
		if (alloc_ext(s, s->dw[i], Lt, 6, R0)) return -1;
		lnMax = std::max(lnMax, (size_t)MBT * R0 * Lt);
		pwMax = std::max(pwMax, (size_t)MBT * R0 * m->ups[i].pw1.out);
	}
	if (A(&s->ln, lnMax) || A(&s->pw, pwMax)) return -1;
	if (alloc_ext(s, s->voc0, Lt, (m->voc0.k - 1) * m->voc0.dil, R0)) return -1;
	s->tc.resize(m->blocks.size());
	s->unit.resize(m->blocks.size());
	size_t xrMax = 1;
	int ch = m->voc0.out;
	for (size_t b = 0; b < m->blocks.size(); b++) {
		const DevBlock &Bk = m->blocks[b];
		if (alloc_ext(s, s->tc[b], ch, Bk.up.k - 1, R0)) return -1;
		R0 *= Bk.stride;
		for (int u = 0; u < 3; u++)
			if (alloc_ext(s, s->unit[b][u], Bk.out, (Bk.units[u].conv1.k - 1) * Bk.units[u].conv1.dil, R0)) return -1;
		xrMax = std::max(xrMax, (size_t)MBT * R0 * Bk.out);
		ch = Bk.out;
	}
	if (A(&s->xr, xrMax) || A(&s->a2, xrMax)) return -1;
	if (alloc_ext(s, s->fin, ch, (m->final_conv.k - 1) * m->final_conv.dil, R0)) return -1;
	// Size the split-K workspace for every bucket and push size.
	s->dry = true;
	for (int b : s->buckets)
		for (int t = 1; t <= kMaxT; t++)
			if (forward(s, b, t)) return -1;
	s->dry = false;
	s->ws_floats = s->ws_need;
	if (s->ws_floats && A(&s->ws, s->ws_floats)) return -1;
	if (preload()) return -1;
	s->use_graph = m->cuda_graphs;
	// Every slot, the scratch too, starts at frame 0 with zero history.
	for (Ext *x : s->exts) CK(cudaMemsetAsync(x->p, 0, sizeof(float) * s->nslots * x->slotRows() * x->C, s->st));
	CK(cudaMemsetAsync(s->kc, 0, sizeof(float) * kv, s->st));
	CK(cudaMemsetAsync(s->vc, 0, sizeof(float) * kv, s->st));
	CK(cudaMemsetAsync(s->d_pos, 0, sizeof(int64_t) * s->nslots, s->st));
	CK(cudaStreamSynchronize(s->st));
	return 0;
}

// reset_slot returns one slot to frame 0 with zero history.
int reset_slot(tbc_pool *s, int slot) {
	for (Ext *x : s->exts) {
		const size_t n = (size_t)x->slotRows() * x->C;
		CK(cudaMemsetAsync(x->p + slot * n, 0, sizeof(float) * n, s->st_first));
	}
	CK(cudaMemsetAsync(s->kc + slot * s->kvSlot, 0, sizeof(float) * s->kvSlot, s->st_first));
	CK(cudaMemsetAsync(s->vc + slot * s->kvSlot, 0, sizeof(float) * s->kvSlot, s->st_first));
	CK(cudaMemsetAsync(s->d_pos + slot, 0, sizeof(int64_t), s->st_first));
	CK(cudaStreamSynchronize(s->st_first));
	s->fresh[slot] = 1;
	return 0;
}

// bucket is the index of the smallest bucket that holds n members.
int bucket(const tbc_pool *s, int n) {
	int i = 0;
	while (s->buckets[i] < n) i++;
	return i;
}

// capture records a push of bucket bi and T frames as its graph (recorded,
// not run).
int capture(tbc_pool *s, int bi, int T) {
	CK(cudaStreamBeginCapture(s->st, cudaStreamCaptureModeThreadLocal));
	int rc = forward(s, s->buckets[bi], T);
	cudaGraph_t graph = nullptr;
	cudaError_t ec = cudaStreamEndCapture(s->st, &graph);
	if (rc) {
		if (graph) cudaGraphDestroy(graph);
		return -1;
	}
	CK(ec);
	cudaError_t ei = cudaGraphInstantiateWithFlags(&s->graphs[bi][T], graph, 0);
	cudaGraphDestroy(graph);
	CK(ei);
	return 0;
}

// run_push enqueues one sub-push of T frames for the members staged in
// h_in (padded to bucket bi), through the graph captured for (bi, T).
int run_push(tbc_pool *s, int bi, int T, cudaStream_t st) {
	if (!s->use_graph) return forward(s, s->buckets[bi], T);
	if (!s->graphs[bi][T] && capture(s, bi, T)) return -1;
	CK(cudaGraphLaunch(s->graphs[bi][T], st));
	return 0;
}

// stage copies frames t0..t0+T-1 of each member's codes ([n][frames][16])
// and the slots into h_in, padding to the bucket with code 0 in the
// scratch slot, and returns the bucket's index.
int stage(tbc_pool *s, const int32_t *slots, int n, const int32_t *codes, int frames, int t0, int T) {
	const int bi = bucket(s, n), B = s->buckets[bi];
	int32_t *sl = s->h_in + slots_at(B, T);
	for (int b = 0; b < B; b++) {
		int32_t *dst = s->h_in + (size_t)b * T * 16;
		if (b < n) {
			memcpy(dst, codes + ((size_t)b * frames + t0) * 16, sizeof(int32_t) * 16 * T);
			sl[b] = slots[b];
		} else {
			memset(dst, 0, sizeof(int32_t) * 16 * T);
			sl[b] = s->nslots - 1; // the scratch slot (only a pool of more than one slot pads)
		}
	}
	return bi;
}

int check_push(const tbc_pool *s, const int32_t *slots, int n, const int32_t *codes, int frames) {
	if (n < 1 || n > s->slots || frames < 0 || !slots || (frames > 0 && !codes)) {
		set_err("codec pool: push of %d streams x %d frames (pool of %d)", n, frames, s->slots);
		return -1;
	}
	uint64_t seen[kMaxSlots / 64] = {};
	for (int b = 0; b < n; b++) {
		const int sl = slots[b];
		if (sl < 0 || sl >= s->slots) {
			set_err("codec pool: slot %d outside 0..%d", sl, s->slots - 1);
			return -1;
		}
		if (seen[sl >> 6] >> (sl & 63) & 1) {
			set_err("codec pool: slot %d twice in one push", sl);
			return -1;
		}
		seen[sl >> 6] |= 1ull << (sl & 63);
	}
	const int rows = s->m->cfg.codebook_size;
	for (size_t i = 0; i < (size_t)n * frames * 16; i++) {
		if (codes[i] < 0 || codes[i] >= rows) {
			set_err("codec: stream %zu frame %zu group %zu: code %d outside 0..%d", i / (16 * (size_t)frames),
			        i / 16 % frames, i % 16, codes[i], rows - 1);
			return -1;
		}
	}
	return 0;
}

void free_pool(tbc_pool *s) {
	if (!s) return;
	if (s->st) cudaStreamSynchronize(s->st);
	for (auto &row : s->graphs)
		for (auto &g : row)
			if (g) cudaGraphExecDestroy(g);
	for (void *p : s->allocs) cudaFree(p);
	if (s->h_in) cudaFreeHost(s->h_in);
	if (s->h_out) cudaFreeHost(s->h_out);
	if (s->ev0) cudaEventDestroy(s->ev0);
	if (s->ev1) cudaEventDestroy(s->ev1);
	if (s->st) cudaStreamDestroy(s->st);
	if (s->st_first) cudaStreamDestroy(s->st_first);
	delete s;
}

} // namespace

extern "C" {

int tbc_abi_version(void) { return TBC_ABI_VERSION; }
const char *tbc_last_error(void) { return g_err; }

int tbc_device_count(void) {
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return n;
}

int tbc_device_name(int device, char *name, int cap) {
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, device));
	snprintf(name, cap, "%s", p.name);
	return 0;
}

tbc_params tbc_default_params(void) {
	tbc_params p{};
	p.device = 0;
	p.cuda_graphs = 1;
	return p;
}

tbc_model *tbc_create(const tbc_weights *w, const tbc_params *params) {
	if (!w) {
		set_err("tbc_create: no weights");
		return nullptr;
	}
	const tbc_params prm = params ? *params : tbc_default_params();
	const int device = prm.device;
	if (cudaSetDevice(device) != cudaSuccess) {
		set_err("tbc_create: device %d: %s", device, cudaGetErrorString(cudaGetLastError()));
		return nullptr;
	}
	tbc_model *m = new tbc_model();
	m->device = device;
	m->cuda_graphs = prm.cuda_graphs != 0;
	if (cudaDeviceGetAttribute(&m->sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) m->sms = 1;
	int cl = 0;
	m->clusters = cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, device) == cudaSuccess && cl;
	m->tc_pad[0] = one_cta_pad(device, k_gemm_tc<64, 64, true>);
	m->tc_pad[1] = one_cta_pad(device, k_gemm_tc<128, 32, true>);
	if (tbwg::image_has_wgmma(device)) {
		wgmma_smem(m, 0, 96, k_gemm_wg<96>);
		wgmma_smem(m, 1, 128, k_gemm_wg<128>);
	}
	if (build_model(m, w)) {
		tbc_destroy(m);
		return nullptr;
	}
	return m;
}

void tbc_destroy(tbc_model *m) {
	if (!m) return;
	cudaSetDevice(m->device);
	for (void *p : m->allocs) cudaFree(p);
	delete m;
}

int tbc_samples_per_frame(const tbc_model *m) { return m ? m->spf : 0; }

int tbc_max_pool_slots(void) { return kMaxSlots; }

tbc_pool *tbc_pool_create(tbc_model *m, int slots) {
	if (!m || slots < 1 || slots > kMaxSlots) {
		set_err("tbc_pool_create: %s (slots %d, 1..%d)", m ? "bad slot count" : "no model", slots, kMaxSlots);
		return nullptr;
	}
	if (cudaSetDevice(m->device) != cudaSuccess) {
		set_err("tbc_pool_create: device %d unavailable", m->device);
		return nullptr;
	}
	tbc_pool *s = new tbc_pool();
	s->m = m;
	s->slots = slots;
	if (build_pool(s)) {
		free_pool(s);
		return nullptr;
	}
	return s;
}

void tbc_pool_destroy(tbc_pool *s) {
	if (s) cudaSetDevice(s->m->device);
	free_pool(s);
}

int tbc_pool_slots(const tbc_pool *s) { return s ? s->slots : 0; }

int tbc_pool_reset(tbc_pool *s, int slot) {
	if (!s || slot < 0 || slot >= s->slots) {
		set_err("tbc_pool_reset: %s %d", s ? "slot outside the pool:" : "no pool; slot", slot);
		return -1;
	}
	CK(cudaSetDevice(s->m->device));
	return reset_slot(s, slot);
}

int tbc_pool_push(tbc_pool *s, const int32_t *slots, int n, const int32_t *codes, int frames, float *out) {
	if (!s || (frames > 0 && !out)) {
		set_err("tbc_pool_push: bad arguments");
		return -1;
	}
	if (check_push(s, slots, n, codes, frames)) return -1;
	CK(cudaSetDevice(s->m->device));
	const int spf = s->m->spf;
	bool first = false;
	for (int b = 0; b < n; b++) first |= s->fresh[slots[b]] != 0;
	cudaStream_t st = first && s->use_graph ? s->st_first : s->st;
	for (int t0 = 0; t0 < frames; t0 += kMaxT) {
		const int T = std::min(kMaxT, frames - t0);
		const int bi = stage(s, slots, n, codes, frames, t0, T);
		if (run_push(s, bi, T, st)) return -1;
		CK(cudaStreamSynchronize(st));
		for (int b = 0; b < n; b++) s->fresh[slots[b]] = 0;
		for (int b = 0; b < n; b++)
			memcpy(out + ((size_t)b * frames + t0) * spf, s->h_out + (size_t)b * T * spf, sizeof(float) * spf * T);
	}
	return 0;
}

int tbc_pool_warm(tbc_pool *s, int frames) {
	if (!s || frames < 1 || frames > kMaxT) {
		set_err("tbc_pool_warm: frames %d outside 1..%d", frames, kMaxT);
		return -1;
	}
	if (!s->use_graph) return 0;
	CK(cudaSetDevice(s->m->device));
	for (size_t bi = 0; bi < s->buckets.size(); bi++)
		if (!s->graphs[bi][frames] && capture(s, (int)bi, frames)) return -1;
	return 0;
}

int tbc_pool_bench(tbc_pool *s, int n, const int32_t *codes, int frames, int iters, float *ms) {
	if (!s || n < 1 || n > s->slots || frames < 1 || frames > kMaxT || iters < 1 || !codes || !ms) {
		set_err("tbc_pool_bench: bad arguments (streams 1..%d, frames per push 1..%d)", s ? s->slots : 0, kMaxT);
		return -1;
	}
	std::vector<int32_t> slots(n);
	for (int b = 0; b < n; b++) slots[b] = b;
	if (check_push(s, slots.data(), n, codes, frames * iters)) return -1;
	CK(cudaSetDevice(s->m->device));
	for (int it = 0; it < iters; it++) {
		// codes is [iters][n][frames][16]: push it's block, [n][frames][16].
		const int bi = stage(s, slots.data(), n, codes + (size_t)it * n * frames * 16, frames, 0, frames);
		CK(cudaEventRecord(s->ev0, s->st));
		if (run_push(s, bi, frames, s->st)) return -1;
		CK(cudaEventRecord(s->ev1, s->st));
		CK(cudaEventSynchronize(s->ev1));
		CK(cudaEventElapsedTime(&ms[it], s->ev0, s->ev1));
	}
	return 0;
}

} // extern "C"
