// Kernels of the streaming codec decoder. Every tensor is time-major
// ([rows][channels], channels contiguous). A causal conv reads an "ext"
// buffer: H history rows, then the new rows, so im2col needs no copy.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

namespace tbc {

// AOp describes the left operand of a product as an implicit im2col of a
// causal conv input: A(m, kk) = x[(m + (kk / cin) * dil) * cin + kk % cin].
// A Linear is the case K = cin (one tap).
struct AOp {
	const float *x;
	int cin, dil;
};

// Epi is what happens to each product element acc at (m, n), in order:
// v = acc + bias[n]; v *= scale[n]; v += res[m][n]; v = gelu(v); clamp;
// out1[m][n] = v; out2[m][n] = snake(v) with channel n % snC. Every
// pointer may be null. res may alias out1 (each element is read and written
// by the same thread).
struct Epi {
	const float *bias, *scale, *res;
	float *out1, *out2;
	const float *snA, *snIB;
	int snC, gelu, clamp;
};

// snake is SnakeBeta with precomputed a = exp(alpha), ib = 1/(exp(beta)+1e-9).
// The product x·a is float32 and sin² is taken in double, as the CPU decoder
// does, so both see the same rounding of the argument.
__device__ __forceinline__ float snake(float v, float a, float ib) {
	float x = v * a;
	double s = sin((double)x);
	return v + ib * (float)(s * s);
}

__device__ __forceinline__ void epi_store(const Epi &e, int N, int m, int n, float acc) {
	float v = acc;
	if (e.bias) v += e.bias[n];
	if (e.scale) v *= e.scale[n];
	size_t i = (size_t)m * N + n;
	if (e.res) v += e.res[i];
	if (e.gelu) {
		double d = v;
		v = (float)(0.5 * d * (1.0 + erf(d / 1.4142135623730951)));
	}
	if (e.clamp) v = fminf(fmaxf(v, -1.f), 1.f);
	if (e.out1) e.out1[i] = v;
	if (e.out2) {
		int c = n % e.snC;
		e.out2[i] = snake(v, e.snA[c], e.snIB[c]);
	}
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
// warps' loads in flight. MODE says how A is read:
//   0 im2col of a causal conv input, 1 plain rows (K = cin),
//   2 plain rows through RMSNorm (weight nw, eps; the per-row scale is
//     computed by the block first, in double as on the CPU),
//   3 SwiGLU of fused [gate | up] rows of width 2K: silu(g)·u.
// V4 needs K and cin multiples of 4.
template <int MODE>
__device__ __forceinline__ float4 loadA4(const AOp &a, int m, int kk, int K, const float *nw, const float *rs) {
	if (MODE == 0) return __ldg(reinterpret_cast<const float4 *>(a.x + (size_t)m * a.cin + im2col_off(a, kk)));
	if (MODE == 1) return __ldg(reinterpret_cast<const float4 *>(a.x + (size_t)m * K + kk));
	if (MODE == 2) {
		float4 x = __ldg(reinterpret_cast<const float4 *>(a.x + (size_t)m * K + kk));
		float4 w = __ldg(reinterpret_cast<const float4 *>(nw + kk));
		const float r = rs[m];
		return make_float4(w.x * (x.x * r), w.y * (x.y * r), w.z * (x.z * r), w.w * (x.w * r));
	}
	float4 g = __ldg(reinterpret_cast<const float4 *>(a.x + (size_t)m * 2 * K + kk));
	float4 u = __ldg(reinterpret_cast<const float4 *>(a.x + (size_t)m * 2 * K + K + kk));
	return make_float4(g.x / (1.f + expf(-g.x)) * u.x, g.y / (1.f + expf(-g.y)) * u.y, g.z / (1.f + expf(-g.z)) * u.z,
	                   g.w / (1.f + expf(-g.w)) * u.w);
}

template <int MODE>
__device__ __forceinline__ float loadA1(const AOp &a, int m, int kk, int K, const float *nw, const float *rs) {
	if (MODE == 0) return __ldg(a.x + (size_t)m * a.cin + im2col_off(a, kk));
	if (MODE == 1) return __ldg(a.x + (size_t)m * K + kk);
	if (MODE == 2) return nw[kk] * (__ldg(a.x + (size_t)m * K + kk) * rs[m]);
	float g = __ldg(a.x + (size_t)m * 2 * K + kk), u = __ldg(a.x + (size_t)m * 2 * K + K + kk);
	return g / (1.f + expf(-g)) * u;
}

template <int MODE, bool V4>
__global__ void __launch_bounds__(256) k_skinny2(AOp a, const float *__restrict__ nw, double eps,
                                                 const float *__restrict__ W, int M, int N, int K, int KS, Epi e) {
	__shared__ float red[8][SK_MAXM];
	__shared__ float rs[SK_MAXM];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int cols = 8 / KS;
	const int n = blockIdx.x * cols + warp / KS, ks = warp % KS;
	if (MODE == 2) {
		if (warp < M) {
			double ss = 0;
			for (int k = lane; k < K; k += 32) {
				double v = a.x[(size_t)warp * K + k];
				ss += v * v;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
			if (lane == 0) rs[warp] = (float)(1.0 / sqrt(ss / K + eps));
		}
		__syncthreads();
	}
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
							float4 xv = loadA4<MODE>(a, m, kk + u * 128, K, nw, rs);
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
						float4 xv = loadA4<MODE>(a, m, kk, K, nw, rs);
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
					if (m < M) acc[m] = fmaf(wv, loadA1<MODE>(a, m, kk, K, nw, rs), acc[m]);
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

// RoPE: one thread per rotated pair, float32 sincos (accurate to
// a few ulp over the whole range without fast math), several blocks per row.
__global__ void k_rope_kv2(float *__restrict__ qkv, float *__restrict__ Kc, float *__restrict__ Vc,
                           const float *__restrict__ invf, const int64_t *__restrict__ pos0, int nh, int nkv, int hd,
                           int cap) {
	const int t = blockIdx.y;
	const int64_t pos = *pos0 + t;
	const int half = hd / 2, kvw = nkv * hd;
	float *row = qkv + (size_t)t * (nh * hd + 2 * kvw);
	float *k = row + nh * hd, *v = k + kvw;
	float *kc = Kc + (size_t)(pos % cap) * kvw, *vc = Vc + (size_t)(pos % cap) * kvw;
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

// Attention: one block of 4 warps per (head, t); scores one key
// per warp at a time with the head dimension across lanes (coalesced rows),
// then each thread owns output dims and sums keys in an unrolled loop.
__global__ void __launch_bounds__(128) k_attn2(const float *__restrict__ qkv, const float *__restrict__ Kc,
                                               const float *__restrict__ Vc, float *__restrict__ out,
                                               const int64_t *__restrict__ pos0, int nh, int nkv, int hd, int win,
                                               int cap, float scale) {
	extern __shared__ float sm[];
	__shared__ float red[32];
	const int h = blockIdx.x, t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int64_t pos = *pos0 + t;
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

// ---------------------------------------------------------------------------
// Tiled product for larger M (the vocoder's residual units: 32..1920 rows per
// frame): BM x 64 tiles, BK deep, 256 threads each owning (BM/16) x 4
// outputs, the next tile prefetched into registers while the current one is
// used. gridDim.z > 1 splits K; each slice then writes raw partial sums to
// ws[z][M][N] and k_splitk_epi adds them in a fixed order (deterministic).
template <int BM, int BK, bool V4>
__global__ void __launch_bounds__(256) k_gemm(AOp a, const float *__restrict__ W, int M, int N, int K, int kChunk,
                                              Epi e, float *__restrict__ ws) {
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

	// Loader l of this thread covers tile row idx / Q, k offset (idx % Q)·4.
	auto loadA = [&](int k0, int l) {
		float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
		const int idx = tid + l * 256, lr = idx / Q, kk = k0 + (idx % Q) * 4;
		const int m = m0 + lr;
		if (lr >= BM || m >= M) return r;
		if (V4) {
			if (kk < ke) r = __ldg(reinterpret_cast<const float4 *>(a.x + (size_t)m * a.cin + im2col_off(a, kk)));
		} else {
			float t[4];
#pragma unroll
			for (int c = 0; c < 4; c++)
				t[c] = (kk + c < ke) ? __ldg(a.x + (size_t)m * a.cin + im2col_off(a, kk + c)) : 0.f;
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
		int m = m0 + ty * TM + i;
		if (m >= M) continue;
#pragma unroll
		for (int j = 0; j < TN; j++) {
			int n = n0 + tx * TN + j;
			if (n >= N) continue;
			if (gridDim.z == 1)
				epi_store(e, N, m, n, acc[i][j]);
			else
				ws[((size_t)blockIdx.z * M + m) * N + n] = acc[i][j];
		}
	}
}

__global__ void k_splitk_epi(const float *__restrict__ ws, int S, int M, int N, Epi e) {
	size_t MN = (size_t)M * N;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < MN; i += (size_t)gridDim.x * blockDim.x) {
		// The loads are independent: unrolled, they are in flight together.
		float v = 0.f;
#pragma unroll 8
		for (int z = 0; z < S; z++) v += ws[z * MN + i];
		epi_store(e, N, (int)(i / N), (int)(i % N), v);
	}
}

// ---------------------------------------------------------------------------
// Quantizer: z[t] = [E_0[c_0] | sum_{q>=1} E_q[c_q]] (2·cb wide); the two
// output projections are then one product with [W_first | W_rest].
__global__ void k_dequant(const int32_t *__restrict__ codes, const float *__restrict__ books, int rows, int cb,
                          float *__restrict__ z) {
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
__global__ void k_dwconv_ln(const float *__restrict__ ext, const float *__restrict__ dw, const float *__restrict__ dwb,
                            const float *__restrict__ lw, const float *__restrict__ lb, float *__restrict__ y, int C,
                            int k) {
	extern __shared__ float row[];
	__shared__ double red[32];
	const int r = blockIdx.x;
	double s = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float acc = dwb[c];
		for (int j = 0; j < k; j++) acc += dw[c * k + j] * ext[(size_t)(r + j) * C + c];
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
__global__ void k_final_conv(const float *__restrict__ ext, const float *__restrict__ w, const float *__restrict__ b,
                             int C, int k, int dil, int R, float *__restrict__ out) {
	const int lane = threadIdx.x & 31;
	const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= R) return;
	float acc = 0.f;
	for (int kk = lane; kk < k * C; kk += 32) {
		int j = kk / C, i = kk - j * C;
		acc = fmaf(w[kk], ext[(size_t)(r + j * dil) * C + i], acc);
	}
	acc = warp_sum(acc);
	if (lane == 0) out[r] = fminf(fmaxf(acc + (b ? b[0] : 0.f), -1.f), 1.f);
}

// History shift after a push: every ext buffer keeps its last H rows as the
// next push's history. Rows move down by n; when n < H the source and target
// overlap, so one block owns a column slice and moves strips of n rows in
// ascending order with a barrier between strips. The RoPE position advances
// by T in the same launch.
constexpr int SHIFT_MAX = 48;
struct ShiftDesc {
	float *base;
	int C, H, n;
};
struct ShiftArgs {
	ShiftDesc d[SHIFT_MAX];
	int64_t *pos;
	int T;
};

__global__ void k_shift(ShiftArgs a) {
	const ShiftDesc d = a.d[blockIdx.y];
	const int c = blockIdx.x * 32 + threadIdx.x;
	if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *a.pos += a.T;
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
