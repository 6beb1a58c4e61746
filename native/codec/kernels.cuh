// Kernels of the streaming codec decoder. Every tensor is time-major
// ([rows][channels], channels contiguous). A causal conv reads an "ext"
// buffer: H history rows, then the new rows, so im2col needs no copy.
//
// One launch decodes a push for several streams at once. The rows of a
// product are the members' rows one member after another (member b owns
// logical rows b·R .. b·R+R-1); scratch buffers are dense in that order,
// while each stream's state (its ext buffers) sits in its own slot of a
// per-pool array, which Rows maps to.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#include "../src/cp_async.cuh"
#include "../src/dep_launch.cuh"

namespace tbc {

// Rows maps logical row m (member b = m / R, its row r = m % R) of rows w
// floats wide to its float offset slot[b]·stride + off + r·w in a slotted
// buffer (stride and off in floats, so a transposed conv may write rows
// `stride` times wider than its target's). With slot null the rows are
// dense from off: off + m·w (a scratch buffer, or the one slot of a pool of
// one).
struct Rows {
	const int *slot;
	int R;
	size_t stride, off;
};

__device__ __forceinline__ size_t phys(const Rows &r, int m, size_t w) {
	if (!r.slot) return r.off + (size_t)m * w;
	const int b = m < r.R ? 0 : m / r.R;
	return (size_t)__ldg(r.slot + b) * r.stride + r.off + (size_t)(m - b * r.R) * w;
}

// AOp describes the left operand of a product as an implicit im2col of a
// causal conv input: A(m, kk) = x[phys(rows, m, cin) + ((kk / cin) * dil) * cin
// + kk % cin]. A Linear is the case K = cin (one tap).
struct AOp {
	const float *x;
	int cin, dil;
	Rows rows;
};

// Epi is what happens to each product element acc at (m, n), in order:
// v = acc + bias[n]; v *= scale[n]; v += res[m][n]; v = gelu(v); clamp;
// out1[m][n] = v; out2[m][n] = snake(v) with channel n % snC, each of
// res, out1 and out2 at the physical row its Rows gives. Every pointer may
// be null. res may alias out1 (each element is read and written by the same
// thread).
struct Epi {
	const float *bias, *scale, *res;
	float *out1, *out2;
	const float *snA, *snIB;
	int snC, gelu, clamp;
	Rows rres, rout1, rout2;
};

// snake is SnakeBeta with precomputed a = exp(alpha), ib = 1/(exp(beta)+1e-9),
// in float32 as engine/codec/snake computes it on the CPU: sin² has period
// π, so u = v·a is reduced by the nearest multiple of π (π in two parts, the
// second applied by FMA: float32 accuracy for |u| < 2^16), then sin r is its
// series to r¹¹ on [-π/2, π/2] (truncation < 6e-8). No double precision in
// the products' epilogues, where the snake of every output is taken.
__device__ __forceinline__ float snake(float v, float a, float ib) {
	const float u = v * a;
	const float k = rintf(u * 0.318309886183790671538f);
	float r = fmaf(-k, 3.14159274101257324219f, u);
	r = fmaf(-k, -8.74227800037248952e-8f, r);
	const float r2 = r * r;
	float p = fmaf(r2, -1.0f / 39916800, 1.0f / 362880);
	p = fmaf(r2, p, -1.0f / 5040);
	p = fmaf(r2, p, 1.0f / 120);
	p = fmaf(r2, p, -1.0f / 6);
	const float s = fmaf(r, r2 * p, r);
	return fmaf(ib, s * s, v);
}

// EpiCol is what the epilogue reads of column n: its bias, scale and
// SnakeBeta parameters (neutral where the epilogue has none).
struct EpiCol {
	float bias, scale, snA, snIB;
};

__device__ __forceinline__ EpiCol epi_col(const Epi &e, int n) {
	EpiCol c{0.f, 1.f, 0.f, 0.f};
	if (e.bias) c.bias = e.bias[n];
	if (e.scale) c.scale = e.scale[n];
	if (e.out2) {
		const int k = n % e.snC;
		c.snA = e.snA[k];
		c.snIB = e.snIB[k];
	}
	return c;
}

// EpiRow is where row m of the epilogue's residual and outputs start.
struct EpiRow {
	size_t res, out1, out2;
};

__device__ __forceinline__ EpiRow epi_row(const Epi &e, int N, int m) {
	return EpiRow{e.res ? phys(e.rres, m, N) : 0, e.out1 ? phys(e.rout1, m, N) : 0, e.out2 ? phys(e.rout2, m, N) : 0};
}

// epi_put is the epilogue of one element (row r, column n, whose
// parameters are c).
__device__ __forceinline__ void epi_put(const Epi &e, const EpiRow &r, const EpiCol &c, int n, float acc) {
	float v = acc;
	if (e.bias) v += c.bias;
	if (e.scale) v *= c.scale;
	if (e.res) v += e.res[r.res + n];
	if (e.gelu) {
		double d = v;
		v = (float)(0.5 * d * (1.0 + erf(d / 1.4142135623730951)));
	}
	if (e.clamp) v = fminf(fmaxf(v, -1.f), 1.f);
	if (e.out1) e.out1[r.out1 + n] = v;
	if (e.out2) e.out2[r.out2 + n] = snake(v, c.snA, c.snIB);
}

__device__ __forceinline__ void epi_store(const Epi &e, int N, int m, int n, float acc) {
	epi_put(e, epi_row(e, N, m), epi_col(e, n), n, acc);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ int im2col_off(const AOp &a, int kk) {
	int j = kk / a.cin;
	return j * a.dil * a.cin + (kk - j * a.cin);
}

template <typename T>
__device__ T block_sum(T v, T *red) {
	const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads();
	if (lane == 0) red[wid] = v;
	__syncthreads();
	T s = 0;
	for (int i = 0; i < nw; i++) s += red[i];
	return s;
}

// ---------------------------------------------------------------------------
// Skinny product for M <= SK_MAXM rows (a streaming push of one frame is
// M = 1 in the transformer and 2..4 in the upsampler).
constexpr int SK_MAXM = 8;

// ---------------------------------------------------------------------------
// Skinny product: KS warps of a block share one output column,
// each streaming a K/KS slice of its weight row four 16-byte loads at a time,
// and the slices meet in shared memory, so even N = 512 puts thousands of
// warps' loads in flight. xr is the start of row m of A. MODE says how A is
// read:
//   0 im2col of a causal conv input, 1 plain rows (K = cin),
//   2 plain rows through RMSNorm (weight nw, eps; the per-row scale is
//     computed by the block first, in double as on the CPU),
//   3 SwiGLU of fused [gate | up] rows of width 2K: silu(g)·u.
// V4 needs K and cin multiples of 4.
template <int MODE>
__device__ __forceinline__ float4 loadA4(const AOp &a, const float *xr, int kk, int K, const float *nw, float r) {
	if (MODE == 0) return __ldg(reinterpret_cast<const float4 *>(xr + im2col_off(a, kk)));
	if (MODE == 1) return __ldg(reinterpret_cast<const float4 *>(xr + kk));
	if (MODE == 2) {
		float4 x = __ldg(reinterpret_cast<const float4 *>(xr + kk));
		float4 w = __ldg(reinterpret_cast<const float4 *>(nw + kk));
		return make_float4(w.x * (x.x * r), w.y * (x.y * r), w.z * (x.z * r), w.w * (x.w * r));
	}
	float4 g = __ldg(reinterpret_cast<const float4 *>(xr + kk));
	float4 u = __ldg(reinterpret_cast<const float4 *>(xr + K + kk));
	return make_float4(g.x / (1.f + expf(-g.x)) * u.x, g.y / (1.f + expf(-g.y)) * u.y, g.z / (1.f + expf(-g.z)) * u.z,
	                   g.w / (1.f + expf(-g.w)) * u.w);
}

template <int MODE>
__device__ __forceinline__ float loadA1(const AOp &a, const float *xr, int kk, int K, const float *nw, float r) {
	if (MODE == 0) return __ldg(xr + im2col_off(a, kk));
	if (MODE == 1) return __ldg(xr + kk);
	if (MODE == 2) return nw[kk] * (__ldg(xr + kk) * r);
	float g = __ldg(xr + kk), u = __ldg(xr + K + kk);
	return g / (1.f + expf(-g)) * u;
}

// The width of a row of A: cin for a conv input, K for plain rows, 2K for
// SwiGLU's [gate | up].
template <int MODE>
__device__ __forceinline__ size_t widthA(const AOp &a, int K) {
	return MODE == 0 ? (size_t)a.cin : MODE == 3 ? 2 * (size_t)K : (size_t)K;
}

// SLOT: A's rows are slotted (a.rows.slot set); each row's offset is then
// found once. Dense rows keep the plain m·width address, which costs no
// registers (the transformer's products, always dense, are most of a push).
// The transformer's modes (2, 3) are held to 3 blocks an SM: left alone,
// nvcc gives them 104 registers (2 blocks) for the row maps' epilogue, and
// these bandwidth-bound products need the warps.
template <int MODE, bool V4, bool SLOT>
__global__ void __launch_bounds__(256, MODE >= 2 ? 3 : 0) k_skinny2(AOp a, const float *__restrict__ nw, double eps,
                                                 const float *__restrict__ W, int M, int N, int K, int KS, Epi e) {
	dep_start();
	__shared__ float red[8][SK_MAXM];
	__shared__ float rs[SK_MAXM];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int cols = 8 / KS;
	const int n = blockIdx.x * cols + warp / KS, ks = warp % KS;
	if (MODE == 2) {
		if (warp < M) {
			double ss = 0;
			for (int k = lane; k < K; k += 32) {
				double v = a.x[(size_t)warp * K + k]; // modes 2 and 3 are dense
				ss += v * v;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
			if (lane == 0) rs[warp] = (float)(1.0 / sqrt(ss / K + eps));
		}
		__syncthreads();
	}
	unsigned xo[SLOT ? SK_MAXM : 1]; // slotted rows' offsets (< 2^32 floats: a pool is far smaller)
#pragma unroll
	for (int m = 0; m < (SLOT ? SK_MAXM : 1); m++) xo[m] = SLOT && m < M ? (unsigned)phys(a.rows, m, widthA<MODE>(a, K)) : 0;
	auto xr = [&](int m) { return a.x + (SLOT ? (size_t)xo[SLOT ? m : 0] : (size_t)m * widthA<MODE>(a, K)); };
	const int kc = ((K + KS - 1) / KS + 3) & ~3;
	const int k0 = ks * kc, k1 = min(K, k0 + kc);
	float acc[SK_MAXM];
#pragma unroll
	for (int m = 0; m < SK_MAXM; m++) acc[m] = 0.f;
	if (n < N) {
		const float *w = W + (size_t)n * K;
		if (V4) {
			int kk = k0 + lane * 4;
			for (; kk + 3 * 128 < k1; kk += 4 * 128) {
				float4 wv[4];
#pragma unroll
				for (int u = 0; u < 4; u++) wv[u] = __ldg(reinterpret_cast<const float4 *>(w + kk + u * 128));
#pragma unroll
				for (int u = 0; u < 4; u++) {
#pragma unroll
					for (int m = 0; m < SK_MAXM; m++) {
						if (m < M) {
							float4 xv = loadA4<MODE>(a, xr(m), kk + u * 128, K, nw, MODE == 2 ? rs[m] : 0.f);
							acc[m] = fmaf(wv[u].x, xv.x, acc[m]);
							acc[m] = fmaf(wv[u].y, xv.y, acc[m]);
							acc[m] = fmaf(wv[u].z, xv.z, acc[m]);
							acc[m] = fmaf(wv[u].w, xv.w, acc[m]);
						}
					}
				}
			}
			for (; kk < k1; kk += 128) {
				float4 wv = __ldg(reinterpret_cast<const float4 *>(w + kk));
#pragma unroll
				for (int m = 0; m < SK_MAXM; m++) {
					if (m < M) {
						float4 xv = loadA4<MODE>(a, xr(m), kk, K, nw, MODE == 2 ? rs[m] : 0.f);
						acc[m] = fmaf(wv.x, xv.x, acc[m]);
						acc[m] = fmaf(wv.y, xv.y, acc[m]);
						acc[m] = fmaf(wv.z, xv.z, acc[m]);
						acc[m] = fmaf(wv.w, xv.w, acc[m]);
					}
				}
			}
		} else {
			for (int kk = k0 + lane; kk < k1; kk += 32) {
				float wv = __ldg(w + kk);
#pragma unroll
				for (int m = 0; m < SK_MAXM; m++)
					if (m < M) acc[m] = fmaf(wv, loadA1<MODE>(a, xr(m), kk, K, nw, MODE == 2 ? rs[m] : 0.f), acc[m]);
			}
		}
	}
#pragma unroll
	for (int m = 0; m < SK_MAXM; m++) {
		float v = warp_sum(acc[m]);
		if (lane == 0) red[warp][m] = v;
	}
	__syncthreads();
	for (int i = threadIdx.x; i < cols * M; i += blockDim.x) {
		const int c = i / M, m = i % M, nn = blockIdx.x * cols + c;
		if (nn >= N) continue;
		float v = 0.f;
		for (int z = 0; z < KS; z++) v += red[c * KS + z][m];
		epi_store(e, N, m, nn, v);
	}
}

// The transformer's rows in a push: T per member, member b's stream in slot
// slot[b], whose K/V ring starts kvSlot floats after slot 0's and whose
// position is pos[slot[b]].
struct TRows {
	const int *slot;
	int T;
	size_t kvSlot;
	const int64_t *pos;
};

// RoPE: one thread per rotated pair, float32 sincos (accurate to
// a few ulp over the whole range without fast math), several blocks per row.
__global__ void k_rope_kv2(float *__restrict__ qkv, float *__restrict__ Kc, float *__restrict__ Vc,
                           const float *__restrict__ invf, TRows tr, int nh, int nkv, int hd, int cap) {
	dep_start();
	const int y = blockIdx.y, b = y / tr.T, sl = __ldg(tr.slot + b);
	const int64_t pos = tr.pos[sl] + (y - b * tr.T);
	const int half = hd / 2, kvw = nkv * hd;
	float *row = qkv + (size_t)y * (nh * hd + 2 * kvw);
	float *k = row + nh * hd, *v = k + kvw;
	float *kc = Kc + sl * tr.kvSlot + (size_t)(pos % cap) * kvw, *vc = Vc + sl * tr.kvSlot + (size_t)(pos % cap) * kvw;
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < (nh + nkv) * half) {
		int h = i / half, j = i % half;
		float s, c;
		sincosf(invf[j] * (float)pos, &s, &c);
		float *p = h < nh ? row + h * hd : k + (h - nh) * hd;
		float x1 = p[j], x2 = p[j + half];
		float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
		if (h < nh) {
			p[j] = y1;
			p[j + half] = y2;
		} else {
			int o = (h - nh) * hd;
			kc[o + j] = y1;
			kc[o + j + half] = y2;
		}
	}
	for (int q = i; q < kvw; q += gridDim.x * blockDim.x) vc[q] = v[q];
}

// Attention for a push of one stream: one block of 4 warps per (head, row);
// scores one key per warp at a time with the head dimension across lanes
// (coalesced rows), then each thread owns output dims and sums keys in an
// unrolled loop. k_attn below takes a push ~0.2 ms sooner (H100: a full
// window 54.5 -> 15.4 us a launch, a one-stream push 1.12 -> 0.92 ms), but
// with it a lone utterance ran slower end to end (RTF 0.0358 -> 0.0362, the
// LM's frame 2.83 -> 2.86 ms beside the codec; H100, interleaved runs):
// that path keeps this form. Dynamic shared memory: hd + win floats.
__global__ void __launch_bounds__(128) k_attn_lone(const float *__restrict__ qkv, const float *__restrict__ Kc0,
                                                   const float *__restrict__ Vc0, float *__restrict__ out, TRows tr,
                                                   int nh, int nkv, int hd, int win, int cap, float scale) {
	dep_start();
	extern __shared__ float sm[];
	__shared__ float red[32];
	const int h = blockIdx.x, t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int b = t / tr.T, sl = __ldg(tr.slot + b);
	const float *Kc = Kc0 + sl * tr.kvSlot, *Vc = Vc0 + sl * tr.kvSlot;
	const int64_t pos = tr.pos[sl] + (t - b * tr.T);
	const int64_t first = pos - win + 1 > 0 ? pos - win + 1 : 0;
	const int n = (int)(pos - first + 1);
	const int kvw = nkv * hd, kh = h / (nh / nkv);
	float *q = sm, *p = sm + hd;
	const float *qr = qkv + (size_t)t * (nh * hd + 2 * kvw) + h * hd;
	for (int e = threadIdx.x; e < hd; e += blockDim.x) q[e] = qr[e];
	__syncthreads();
	for (int j = warp; j < n; j += 4) {
		const float *kr = Kc + (size_t)((first + j) % cap) * kvw + kh * hd;
		float s = 0.f;
		for (int e = lane; e < hd; e += 32) s = fmaf(q[e], kr[e], s);
		s = warp_sum(s);
		if (lane == 0) p[j] = s * scale;
	}
	__syncthreads();
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, p[j]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	if (lane == 0) red[warp] = mx;
	__syncthreads();
	mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
	__syncthreads();
	float sum = 0.f;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float ev = expf(p[j] - mx);
		p[j] = ev;
		sum += ev;
	}
	sum = block_sum(sum, red);
	__syncthreads();
	for (int j = threadIdx.x; j < n; j += blockDim.x) p[j] /= sum;
	__syncthreads();
	for (int e = threadIdx.x; e < hd; e += blockDim.x) {
		float o = 0.f;
		const float *vb = Vc + kh * hd + e;
#pragma unroll 8
		for (int j = 0; j < n; j++) o = fmaf(p[j], vb[(size_t)((first + j) % cap) * kvw], o);
		out[(size_t)t * nh * hd + h * hd + e] = o;
	}
}

// Attention over the sliding window: one block of 4 warps a (head, row).
// Each 8 lanes score one key (its row read coalesced, q from shared
// memory), 16 keys at once and up to 80 with their loads issued together;
// every warp then finds the softmax's max and sum over the scores in shared
// memory (the same sums in each), and warp w adds positions w, w + 4, ...
// into two output dims a lane; the four partial rows are added in warp
// order. The earlier form, each warp scoring one key at a time across its
// lanes and one thread an output dim over the whole window, waited for ~27
// round trips to memory: ~33 us a launch at any stream count (H100, ncu),
// 8 launches a tenth of a 16-stream codec launch. For launches of several
// streams (a push of one keeps k_attn_lone). hd a multiple of 4.
constexpr int ATT_T = 128, ATT_WARPS = ATT_T / 32;
constexpr int ATT_KEYS = ATT_T / 8; // keys scored at once, 8 lanes each
constexpr int ATT_ROUNDS = 5;        // ... whose loads are issued together
__host__ __device__ constexpr int attn_round4(int x) { return (x + 3) / 4 * 4; }
// Dynamic shared memory: q, the scores, the warps' partial outputs.
constexpr size_t attn_smem(int hd, int win) { return sizeof(float) * ((1 + ATT_WARPS) * hd + attn_round4(win)); }

__global__ void __launch_bounds__(ATT_T) k_attn(const float *__restrict__ qkv, const float *__restrict__ Kc0,
                                                const float *__restrict__ Vc0, float *__restrict__ out, TRows tr,
                                                int nh, int nkv, int hd, int win, int cap, float scale) {
	dep_start();
	extern __shared__ __align__(16) float sm[];
	const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int grp = tid >> 3, sub = tid & 7;
	const int b = t / tr.T, sl = __ldg(tr.slot + b);
	const float *Kc = Kc0 + sl * tr.kvSlot, *Vc = Vc0 + sl * tr.kvSlot;
	const int64_t pos = tr.pos[sl] + (t - b * tr.T);
	const int64_t first = pos - win + 1 > 0 ? pos - win + 1 : 0;
	const int n = (int)(pos - first + 1);
	const int kvw = nkv * hd, kh = h / (nh / nkv), h4 = hd / 4;
	float *q = sm, *p = sm + hd, *part = p + attn_round4(win);
	const float *qr = qkv + (size_t)t * (nh * hd + 2 * kvw) + h * hd;
	for (int e = tid; e < hd; e += ATT_T) q[e] = qr[e];
	__syncthreads();
	const float4 *q4 = reinterpret_cast<const float4 *>(q);
	for (int j0 = 0; j0 < n; j0 += ATT_ROUNDS * ATT_KEYS) {
		// The first 64 dims of every key a lane scores are loaded before any
		// is used; dims past 64 (no such head here) after.
		const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
		const float4 *kr[ATT_ROUNDS];
		float4 kv[ATT_ROUNDS][2];
#pragma unroll
		for (int u = 0; u < ATT_ROUNDS; u++) {
			const int j = j0 + u * ATT_KEYS + grp;
			kr[u] = j < n ? reinterpret_cast<const float4 *>(Kc + (size_t)((first + j) % cap) * kvw + kh * hd) : nullptr;
			kv[u][0] = kr[u] && sub < h4 ? kr[u][sub] : zero;
			kv[u][1] = kr[u] && sub + 8 < h4 ? kr[u][sub + 8] : zero;
		}
		const float4 qa = sub < h4 ? q4[sub] : zero, qb = sub + 8 < h4 ? q4[sub + 8] : zero;
		float s[ATT_ROUNDS];
#pragma unroll
		for (int u = 0; u < ATT_ROUNDS; u++) {
			float a = 0.f;
			a = fmaf(qa.x, kv[u][0].x, a);
			a = fmaf(qa.y, kv[u][0].y, a);
			a = fmaf(qa.z, kv[u][0].z, a);
			a = fmaf(qa.w, kv[u][0].w, a);
			a = fmaf(qb.x, kv[u][1].x, a);
			a = fmaf(qb.y, kv[u][1].y, a);
			a = fmaf(qb.z, kv[u][1].z, a);
			a = fmaf(qb.w, kv[u][1].w, a);
			if (kr[u])
				for (int i = sub + 16; i < h4; i += 8) {
					const float4 k = kr[u][i], qq = q4[i];
					a = fmaf(qq.x, k.x, a);
					a = fmaf(qq.y, k.y, a);
					a = fmaf(qq.z, k.z, a);
					a = fmaf(qq.w, k.w, a);
				}
			s[u] = a;
		}
#pragma unroll
		for (int u = 0; u < ATT_ROUNDS; u++) {
			float v = s[u];
			v += __shfl_xor_sync(0xffffffffu, v, 4);
			v += __shfl_xor_sync(0xffffffffu, v, 2);
			v += __shfl_xor_sync(0xffffffffu, v, 1);
			const int j = j0 + u * ATT_KEYS + grp;
			if (sub == 0 && j < n) p[j] = v * scale;
		}
	}
	__syncthreads();
	float mx = -INFINITY;
	for (int j = lane; j < n; j += 32) mx = fmaxf(mx, p[j]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	float sum = 0.f;
	for (int j = lane; j < n; j += 32) sum += expf(p[j] - mx);
	sum = warp_sum(sum);
	for (int d = 2 * lane; d < hd; d += 64) {
		float2 o = make_float2(0.f, 0.f);
		const float *vb = Vc + kh * hd + d;
#pragma unroll 6
		for (int j = warp; j < n; j += ATT_WARPS) {
			const float w = expf(p[j] - mx) / sum;
			const float2 v = *reinterpret_cast<const float2 *>(vb + (size_t)((first + j) % cap) * kvw);
			o.x = fmaf(w, v.x, o.x);
			o.y = fmaf(w, v.y, o.y);
		}
		*reinterpret_cast<float2 *>(part + warp * hd + d) = o;
	}
	__syncthreads();
	for (int d = tid; d < hd; d += ATT_T) {
		float o = part[d];
		for (int w = 1; w < ATT_WARPS; w++) o += part[w * hd + d];
		out[(size_t)t * nh * hd + h * hd + d] = o;
	}
}

// ---------------------------------------------------------------------------
// 3xTF32 on the tensor cores: x = hi + lo with hi and lo TF32, and
// a·b ~ a_hi·b_hi + a_hi·b_lo + a_lo·b_hi in float32 accumulators, which
// keeps float32's accuracy (the dropped a_lo·b_lo is 2^-22 of a product).
// hi is x rounded to nearest on its top 19 bits (ties away from zero, as
// cvt.rna), lo the exact rest x - hi cut to TF32 (an error of at most 2^-21
// of x): four integer and float operations. cvt.rna.tf32.f32 itself is no
// single instruction on sm_80/sm_90 (ptxas expands it with NaN and range
// checks), and the two of a split were most of the product's instructions.
// Inputs are finite activations and weights; the rounding would carry a
// value within 2^-11 of FLT_MAX into infinity.
__device__ __forceinline__ uint32_t round_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }

// dst[i] = src[i] rounded to nearest TF32 (round_tf32), for i < n (dst may
// be src): weights that k_gemm_wg's tensor cores read from shared memory,
// rounded once at load.
__global__ void k_round_tf32(const float *src, float *dst, size_t n) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		dst[i] = __uint_as_float(round_tf32(src[i]));
}

