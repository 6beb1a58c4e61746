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

// ext is a causal op's input buffer: H history rows, then up to maxRows new rows.
struct Ext {
	float *p = nullptr;
	int C = 0, H = 0;
	float *at_new() const { return p + (size_t)H * C; }
};

} // namespace

struct tbc_stream {
	tbc_model *m = nullptr;
	cudaStream_t st = nullptr;
	bool dry = false, use_graph = true;
	size_t ws_need = 0, ws_floats = 0;
	float *ws = nullptr;
	int64_t frames = 0;
	int64_t *d_pos = nullptr;
	int32_t *d_codes = nullptr, *h_codes = nullptr;
	float *d_out = nullptr, *h_out = nullptr;
	float *z = nullptr, *x0 = nullptr, *h = nullptr, *qkv = nullptr, *att = nullptr, *gu = nullptr,
	      *ln = nullptr, *pw = nullptr, *xr = nullptr, *a2 = nullptr;
	float *kc = nullptr, *vc = nullptr; // [layers][cap][kv width]
	int cap = 0;
	Ext pre, voc0, fin;
	std::vector<Ext> upin, dw, tc;
	std::vector<std::array<Ext, 3>> unit;
	std::vector<std::pair<void *, size_t>> zero_on_reset;
	std::vector<void *> allocs;
	cudaGraphExec_t graphs[kMaxT + 1] = {};
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

int up_conv(tbc_model *m, DevConv &d, const tbc_conv &c, int in, int out, const char *what) {
	if (c.in != in || c.out != out || c.k < 1 || c.dil < 1) {
		set_err("codec weights: %s is %dx%d k%d d%d, want in %d out %d", what, c.in, c.out, c.k, c.dil, in, out);
		return -1;
	}
	d.in = in, d.out = out, d.k = c.k, d.dil = c.dil;
	if (upload(m, &d.w, c.w, (size_t)out * c.k * in, what)) return -1;
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
	if (upload_vec(m, &d.w, w)) return -1;
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

int build_model(tbc_model *m, const tbc_weights *w) {
	m->cfg = *w;
	const tbc_weights &c = *w;
	if (c.codebook_size < 1 || c.cb_dim < 1 || c.codebook_dim < 1 || c.latent < 1 || c.hidden < 1 || c.heads < 1 ||
	    c.kv_heads < 1 || c.heads % c.kv_heads || c.head_dim < 2 || c.head_dim % 2 || c.head_dim > 1024 ||
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

#define LAUNCH(kernel, grid, block, smem, ...)                                                                  \
	do {                                                                                                        \
		if (!s->dry) {                                                                                          \
			kernel<<<grid, block, smem, s->st>>>(__VA_ARGS__);                                                  \
			CK(cudaGetLastError());                                                                             \
		}                                                                                                       \
	} while (0)

Epi epi0() {
	Epi e;
	memset(&e, 0, sizeof e);
	e.snC = 1;
	return e;
}

Epi epi_out(float *out1, const float *bias) {
	Epi e = epi0();
	e.out1 = out1;
	e.bias = bias;
	return e;
}

Epi with_snake(Epi e, float *out2, const DevSnake &sn, int ch) {
	e.out2 = out2;
	e.snA = sn.a;
	e.snIB = sn.ib;
	e.snC = ch;
	return e;
}

// skinny launches k_skinny2 in the given A mode (see kernels.cuh) with KS
// warps per output column: enough columns x slices for ~4096 warps, each
// slice at least 128 values of K.
int skinny(tbc_stream *s, int mode, AOp a, const float *nw, double eps, const float *W, int M, int N, int K,
           const Epi &e) {
	const bool v4 = a.cin % 4 == 0 && K % 4 == 0;
	int KS = 1;
	while (KS < 8 && (long)N * KS < 4096 && K / (2 * KS) >= 128) KS *= 2;
	dim3 grid((N + 8 / KS - 1) / (8 / KS));
	void (*f)(AOp, const float *, double, const float *, int, int, int, int, Epi) = nullptr;
	switch (mode * 2 + (v4 ? 1 : 0)) {
	case 0: f = k_skinny2<0, false>; break;
	case 1: f = k_skinny2<0, true>; break;
	case 2: f = k_skinny2<1, false>; break;
	case 3: f = k_skinny2<1, true>; break;
	case 4: f = k_skinny2<2, false>; break;
	case 5: f = k_skinny2<2, true>; break;
	case 6: f = k_skinny2<3, false>; break;
	default: f = k_skinny2<3, true>; break;
	}
	LAUNCH(f, grid, 256, 0, a, nw, eps, W, M, N, K, KS, e);
	return 0;
}

// gemm computes the M x N product of an implicit im2col A (K = taps*cin) and
// weights W [N][K], with epilogue e. M <= SK_MAXM takes a warp-per-column
// kernel; larger M the tiled one, split over K when the tiles alone would
// leave most multiprocessors idle.
int gemm(tbc_stream *s, AOp a, const float *W, int M, int N, int K, const Epi &e) {
	if (M <= 0) return 0;
	const bool v4 = a.cin % 4 == 0 && K % 4 == 0;
	if (M <= SK_MAXM) return skinny(s, K == a.cin ? 1 : 0, a, nullptr, 0, W, M, N, K, e);
	const int BM = M <= 32 ? 32 : 64, BN = 64, BK = 32;
	const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
	const int nK = (K + BK - 1) / BK;
	const int target = 4 * s->m->sms;
	int S = 1;
	if (tiles < s->m->sms) {
		S = std::min((target + tiles - 1) / tiles, std::max(1, nK / 2));
		S = std::min(S, 64);
	}
	const int per = (nK + S - 1) / S;
	S = (nK + per - 1) / per;
	const int kChunk = per * BK;
	dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, S);
	if (S > 1) {
		s->ws_need = std::max(s->ws_need, (size_t)S * M * N);
		if (!s->dry && (size_t)S * M * N > s->ws_floats) {
			set_err("codec: split-K workspace too small (%zu > %zu floats)", (size_t)S * M * N, s->ws_floats);
			return -1;
		}
	}
	void (*tiled)(AOp, const float *, int, int, int, int, Epi, float *) =
	    BM == 32 ? (v4 ? k_gemm<32, 32, true> : k_gemm<32, 32, false>)
	             : (v4 ? k_gemm<64, 32, true> : k_gemm<64, 32, false>);
	LAUNCH(tiled, grid, 256, 0, a, W, M, N, K, kChunk, e, s->ws);
	if (S > 1) {
		int blocks = (int)std::min<size_t>(((size_t)M * N + 255) / 256, 4096);
		LAUNCH(k_splitk_epi, blocks, 256, 0, s->ws, S, M, N, e);
	}
	return 0;
}

int conv(tbc_stream *s, const Ext &in, const DevConv &c, int M, const Epi &e) {
	return gemm(s, AOp{in.p, c.in, c.dil}, c.w, M, c.out, c.k * c.in, e);
}

int linear(tbc_stream *s, const float *x, const DevConv &c, int M, const Epi &e) {
	return gemm(s, AOp{x, c.in, 1}, c.w, M, c.out, c.in, e);
}

// forward enqueues one push of T <= kMaxT frames whose codes are in
// s->h_codes; the samples land in s->h_out. With s->dry it only sizes the
// split-K workspace.
int forward(tbc_stream *s, int T) {
	tbc_model *m = s->m;
	const tbc_weights &c = m->cfg;
	if (!s->dry) CK(cudaMemcpyAsync(s->d_codes, s->h_codes, sizeof(int32_t) * 16 * T, cudaMemcpyHostToDevice, s->st));
	LAUNCH(k_dequant, T, 128, 0, s->d_codes, m->books, c.codebook_size, c.cb_dim, s->z);
	if (gemm(s, AOp{s->z, 2 * c.cb_dim, 1}, m->proj, T, c.codebook_dim, 2 * c.cb_dim, epi_out(s->pre.at_new(), nullptr)))
		return -1;
	if (conv(s, s->pre, m->pre_conv, T, epi_out(s->x0, m->pre_conv.b))) return -1;
	if (linear(s, s->x0, m->in_proj, T, epi_out(s->h, m->in_proj.b))) return -1;

	const int nh = c.heads, nkv = c.kv_heads, hd = c.head_dim, Hd = c.hidden, I = c.intermediate;
	const size_t kvl = (size_t)s->cap * nkv * hd;
	static_assert(kMaxT <= SK_MAXM, "the transformer's rows must fit the skinny kernels");
	// RMSNorm and SwiGLU are folded into the products' A reads,
	// so a layer is 6 launches: qkv, RoPE, attention, o, gate/up, down.
	for (int l = 0; l < c.layers; l++) {
		const DevLayer &L = m->layers[l];
		float *kc = s->kc + l * kvl, *vc = s->vc + l * kvl;
		if (skinny(s, 2, AOp{s->h, Hd, 1}, L.in_norm, c.rms_eps, L.wqkv, T, m->qkvw, Hd, epi_out(s->qkv, nullptr)))
			return -1;
		LAUNCH(k_rope_kv2, dim3(((nh + nkv) * hd / 2 + 255) / 256, T), 256, 0, s->qkv, kc, vc, m->inv_freq,
		       s->d_pos, nh, nkv, hd, s->cap);
		LAUNCH(k_attn2, dim3(nh, T), 128, sizeof(float) * (hd + c.window), s->qkv, kc, vc, s->att, s->d_pos, nh,
		       nkv, hd, c.window, s->cap, (float)(1.0 / sqrt((double)hd)));
		Epi e = epi_out(s->h, nullptr);
		e.scale = L.attn_scale;
		e.res = s->h;
		if (skinny(s, 1, AOp{s->att, nh * hd, 1}, nullptr, 0, L.wo, T, Hd, nh * hd, e)) return -1;
		if (skinny(s, 2, AOp{s->h, Hd, 1}, L.post_norm, c.rms_eps, L.wgu, T, 2 * I, Hd, epi_out(s->gu, nullptr)))
			return -1;
		e.scale = L.mlp_scale;
		if (skinny(s, 3, AOp{s->gu, I, 1}, nullptr, 0, L.wdown, T, Hd, I, e)) return -1;
	}
	// Upsampler: transposed conv, then ConvNeXt; the output of each stage is
	// written straight into the next op's ext buffer.
	const int Lt = c.latent;
	int R = T;
	float *dst = m->ups.empty() ? s->voc0.at_new() : s->upin[0].at_new();
	if (skinny(s, 2, AOp{s->h, Hd, 1}, m->final_norm, c.rms_eps, m->out_proj.w, T, Lt, Hd,
	           epi_out(dst, m->out_proj.b)))
		return -1;
	for (size_t i = 0; i < m->ups.size(); i++) {
		const DevUp &U = m->ups[i];
		if (conv(s, s->upin[i], U.up, R, epi_out(s->dw[i].at_new(), U.up.b))) return -1;
		R *= U.stride;
		LAUNCH(k_dwconv_ln, R, 256, sizeof(float) * Lt, s->dw[i].p, U.dw, U.dw_b, U.ln_w, U.ln_b, s->ln, Lt, 7);
		Epi g = epi_out(s->pw, U.pw1.b);
		g.gelu = 1;
		if (linear(s, s->ln, U.pw1, R, g)) return -1;
		Epi e = epi_out(i + 1 < m->ups.size() ? s->upin[i + 1].at_new() : s->voc0.at_new(), U.pw2.b);
		e.scale = U.gamma;
		e.res = s->dw[i].at_new();
		if (linear(s, s->pw, U.pw2, R, e)) return -1;
	}

	// Vocoder. Every SnakeBeta is applied once, in the epilogue of the op that
	// produces its input, and the activated rows are what the ext buffers keep.
	Epi e = with_snake(epi0(), s->tc[0].at_new(), m->blocks[0].act, m->voc0.out);
	e.bias = m->voc0.b;
	if (conv(s, s->voc0, m->voc0, R, e)) return -1;
	for (size_t b = 0; b < m->blocks.size(); b++) {
		const DevBlock &B = m->blocks[b];
		const int C = B.out;
		e = with_snake(epi_out(s->xr, B.up.b), s->unit[b][0].at_new(), B.units[0].act1, C);
		if (conv(s, s->tc[b], B.up, R, e)) return -1;
		R *= B.stride;
		for (int u = 0; u < 3; u++) {
			const DevUnit &U = B.units[u];
			e = with_snake(epi0(), s->a2, U.act2, C);
			e.bias = U.conv1.b;
			if (conv(s, s->unit[b][u], U.conv1, R, e)) return -1;
			e = epi0();
			e.bias = U.conv2.b;
			e.res = s->xr;
			if (u < 2) {
				e.out1 = s->xr;
				e = with_snake(e, s->unit[b][u + 1].at_new(), B.units[u + 1].act1, C);
			} else if (b + 1 < m->blocks.size()) {
				e = with_snake(e, s->tc[b + 1].at_new(), m->blocks[b + 1].act, C);
			} else {
				e = with_snake(e, s->fin.at_new(), m->final_act, C);
			}
			if (linear(s, s->a2, U.conv2, R, e)) return -1;
		}
	}
	const DevConv &F = m->final_conv;
	LAUNCH(k_final_conv, (R + 7) / 8, 256, 0, s->fin.p, F.w, F.b, F.in, F.k, F.dil, R, s->d_out);

	// Histories for the next push, and the RoPE position.
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
		sa.d[n++] = ShiftDesc{x.p, x.C, x.H, rows};
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
	sa.pos = s->d_pos;
	sa.T = T;
	if (n == 0) sa.d[n++] = ShiftDesc{s->fin.p, 1, 0, 1}; // the launch still advances the position
	LAUNCH(k_shift, dim3((maxC + 31) / 32, n), dim3(32, 8), 0, sa);
	if (!s->dry) CK(cudaMemcpyAsync(s->h_out, s->d_out, sizeof(float) * R, cudaMemcpyDeviceToHost, s->st));
	return 0;
}

// preload makes the runtime load every kernel now, so that no module load
// happens inside a stream capture.
int preload() {
	cudaFuncAttributes fa;
	CK(cudaFuncGetAttributes(&fa, k_gemm<32, 32, true>));
	CK(cudaFuncGetAttributes(&fa, k_gemm<32, 32, false>));
	CK(cudaFuncGetAttributes(&fa, k_gemm<64, 32, true>));
	CK(cudaFuncGetAttributes(&fa, k_gemm<64, 32, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<0, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<0, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<1, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<1, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<2, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<2, false>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<3, true>));
	CK(cudaFuncGetAttributes(&fa, k_skinny2<3, false>));
	CK(cudaFuncGetAttributes(&fa, k_rope_kv2));
	CK(cudaFuncGetAttributes(&fa, k_attn2));
	CK(cudaFuncGetAttributes(&fa, k_splitk_epi));
	CK(cudaFuncGetAttributes(&fa, k_dequant));
	CK(cudaFuncGetAttributes(&fa, k_dwconv_ln));
	CK(cudaFuncGetAttributes(&fa, k_final_conv));
	CK(cudaFuncGetAttributes(&fa, k_shift));
	return 0;
}

int alloc_ext(tbc_stream *s, Ext &x, int C, int H, int rows) {
	x.C = C, x.H = H;
	size_t n = (size_t)(H + rows) * C;
	if (dev_alloc(s->allocs, &x.p, n)) return -1;
	s->zero_on_reset.push_back({x.p, n * sizeof(float)});
	return 0;
}

int build_stream(tbc_stream *s) {
	tbc_model *m = s->m;
	const tbc_weights &c = m->cfg;
	const int T = kMaxT;
	CK(cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking));
	CK(cudaEventCreate(&s->ev0));
	CK(cudaEventCreate(&s->ev1));
	CK(cudaHostAlloc((void **)&s->h_codes, sizeof(int32_t) * 16 * T, cudaHostAllocDefault));
	CK(cudaHostAlloc((void **)&s->h_out, sizeof(float) * m->spf * T, cudaHostAllocDefault));
	void *p;
	CK(cudaMalloc(&p, sizeof(int64_t)));
	s->allocs.push_back(p);
	s->d_pos = (int64_t *)p;
	s->zero_on_reset.push_back({p, sizeof(int64_t)});
	CK(cudaMalloc(&p, sizeof(int32_t) * 16 * T));
	s->allocs.push_back(p);
	s->d_codes = (int32_t *)p;
	auto A = [&](float **q, size_t n) { return dev_alloc(s->allocs, q, n); };
	const int Lt = c.latent, Hd = c.hidden, I = c.intermediate;
	s->cap = c.window - 1 + T;
	const size_t kv = (size_t)c.layers * s->cap * c.kv_heads * c.head_dim;
	if (A(&s->d_out, (size_t)m->spf * T) || A(&s->z, (size_t)T * 2 * c.cb_dim) || A(&s->x0, (size_t)T * Lt) ||
	    A(&s->h, (size_t)T * Hd) || A(&s->qkv, (size_t)T * m->qkvw) ||
	    A(&s->att, (size_t)T * c.heads * c.head_dim) || A(&s->gu, (size_t)T * 2 * I) ||
	    A(&s->kc, kv) || A(&s->vc, kv))
		return -1;
	s->zero_on_reset.push_back({s->kc, kv * sizeof(float)});
	s->zero_on_reset.push_back({s->vc, kv * sizeof(float)});
	if (alloc_ext(s, s->pre, c.codebook_dim, (m->pre_conv.k - 1) * m->pre_conv.dil, T)) return -1;
	int R = T;
	size_t lnMax = 1, pwMax = 1;
	s->upin.resize(m->ups.size());
	s->dw.resize(m->ups.size());
	for (size_t i = 0; i < m->ups.size(); i++) {
		if (alloc_ext(s, s->upin[i], Lt, m->ups[i].up.k - 1, R)) return -1;
		R *= m->ups[i].stride;
		if (alloc_ext(s, s->dw[i], Lt, 6, R)) return -1;
		lnMax = std::max(lnMax, (size_t)R * Lt);
		pwMax = std::max(pwMax, (size_t)R * m->ups[i].pw1.out);
	}
	if (A(&s->ln, lnMax) || A(&s->pw, pwMax)) return -1;
	if (alloc_ext(s, s->voc0, Lt, (m->voc0.k - 1) * m->voc0.dil, R)) return -1;
	s->tc.resize(m->blocks.size());
	s->unit.resize(m->blocks.size());
	size_t xrMax = 1;
	int ch = m->voc0.out;
	for (size_t b = 0; b < m->blocks.size(); b++) {
		const DevBlock &B = m->blocks[b];
		if (alloc_ext(s, s->tc[b], ch, B.up.k - 1, R)) return -1;
		R *= B.stride;
		for (int u = 0; u < 3; u++)
			if (alloc_ext(s, s->unit[b][u], B.out, (B.units[u].conv1.k - 1) * B.units[u].conv1.dil, R)) return -1;
		xrMax = std::max(xrMax, (size_t)R * B.out);
		ch = B.out;
	}
	if (A(&s->xr, xrMax) || A(&s->a2, xrMax)) return -1;
	if (alloc_ext(s, s->fin, ch, (m->final_conv.k - 1) * m->final_conv.dil, R)) return -1;
	// Size the split-K workspace for every push size.
	s->dry = true;
	for (int t = 1; t <= kMaxT; t++)
		if (forward(s, t)) return -1;
	s->dry = false;
	s->ws_floats = s->ws_need;
	if (s->ws_floats && A(&s->ws, s->ws_floats)) return -1;
	if (preload()) return -1;
	s->use_graph = m->cuda_graphs;
	return 0;
}

int reset_stream(tbc_stream *s) {
	for (auto &z : s->zero_on_reset) CK(cudaMemsetAsync(z.first, 0, z.second, s->st));
	CK(cudaStreamSynchronize(s->st));
	s->frames = 0;
	return 0;
}

// run_push enqueues one sub-push of T frames (codes already in h_codes),
// through the graph captured for T (captured on first use).
int run_push(tbc_stream *s, int T) {
	if (!s->use_graph) return forward(s, T);
	if (!s->graphs[T]) {
		CK(cudaStreamBeginCapture(s->st, cudaStreamCaptureModeThreadLocal));
		int rc = forward(s, T);
		cudaGraph_t g = nullptr;
		cudaError_t ec = cudaStreamEndCapture(s->st, &g);
		if (rc) {
			if (g) cudaGraphDestroy(g);
			return -1;
		}
		CK(ec);
		cudaError_t ei = cudaGraphInstantiateWithFlags(&s->graphs[T], g, 0);
		cudaGraphDestroy(g);
		CK(ei);
	}
	CK(cudaGraphLaunch(s->graphs[T], s->st));
	return 0;
}

int check_codes(const tbc_stream *s, const int32_t *codes, int n) {
	const int rows = s->m->cfg.codebook_size;
	for (int i = 0; i < n * 16; i++) {
		if (codes[i] < 0 || codes[i] >= rows) {
			set_err("codec: frame %d group %d: code %d outside 0..%d", i / 16, i % 16, codes[i], rows - 1);
			return -1;
		}
	}
	return 0;
}

void free_stream(tbc_stream *s) {
	if (!s) return;
	if (s->st) cudaStreamSynchronize(s->st);
	for (auto &g : s->graphs)
		if (g) cudaGraphExecDestroy(g);
	for (void *p : s->allocs) cudaFree(p);
	if (s->h_codes) cudaFreeHost(s->h_codes);
	if (s->h_out) cudaFreeHost(s->h_out);
	if (s->ev0) cudaEventDestroy(s->ev0);
	if (s->ev1) cudaEventDestroy(s->ev1);
	if (s->st) cudaStreamDestroy(s->st);
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

tbc_stream *tbc_stream_create(tbc_model *m) {
	if (!m) {
		set_err("tbc_stream_create: no model");
		return nullptr;
	}
	if (cudaSetDevice(m->device) != cudaSuccess) {
		set_err("tbc_stream_create: device %d unavailable", m->device);
		return nullptr;
	}
	tbc_stream *s = new tbc_stream();
	s->m = m;
	if (build_stream(s) || reset_stream(s)) {
		free_stream(s);
		return nullptr;
	}
	return s;
}

void tbc_stream_destroy(tbc_stream *s) {
	if (s) cudaSetDevice(s->m->device);
	free_stream(s);
}

int tbc_reset(tbc_stream *s) {
	if (!s) {
		set_err("tbc_reset: no stream");
		return -1;
	}
	CK(cudaSetDevice(s->m->device));
	return reset_stream(s);
}

int64_t tbc_frames(const tbc_stream *s) { return s ? s->frames : 0; }

int tbc_push(tbc_stream *s, const int32_t *codes, int n, float *out) {
	if (!s || n < 0 || (n > 0 && (!codes || !out))) {
		set_err("tbc_push: bad arguments");
		return -1;
	}
	if (check_codes(s, codes, n)) return -1;
	CK(cudaSetDevice(s->m->device));
	const int spf = s->m->spf;
	for (int i = 0; i < n; i += kMaxT) {
		const int T = std::min(kMaxT, n - i);
		memcpy(s->h_codes, codes + (size_t)i * 16, sizeof(int32_t) * 16 * T);
		if (run_push(s, T)) return -1;
		CK(cudaStreamSynchronize(s->st));
		memcpy(out + (size_t)i * spf, s->h_out, sizeof(float) * spf * T);
		s->frames += T;
	}
	return 0;
}

int tbc_bench(tbc_stream *s, const int32_t *codes, int n, int iters, float *ms) {
	if (!s || n < 1 || n > kMaxT || iters < 1 || !codes || !ms) {
		set_err("tbc_bench: bad arguments (frames per push 1..%d)", kMaxT);
		return -1;
	}
	if (check_codes(s, codes, n * iters)) return -1;
	CK(cudaSetDevice(s->m->device));
	for (int it = 0; it < iters; it++) {
		memcpy(s->h_codes, codes + (size_t)it * n * 16, sizeof(int32_t) * 16 * n);
		CK(cudaEventRecord(s->ev0, s->st));
		if (run_push(s, n)) return -1;
		CK(cudaEventRecord(s->ev1, s->st));
		CK(cudaEventSynchronize(s->ev1));
		CK(cudaEventElapsedTime(&ms[it], s->ev0, s->ev1));
		s->frames += n;
	}
	return 0;
}

} // extern "C"