__device__ __forceinline__ void split_tf32(float x, uint32_t &hi, uint32_t &lo) {
	hi = round_tf32(x);
	lo = __float_as_uint(x - __uint_as_float(hi)) & 0xffffe000u;
}

// x as k_gemm_tc's operand: rounded to TF32 (ONE_PASS, lo untouched) or split.
template <bool ONE_PASS>
__device__ __forceinline__ void tf32_operand(float x, uint32_t &hi, uint32_t &lo) {
	if (ONE_PASS)
		hi = round_tf32(x);
	else
		split_tf32(x, hi, lo);
}

// c += a·b for one m16n8k8 tile (A row-major, B column-major fragments).
__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
	             "{%0,%1,%2,%3};"
	             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// gemm_out stores a tiled product's element (m, n): through the epilogue, or
// as a raw partial sum of K slice blockIdx.z when K is split.
__device__ __forceinline__ void gemm_out(const Epi &e, float *ws, int M, int N, int m, int n, float v) {
	if (m >= M || n >= N) return;
	if (gridDim.z == 1)
		epi_store(e, N, m, n, v);
	else
		ws[((size_t)blockIdx.z * M + m) * N + n] = v;
}

// ---------------------------------------------------------------------------
// Tiled product for larger M (the vocoder's residual units: 32..1920 rows per
// frame and stream) on float32 FMA: BM x 64 tiles, BK deep, 256 threads each
// owning (BM/16) x 4 outputs, the next tile prefetched into registers while
// the current one is used. gridDim.z > 1 splits K; each slice then writes raw
// partial sums to ws[z][M][N] and k_splitk_epi adds them in a fixed order
// (deterministic). k_gemm_tc below takes the aligned products of M > 32.
template <int BM, int BK, bool V4>
__global__ void __launch_bounds__(256) k_gemm(AOp a, const float *__restrict__ W, int M, int N, int K, int kChunk,
                                              Epi e, float *__restrict__ ws) {
	dep_start();
	constexpr int BN = 64, TM = BM / 16, TN = 4, Q = BK / 4; // Q float4 per tile row
	constexpr int LA = (BM * Q + 255) / 256, LB = (BN * Q) / 256;
	static_assert(LB >= 1 && (BN * Q) % 256 == 0, "tile shape");
	__shared__ __align__(16) float As[BK][BM + 4];
	__shared__ __align__(16) float Bs[BK][BN + 4];
	const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	const int kb = blockIdx.z * kChunk;
	const int ke = min(K, kb + kChunk);

	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

	// Loader l of this thread covers tile row idx / Q, k offset (idx % Q)·4;
	// its row's physical start is found once (null past the tile or M).
	const float *arow[LA];
#pragma unroll
	for (int l = 0; l < LA; l++) {
		const int idx = tid + l * 256, lr = idx / Q, m = m0 + lr;
		arow[l] = lr < BM && m < M ? a.x + phys(a.rows, m, a.cin) : nullptr;
	}
	auto loadA = [&](int k0, int l) {
		float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
		const int kk = k0 + ((tid + l * 256) % Q) * 4;
		const float *x = arow[l];
		if (!x) return r;
		if (V4) {
			if (kk < ke) r = __ldg(reinterpret_cast<const float4 *>(x + im2col_off(a, kk)));
		} else {
			float t[4];
#pragma unroll
			for (int c = 0; c < 4; c++) t[c] = (kk + c < ke) ? __ldg(x + im2col_off(a, kk + c)) : 0.f;
			r = make_float4(t[0], t[1], t[2], t[3]);
		}
		return r;
	};
	auto loadB = [&](int k0, int l) {
		float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
		const int idx = tid + l * 256, lr = idx / Q, kk = k0 + (idx % Q) * 4;
		const int n = n0 + lr;
		if (n >= N) return r;
		const float *w = W + (size_t)n * K;
		if (V4) {
			if (kk < ke) r = __ldg(reinterpret_cast<const float4 *>(w + kk));
		} else {
			float t[4];
#pragma unroll
			for (int c = 0; c < 4; c++) t[c] = (kk + c < ke) ? __ldg(w + kk + c) : 0.f;
			r = make_float4(t[0], t[1], t[2], t[3]);
		}
		return r;
	};

	float4 pa[LA], pb[LB];
#pragma unroll
	for (int l = 0; l < LA; l++) pa[l] = loadA(kb, l);
#pragma unroll
	for (int l = 0; l < LB; l++) pb[l] = loadB(kb, l);
	for (int k0 = kb; k0 < ke; k0 += BK) {
#pragma unroll
		for (int l = 0; l < LA; l++) {
			const int idx = tid + l * 256, lr = idx / Q, q = (idx % Q) * 4;
			if (lr < BM) {
				As[q + 0][lr] = pa[l].x;
				As[q + 1][lr] = pa[l].y;
				As[q + 2][lr] = pa[l].z;
				As[q + 3][lr] = pa[l].w;
			}
		}
#pragma unroll
		for (int l = 0; l < LB; l++) {
			const int idx = tid + l * 256, lr = idx / Q, q = (idx % Q) * 4;
			Bs[q + 0][lr] = pb[l].x;
			Bs[q + 1][lr] = pb[l].y;
			Bs[q + 2][lr] = pb[l].z;
			Bs[q + 3][lr] = pb[l].w;
		}
		__syncthreads();
		if (k0 + BK < ke) {
#pragma unroll
			for (int l = 0; l < LA; l++) pa[l] = loadA(k0 + BK, l);
#pragma unroll
			for (int l = 0; l < LB; l++) pb[l] = loadB(k0 + BK, l);
		}
#pragma unroll
		for (int kk = 0; kk < BK; kk++) {
			float av[TM], bv[TN];
#pragma unroll
			for (int i = 0; i < TM; i++) av[i] = As[kk][ty * TM + i];
			float4 b4 = *reinterpret_cast<const float4 *>(&Bs[kk][tx * TN]);
			bv[0] = b4.x;
			bv[1] = b4.y;
			bv[2] = b4.z;
			bv[3] = b4.w;
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < TM; i++) {
#pragma unroll
		for (int j = 0; j < TN; j++) gemm_out(e, ws, M, N, m0 + ty * TM + i, n0 + tx * TN + j, acc[i][j]);
	}
}

// ---------------------------------------------------------------------------
// Tensor-core product for M > 32 with A's rows and W's rows float4
// aligned (cin and K multiples of 4), as 3xTF32 (float32's accuracy) or,
// ONE_PASS, one TF32 product of the operands rounded to nearest TF32 (10-bit
// mantissas, float32 sums: how PyTorch runs float32 convolutions on these
// GPUs by default), a third of the tensor-core work and no low parts to
// split, for launches that decode several streams. BM x BN tiles (64 x 64,
// or 128 x 32 for N an odd multiple of 32 such as the last vocoder block's
// 96 channels, which 64-wide tiles would pad by a third), 32 deep, copied to shared
// memory by cp.async two tiles ahead of use, rows k-contiguous with 4 floats
// of padding so a warp's fragment reads hit 32 banks. Each of the 8 warps
// owns 32 x 16 outputs as 2 x 2 m16n8 tiles; acc[mi·2+ni][r] is element r of
// tile (mi, ni): rows g and g+8, columns 2q and 2q+1. Split K and the
// epilogue as in k_gemm.
constexpr int TC_BK = 32, TC_LD = TC_BK + 4;

// tile_rows finds where the rows that a thread of 256 copies of a tile
// start: A's rows m0 + (tid + l·256) / 8 and W's rows n0 + (tid + l·256) / 8,
// null past M or N (their copies are zeros).
template <int LA, int LB>
__device__ __forceinline__ void tile_rows(const AOp &a, const float *W, int M, int N, int K, int m0, int n0,
                                          const float *(&arow)[LA], const float *(&brow)[LB]) {
#pragma unroll
	for (int l = 0; l < LA; l++) {
		const int r = (threadIdx.x + l * 256) >> 3;
		arow[l] = m0 + r < M ? a.x + phys(a.rows, m0 + r, a.cin) : nullptr;
	}
#pragma unroll
	for (int l = 0; l < LB; l++) {
		const int r = (threadIdx.x + l * 256) >> 3;
		brow[l] = n0 + r < N ? W + (size_t)(n0 + r) * K : nullptr;
	}
}

template <int BM, int BN, bool ONE_PASS>
__global__ void __launch_bounds__(256) k_gemm_tc(AOp a, const float *__restrict__ W, int M, int N, int K,
                                                 int kChunk, Epi e, float *__restrict__ ws) {
	constexpr int WN = BN / 16, LA = BM / 32, LB = BN / 32; // warps along N; float4 copies a thread, A and W
	static_assert((BM / 32) * WN == 8 && LB >= 1, "8 warps of 32 x 16");
	__shared__ __align__(16) float As[2][BM][TC_LD];
	__shared__ __align__(16) float Bs[2][BN][TC_LD];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
	const int wm = (warp / WN) * 32, wn = (warp % WN) * 16;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	const int kb = blockIdx.z * kChunk, ke = min(K, kb + kChunk);
	// Copy l of a thread covers row (tid + l·256) / 8, k offset
	// ((tid + l·256) % 8)·4; a row past M or N copies zeros.
	const float *arow[LA], *brow[LB];
	tile_rows(a, W, M, N, K, m0, n0, arow, brow);
	// Every copy of a thread is at k offset kq of the tile; A's im2col offset
	// of k0 + kq (tap, channel) advances with the tiles rather than being
	// divided out of k for each copy.
	const int kq = (tid & 7) * 4, tapStride = a.dil * a.cin;
	int tap = (kb + kq) / a.cin, ch = kb + kq - tap * a.cin;
	// A tile's copies: W's, then A's and the commit. The first tile's W
	// copies are issued before dep_wait (weights: nothing writes them).
	auto load_w = [&](int st, int k0) {
		const int k = k0 + kq;
#pragma unroll
		for (int l = 0; l < LB; l++) {
			const bool in = brow[l] && k < ke;
			cp_async16(&Bs[st][(tid + l * 256) >> 3][kq], in ? brow[l] + k : W, in);
		}
	};
	auto load_a = [&](int st, int k0) {
		const int k = k0 + kq, off = tap * tapStride + ch;
#pragma unroll
		for (int l = 0; l < LA; l++) {
			const bool in = arow[l] && k < ke;
			cp_async16(&As[st][(tid + l * 256) >> 3][kq], in ? arow[l] + off : a.x, in);
		}
		asm volatile("cp.async.commit_group;");
		for (ch += TC_BK; ch >= a.cin; ch -= a.cin) tap++;
	};
	float acc[4][4] = {};
	load_w(0, kb);
	dep_start();
	load_a(0, kb);
	int st = 0;
	for (int k0 = kb; k0 < ke; k0 += TC_BK, st ^= 1) {
		if (k0 + TC_BK < ke) {
			load_w(st ^ 1, k0 + TC_BK);
			load_a(st ^ 1, k0 + TC_BK);
		} else
			asm volatile("cp.async.commit_group;");
		asm volatile("cp.async.wait_group 1;");
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < TC_BK; kk += 8) {
			float fa[2][4], fb[2][2]; // the warp's fragments of A and W at this k step
#pragma unroll
			for (int mi = 0; mi < 2; mi++) {
				const int r = wm + mi * 16 + g;
				fa[mi][0] = As[st][r][kk + q];
				fa[mi][1] = As[st][r + 8][kk + q];
				fa[mi][2] = As[st][r][kk + q + 4];
				fa[mi][3] = As[st][r + 8][kk + q + 4];
			}
#pragma unroll
			for (int ni = 0; ni < 2; ni++) {
				const int c = wn + ni * 8 + g;
				fb[ni][0] = Bs[st][c][kk + q];
				fb[ni][1] = Bs[st][c][kk + q + 4];
			}
			uint32_t ahi[2][4], alo[2][4], bhi[2][2], blo[2][2];
#pragma unroll
			for (int mi = 0; mi < 2; mi++)
#pragma unroll
				for (int r = 0; r < 4; r++) tf32_operand<ONE_PASS>(fa[mi][r], ahi[mi][r], alo[mi][r]);
#pragma unroll
			for (int ni = 0; ni < 2; ni++)
#pragma unroll
				for (int r = 0; r < 2; r++) tf32_operand<ONE_PASS>(fb[ni][r], bhi[ni][r], blo[ni][r]);
#pragma unroll
			for (int mi = 0; mi < 2; mi++)
#pragma unroll
				for (int ni = 0; ni < 2; ni++) {
					if (!ONE_PASS) {
						mma_tf32(acc[mi * 2 + ni], alo[mi], bhi[ni]);
						mma_tf32(acc[mi * 2 + ni], ahi[mi], blo[ni]);
					}
					mma_tf32(acc[mi * 2 + ni], ahi[mi], bhi[ni]);
				}
		}
		__syncthreads(); // the next iteration's copy reuses this stage
	}
	if (gridDim.z > 1) {
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				gemm_out(e, ws, M, N, m0 + wm + (i >> 1) * 16 + g + (j >> 1) * 8,
				         n0 + wn + (i & 1) * 8 + 2 * q + (j & 1), acc[i][j]);
		return;
	}
	// The thread's 16 outputs are 4 rows x 4 columns: each row's offsets and
	// each column's parameters are found once, not for each element.
	EpiCol col[4];
#pragma unroll
	for (int c = 0; c < 4; c++) {
		const int n = n0 + wn + (c >> 1) * 8 + 2 * q + (c & 1);
		col[c] = n < N ? epi_col(e, n) : EpiCol{};
	}
#pragma unroll
	for (int mi = 0; mi < 2; mi++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int m = m0 + wm + mi * 16 + h * 8 + g;
			if (m >= M) continue;
			const EpiRow row = epi_row(e, N, m);
#pragma unroll
			for (int ni = 0; ni < 2; ni++)
#pragma unroll
				for (int k = 0; k < 2; k++) {
					const int c = ni * 2 + k, n = n0 + wn + ni * 8 + 2 * q + k;
					if (n < N) epi_put(e, row, col[c], n, acc[mi * 2 + ni][h * 2 + k]);
				}
		}
}

__global__ void k_splitk_epi(const float *__restrict__ ws, int S, int M, int N, Epi e) {
	dep_start();
	size_t MN = (size_t)M * N;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < MN; i += (size_t)gridDim.x * blockDim.x) {
		// The loads are independent: unrolled, they are in flight together.
		float v = 0.f;
#pragma unroll 8
		for (int z = 0; z < S; z++) v += ws[z * MN + i];
		epi_store(e, N, (int)(i / N), (int)(i % N), v);
	}
}

// Transformer rows past the skinny kernel's SK_MAXM (a push of several
// streams) take the tiled product on plain rows; these two kernels make the
// plain rows with the same float operations as the skinny kernel's A modes 2
// and 3, one block per row.
__global__ void k_rmsnorm_rows(const float *__restrict__ x, const float *__restrict__ nw, double eps, int K,
                               float *__restrict__ y) {
	dep_start();
	__shared__ double red[32];
	const float *xr = x + (size_t)blockIdx.x * K;
	double ss = 0;
	for (int k = threadIdx.x; k < K; k += blockDim.x) {
		double v = xr[k];
		ss += v * v;
	}
	const float r = (float)(1.0 / sqrt(block_sum(ss, red) / K + eps));
	for (int k = threadIdx.x; k < K; k += blockDim.x) y[(size_t)blockIdx.x * K + k] = nw[k] * (xr[k] * r);
}

__global__ void k_swiglu_rows(const float *__restrict__ gu, int K, float *__restrict__ y) {
	dep_start();
	const float *g = gu + (size_t)blockIdx.x * 2 * K, *u = g + K;
	for (int k = threadIdx.x; k < K; k += blockDim.x) y[(size_t)blockIdx.x * K + k] = g[k] / (1.f + expf(-g[k])) * u[k];
}

// ---------------------------------------------------------------------------
// Quantizer: z[t] = [E_0[c_0] | sum_{q>=1} E_q[c_q]] (2·cb wide); the two
// output projections are then one product with [W_first | W_rest].
__global__ void k_dequant(const int32_t *__restrict__ codes, const float *__restrict__ books, int rows, int cb,
                          float *__restrict__ z) {
	dep_start();
	const int t = blockIdx.x;
	const int32_t *c = codes + t * 16;
	for (int j = threadIdx.x; j < cb; j += blockDim.x) {
		float first = books[(size_t)c[0] * cb + j];
		float rest = 0.f;
		for (int q = 1; q < 16; q++) rest += books[((size_t)q * rows + c[q]) * cb + j];
		z[(size_t)t * 2 * cb + j] = first;
		z[(size_t)t * 2 * cb + cb + j] = rest;
	}
}

// ConvNeXt front: depthwise causal conv (k taps) over the ext buffer, then
// LayerNorm (eps 1e-6, statistics in double). One row per block.
__global__ void k_dwconv_ln(const float *__restrict__ ext0, Rows er, const float *__restrict__ dw,
                            const float *__restrict__ dwb, const float *__restrict__ lw, const float *__restrict__ lb,
                            float *__restrict__ y, int C, int k) {
	dep_start();
	extern __shared__ float row[];
	__shared__ double red[32];
	const int r = blockIdx.x;
	const float *ext = ext0 + phys(er, r, C);
	double s = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float acc = dwb[c];
		for (int j = 0; j < k; j++) acc += dw[c * k + j] * ext[(size_t)j * C + c];
		row[c] = acc;
		s += acc;
	}
	double mean = block_sum(s, red) / C;
	__syncthreads();
	double v = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		double d = row[c] - mean;
		v += d * d;
	}
	double inv = 1.0 / sqrt(block_sum(v, red) / C + 1e-6);
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		y[(size_t)r * C + c] = (float)((row[c] - mean) * inv) * lw[c] + lb[c];
}

// Final conv (one output channel) and clamp: one warp per output sample.
__global__ void k_final_conv(const float *__restrict__ ext0, Rows er, const float *__restrict__ w,
                             const float *__restrict__ b, int C, int k, int dil, int R, float *__restrict__ out) {
	dep_start();
	const int lane = threadIdx.x & 31;
	const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= R) return;
	const float *ext = ext0 + phys(er, r, C);
	float acc = 0.f;
	for (int kk = lane; kk < k * C; kk += 32) {
		int j = kk / C, i = kk - j * C;
		acc = fmaf(w[kk], ext[(size_t)(j * dil) * C + i], acc);
	}
	acc = warp_sum(acc);
	if (lane == 0) out[r] = fminf(fmaxf(acc + (b ? b[0] : 0.f), -1.f), 1.f);
}

// History shift after a push: every ext buffer keeps its last H rows as the
// next push's history. Rows move down by n; when n < H the source and target
// overlap, so one block owns a column slice and moves strips of n rows in
// ascending order with a barrier between strips. blockIdx.z is the member,
// whose slot starts slotFloats after slot 0's. Each member's RoPE position
// advances by T in the same launch.
constexpr int SHIFT_MAX = 48;
struct ShiftDesc {
	float *base;
	int C, H, n;
	size_t slotFloats;
};
struct ShiftArgs {
	ShiftDesc d[SHIFT_MAX];
	const int *slot;
	int64_t *pos;
	int T;
};

__global__ void k_shift(ShiftArgs a) {
	dep_start();
	ShiftDesc d = a.d[blockIdx.y];
	const int sl = __ldg(a.slot + blockIdx.z);
	d.base += sl * d.slotFloats;
	const int c = blockIdx.x * 32 + threadIdx.x;
	if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) a.pos[sl] += a.T;
	if (blockIdx.x * 32 >= d.C) return; // whole block idle: no barrier reached by anyone
	for (int r0 = 0; r0 < d.H; r0 += d.n) {
		int rows = min(d.n, d.H - r0);
		if (c < d.C)
			for (int r = threadIdx.y; r < rows; r += blockDim.y)
				d.base[(size_t)(r0 + r) * d.C + c] = d.base[(size_t)(r0 + r + d.n) * d.C + c];
		__syncthreads();
	}
}

} // namespace tbc
