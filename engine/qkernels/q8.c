#include <math.h>
#include <stddef.h>
#include <string.h>

#include "q8.h"

// One block of up to 32 values (n of them, the rest zero-padded). This is the
// definition of the quantization: a SIMD form must give the same bytes.
static void quantize_block(const float *x, int n, int8_t *q, float *d) {
	float amax = 0;
	for (int c = 0; c < n; c++) {
		float a = fabsf(x[c]);
		amax = a > amax ? a : amax;
	}
	float inv = amax > 0 ? 127.0f / amax : 0.0f;
	*d = amax / 127.0f;
	for (int c = 0; c < n; c++) {
		q[c] = (int8_t)lrintf(x[c] * inv);
	}
	for (int c = n; c < Q8_BLOCK; c++) {
		q[c] = 0;
	}
}

static void quantize_portable(const float *x, int n, int cols, int ldx, int8_t *qs, float *d) {
	int kb = (cols + Q8_BLOCK - 1) / Q8_BLOCK;
	for (int i = 0; i < n; i++) {
		for (int b = 0; b < kb; b++) {
			int c0 = b * Q8_BLOCK;
			quantize_block(x + (size_t)i * ldx + c0, cols - c0 < Q8_BLOCK ? cols - c0 : Q8_BLOCK,
			               qs + ((size_t)i * kb + b) * Q8_BLOCK, d + (size_t)i * kb + b);
		}
	}
}

static void gemm_portable(int r0, int r1, int kb, const int8_t *wq, const float *wd, int nx,
                          const int8_t *xq, const float *xd, const float *bias, float *y, int ldy) {
	for (int r = r0; r < r1; r++) {
		const int8_t *w = wq + (size_t)r * kb * Q8_BLOCK;
		const float *ws = wd + (size_t)r * kb;
		for (int j = 0; j < nx; j++) {
			const int8_t *x = xq + (size_t)j * kb * Q8_BLOCK;
			const float *xs = xd + (size_t)j * kb;
			float acc = 0;
			for (int b = 0; b < kb; b++) {
				int32_t s = 0;
				for (int i = 0; i < Q8_BLOCK; i++) {
					s += (int32_t)w[b * Q8_BLOCK + i] * (int32_t)x[b * Q8_BLOCK + i];
				}
				acc += ws[b] * xs[b] * (float)s;
			}
			y[(size_t)j * ldy + r] = acc + (bias ? bias[r] : 0.0f);
		}
	}
}

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2,fma")))

// How far ahead of the block being multiplied the one-row kernels prefetch
// weights (bytes). Measured on the dev VM's EPYC (one thread, 106 MB of
// weights): 512-4096 all beat none by 15-45%; 2048 was best.
#define Q8_PREFETCH 2048

AVX2_TARGET static inline float hsum256(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// quantize_avx2 gives quantize_block's bytes eight lanes at a time (the
// scalar path was ~10% of a 40-row prefill, run by the caller alone before
// its product splits over the cores): the same maximum, the same float
// divisions and products, and cvtps rounds to nearest even as lrintf does in
// the default rounding mode. Values within a block stay in [-127, 127], so
// the saturating packs never saturate. Blocks holding a NaN or an infinity
// (where the conversions' out-of-range results differ), or only subnormal
// values, and a row's partial last block go to quantize_block.
AVX2_TARGET static void quantize_avx2(const float *x, int n, int cols, int ldx, int8_t *qs, float *d) {
	int kb = (cols + Q8_BLOCK - 1) / Q8_BLOCK, full = cols / Q8_BLOCK;
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256 inf = _mm256_set1_ps(INFINITY);
	// packs interleave 128-bit lanes; this puts the 32 bytes back in order.
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int i = 0; i < n; i++) {
		const float *row = x + (size_t)i * ldx;
		int8_t *q = qs + (size_t)i * kb * Q8_BLOCK;
		float *s = d + (size_t)i * kb;
		for (int b = 0; b < full; b++) {
			const float *xb = row + b * Q8_BLOCK;
			__m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
			__m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
			__m256 a0 = _mm256_and_ps(v0, absmask), a1 = _mm256_and_ps(v1, absmask);
			__m256 a2 = _mm256_and_ps(v2, absmask), a3 = _mm256_and_ps(v3, absmask);
			// Not finite: |x| >= inf is true for infinities, and the
			// unordered compare catches NaN.
			__m256 bad = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(a0, inf, _CMP_NLT_US), _mm256_cmp_ps(a1, inf, _CMP_NLT_US)),
			                          _mm256_or_ps(_mm256_cmp_ps(a2, inf, _CMP_NLT_US), _mm256_cmp_ps(a3, inf, _CMP_NLT_US)));
			__m256 m = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
			__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
			h = _mm_max_ps(h, _mm_movehl_ps(h, h));
			h = _mm_max_ss(h, _mm_movehdup_ps(h));
			float amax = _mm_cvtss_f32(h);
			float inv = amax > 0 ? 127.0f / amax : 0.0f;
			// A subnormal maximum overflows inv to infinity, with the same
			// out-of-range conversions as a non-finite value.
			if (_mm256_movemask_ps(bad) || inv == INFINITY) {
				quantize_block(xb, Q8_BLOCK, q + b * Q8_BLOCK, s + b);
				continue;
			}
			s[b] = amax / 127.0f;
			__m256 vi = _mm256_set1_ps(inv);
			__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vi)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vi));
			__m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vi)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vi));
			__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
			_mm256_storeu_si256((__m256i *)(q + b * Q8_BLOCK), _mm256_permutevar8x32_epi32(p, order));
		}
		if (full < kb) {
			quantize_block(row + full * Q8_BLOCK, cols - full * Q8_BLOCK, q + full * Q8_BLOCK, s + full);
		}
	}
}

// One block's 32 products as 8 int32 partial sums: |w| (unsigned) times x
// with w's sign (signed) pairwise into int16 (at most 2·127·127, no
// saturation: both sides are in [-127, 127]), then pairs into int32.
AVX2_TARGET static inline __m256i dot_block256(__m256i aw, __m256i wv, const int8_t *x) {
	__m256i xv = _mm256_loadu_si256((const __m256i *)x);
	__m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wv));
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// lane broadcasts lane i of v to all eight lanes (one permute, instead of a
// scalar load, multiply and broadcast per block).
AVX2_TARGET static inline __m256 lane(__m256 v, int i) {
	return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i));
}

// Two weight rows by four activation rows: each weight block is loaded once
// for four activation rows and each activation block once for two weight
// rows (8 accumulators). The combined scales of eight blocks are formed with
// one vector multiply a pair and read back as broadcasts. On the dev VM's
// EPYC (one thread, 3072x1024 weights, 40 rows) 27-31 -> 32-33 GMAC/s against
// one weight row at a time.
AVX2_TARGET static void rows2_avx2(int r, int nx4, int kb, const int8_t *wq, const float *wd, const int8_t *xq,
                                   const float *xd, const float *bias, float *y, int ldy) {
	size_t xrow = (size_t)kb * Q8_BLOCK;
	const int8_t *w = wq + (size_t)r * xrow, *v = w + xrow;
	const float *ws = wd + (size_t)r * kb, *vs = ws + kb;
	float bw = bias ? bias[r] : 0.0f, bv = bias ? bias[r + 1] : 0.0f;
	int kb8 = kb & ~7;
	for (int j = 0; j < nx4; j += 4) {
		const int8_t *x0 = xq + (size_t)j * xrow;
		const float *s0 = xd + (size_t)j * kb;
		__m256 a[8];
		for (int q = 0; q < 8; q++) a[q] = _mm256_setzero_ps();
		float cs[8][8] __attribute__((aligned(32)));
		for (int b8 = 0; b8 < kb; b8 += 8) {
			int nb = b8 < kb8 ? 8 : kb - b8;
			if (nb == 8) {
				__m256 sw = _mm256_loadu_ps(ws + b8), sv = _mm256_loadu_ps(vs + b8);
				for (int q = 0; q < 4; q++) {
					__m256 sx = _mm256_loadu_ps(s0 + q * kb + b8);
					_mm256_store_ps(cs[q], _mm256_mul_ps(sw, sx));
					_mm256_store_ps(cs[4 + q], _mm256_mul_ps(sv, sx));
				}
			} else {
				for (int i = 0; i < nb; i++)
					for (int q = 0; q < 4; q++) {
						cs[q][i] = ws[b8 + i] * s0[q * kb + b8 + i];
						cs[4 + q][i] = vs[b8 + i] * s0[q * kb + b8 + i];
					}
			}
			for (int i = 0; i < nb; i++) {
				int b = b8 + i;
				__m256i wv = _mm256_loadu_si256((const __m256i *)(w + b * Q8_BLOCK));
				__m256i vv = _mm256_loadu_si256((const __m256i *)(v + b * Q8_BLOCK));
				__m256i aw = _mm256_sign_epi8(wv, wv), av = _mm256_sign_epi8(vv, vv);
				for (int q = 0; q < 4; q++) {
					const int8_t *xb = x0 + q * xrow + b * Q8_BLOCK;
					a[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(&cs[q][i]), _mm256_cvtepi32_ps(dot_block256(aw, wv, xb)), a[q]);
					a[4 + q] = _mm256_fmadd_ps(_mm256_broadcast_ss(&cs[4 + q][i]), _mm256_cvtepi32_ps(dot_block256(av, vv, xb)),
					                           a[4 + q]);
				}
			}
		}
		for (int q = 0; q < 4; q++) {
			y[(size_t)(j + q) * ldy + r] = hsum256(a[q]) + bw;
			y[(size_t)(j + q) * ldy + r + 1] = hsum256(a[4 + q]) + bv;
		}
	}
}

// One weight row against activation rows j0..nx-1, one at a time: decoding
// (one activation row), the rows of a prefill past the last multiple of
// four, and a band's odd last weight row.
AVX2_TARGET static void row_avx2(int r, int j0, int kb, const int8_t *wq, const float *wd, int nx, const int8_t *xq,
                                 const float *xd, const float *bias, float *y, int ldy) {
	size_t xrow = (size_t)kb * Q8_BLOCK;
	int kb8 = kb & ~7;
	const int8_t *w = wq + (size_t)r * xrow;
	const float *ws = wd + (size_t)r * kb;
	float bv = bias ? bias[r] : 0.0f;
	for (int j = j0; j < nx; j++) {
		const int8_t *x0 = xq + (size_t)j * xrow;
		const float *s0 = xd + (size_t)j * kb;
		// Four accumulators so the fma chains are not latency bound, and
		// the weights prefetched Q8_PREFETCH bytes ahead (past the row's
		// end into the next row, which follows it in memory): a decode
		// step streams each weight once, and one thread reached ~11 GB/s
		// on the hardware prefetcher alone against ~16 GB/s with this.
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		for (int b8 = 0; b8 < kb8; b8 += 8) {
			const int8_t *w8 = w + b8 * Q8_BLOCK;
			for (int l = 0; l < 8 * Q8_BLOCK; l += 64) {
				_mm_prefetch((const char *)w8 + Q8_PREFETCH + l, _MM_HINT_T0);
			}
			__m256 c = _mm256_mul_ps(_mm256_loadu_ps(ws + b8), _mm256_loadu_ps(s0 + b8));
			for (int i = 0; i < 8; i += 4) {
				const int8_t *wb = w8 + i * Q8_BLOCK, *xb = x0 + (b8 + i) * Q8_BLOCK;
				__m256i w0 = _mm256_loadu_si256((const __m256i *)wb);
				__m256i w1 = _mm256_loadu_si256((const __m256i *)(wb + Q8_BLOCK));
				__m256i w2 = _mm256_loadu_si256((const __m256i *)(wb + 2 * Q8_BLOCK));
				__m256i w3 = _mm256_loadu_si256((const __m256i *)(wb + 3 * Q8_BLOCK));
				a0 = _mm256_fmadd_ps(lane(c, i), _mm256_cvtepi32_ps(dot_block256(_mm256_sign_epi8(w0, w0), w0, xb)), a0);
				a1 = _mm256_fmadd_ps(lane(c, i + 1),
				                     _mm256_cvtepi32_ps(dot_block256(_mm256_sign_epi8(w1, w1), w1, xb + Q8_BLOCK)), a1);
				a2 = _mm256_fmadd_ps(lane(c, i + 2),
				                     _mm256_cvtepi32_ps(dot_block256(_mm256_sign_epi8(w2, w2), w2, xb + 2 * Q8_BLOCK)), a2);
				a3 = _mm256_fmadd_ps(lane(c, i + 3),
				                     _mm256_cvtepi32_ps(dot_block256(_mm256_sign_epi8(w3, w3), w3, xb + 3 * Q8_BLOCK)), a3);
			}
		}
		for (int b = kb8; b < kb; b++) {
			__m256i wv = _mm256_loadu_si256((const __m256i *)(w + b * Q8_BLOCK));
			a0 = _mm256_fmadd_ps(_mm256_set1_ps(ws[b] * s0[b]),
			                     _mm256_cvtepi32_ps(dot_block256(_mm256_sign_epi8(wv, wv), wv, x0 + b * Q8_BLOCK)), a0);
		}
		y[(size_t)j * ldy + r] = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + bv;
	}
}

AVX2_TARGET static void gemm_avx2(int r0, int r1, int kb, const int8_t *wq, const float *wd, int nx,
                                  const int8_t *xq, const float *xd, const float *bias, float *y, int ldy) {
	int nx4 = nx & ~3, r = r0;
	for (; nx4 > 0 && r + 2 <= r1; r += 2) {
		rows2_avx2(r, nx4, kb, wq, wd, xq, xd, bias, y, ldy);
		row_avx2(r, nx4, kb, wq, wd, nx, xq, xd, bias, y, ldy);
		row_avx2(r + 1, nx4, kb, wq, wd, nx, xq, xd, bias, y, ldy);
	}
	for (; r < r1; r++) row_avx2(r, 0, kb, wq, wd, nx, xq, xd, bias, y, ldy);
}

// The AVX-512 kernels take two blocks (64 bytes) a step; the lanes 0-7 of a
// product belong to the first block and 8-15 to the second, hence the
// blended scale vector. AVX-512 has no sign_epi8: x is negated where w < 0
// (w's sign bits as a mask). An odd last block runs the 256-bit form.
#define AVX512_GEMM(NAME, TARGET, DOT)                                                                          \
	__attribute__((target(TARGET))) static inline __m512i NAME##_pair(__m512i aw, __mmask64 neg, const int8_t *x) { \
		__m512i xv = _mm512_loadu_si512((const void *)x);                                                       \
		__m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);                                 \
		return DOT(aw, sx);                                                                                     \
	}                                                                                                           \
	__attribute__((target(TARGET))) static inline __m512 NAME##_scale(float a, float b) {                       \
		return _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b));                   \
	}                                                                                                           \
	__attribute__((target(TARGET))) static inline float NAME##_tail(const int8_t *w, const int8_t *x, float s) { \
		__m256i wv = _mm256_loadu_si256((const __m256i *)w);                                                    \
		return s * hsum256(_mm256_cvtepi32_ps(dot_block256(_mm256_sign_epi8(wv, wv), wv, x)));                  \
	}                                                                                                           \
	__attribute__((target(TARGET))) static void NAME(int r0, int r1, int kb, const int8_t *wq, const float *wd,   \
	                                                 int nx, const int8_t *xq, const float *xd, const float *bias, \
	                                                 float *y, int ldy) {                                       \
		size_t xrow = (size_t)kb * Q8_BLOCK;                                                                    \
		int kp = kb & ~1;                                                                                       \
		for (int r = r0; r < r1; r++) {                                                                         \
			const int8_t *w = wq + (size_t)r * xrow;                                                            \
			const float *ws = wd + (size_t)r * kb;                                                              \
			float bv = bias ? bias[r] : 0.0f;                                                                   \
			int j = 0;                                                                                          \
			for (; j + 4 <= nx; j += 4) {                                                                       \
				const int8_t *x0 = xq + (size_t)j * xrow;                                                       \
				const float *s0 = xd + (size_t)j * kb;                                                          \
				__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                     \
				for (int b = 0; b < kp; b += 2) {                                                               \
					__m512i wv = _mm512_loadu_si512((const void *)(w + b * Q8_BLOCK));                          \
					__m512i aw = _mm512_abs_epi8(wv);                                                           \
					__mmask64 neg = _mm512_movepi8_mask(wv);                                                    \
					const int8_t *xb = x0 + b * Q8_BLOCK;                                                       \
					float w0 = ws[b], w1 = ws[b + 1];                                                           \
					a0 = _mm512_fmadd_ps(NAME##_scale(w0 * s0[b], w1 * s0[b + 1]),                             \
					                     _mm512_cvtepi32_ps(NAME##_pair(aw, neg, xb)), a0);                     \
					a1 = _mm512_fmadd_ps(NAME##_scale(w0 * s0[kb + b], w1 * s0[kb + b + 1]),                    \
					                     _mm512_cvtepi32_ps(NAME##_pair(aw, neg, xb + xrow)), a1);              \
					a2 = _mm512_fmadd_ps(NAME##_scale(w0 * s0[2 * kb + b], w1 * s0[2 * kb + b + 1]),            \
					                     _mm512_cvtepi32_ps(NAME##_pair(aw, neg, xb + 2 * xrow)), a2);          \
					a3 = _mm512_fmadd_ps(NAME##_scale(w0 * s0[3 * kb + b], w1 * s0[3 * kb + b + 1]),            \
					                     _mm512_cvtepi32_ps(NAME##_pair(aw, neg, xb + 3 * xrow)), a3);          \
				}                                                                                               \
				float t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                                           \
				if (kp < kb) {                                                                                  \
					const int8_t *wb = w + kp * Q8_BLOCK, *xb = x0 + kp * Q8_BLOCK;                              \
					t0 = NAME##_tail(wb, xb, ws[kp] * s0[kp]);                                                  \
					t1 = NAME##_tail(wb, xb + xrow, ws[kp] * s0[kb + kp]);                                      \
					t2 = NAME##_tail(wb, xb + 2 * xrow, ws[kp] * s0[2 * kb + kp]);                              \
					t3 = NAME##_tail(wb, xb + 3 * xrow, ws[kp] * s0[3 * kb + kp]);                              \
				}                                                                                               \
				y[(size_t)j * ldy + r] = _mm512_reduce_add_ps(a0) + t0 + bv;                                    \
				y[(size_t)(j + 1) * ldy + r] = _mm512_reduce_add_ps(a1) + t1 + bv;                              \
				y[(size_t)(j + 2) * ldy + r] = _mm512_reduce_add_ps(a2) + t2 + bv;                              \
				y[(size_t)(j + 3) * ldy + r] = _mm512_reduce_add_ps(a3) + t3 + bv;                              \
			}                                                                                                   \
			for (; j < nx; j++) {                                                                               \
				const int8_t *x0 = xq + (size_t)j * xrow;                                                       \
				const float *s0 = xd + (size_t)j * kb;                                                          \
				__m512 a0 = _mm512_setzero_ps();                                                                \
				for (int b = 0; b < kp; b += 2) {                                                               \
					__m512i wv = _mm512_loadu_si512((const void *)(w + b * Q8_BLOCK));                          \
					a0 = _mm512_fmadd_ps(NAME##_scale(ws[b] * s0[b], ws[b + 1] * s0[b + 1]),                    \
					                     _mm512_cvtepi32_ps(NAME##_pair(_mm512_abs_epi8(wv),                    \
					                                                    _mm512_movepi8_mask(wv), x0 + b * Q8_BLOCK)), \
					                     a0);                                                                   \
				}                                                                                               \
				float t = kp < kb ? NAME##_tail(w + kp * Q8_BLOCK, x0 + kp * Q8_BLOCK, ws[kp] * s0[kp]) : 0.0f; \
				y[(size_t)j * ldy + r] = _mm512_reduce_add_ps(a0) + t + bv;                                     \
			}                                                                                                   \
		}                                                                                                       \
	}

#define DOT_BW(aw, sx) _mm512_madd_epi16(_mm512_maddubs_epi16(aw, sx), _mm512_set1_epi16(1))
#define DOT_VNNI(aw, sx) _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx)

AVX512_GEMM(gemm_avx512, "avx512f,avx512bw,avx512vl,avx2,fma", DOT_BW)
AVX512_GEMM(gemm_avx512vnni, "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma", DOT_VNNI)

int q8_compiled(int path) { return path >= Q8_PORTABLE && path <= Q8_AVX512VNNI; }

void q8_quantize_rows(int path, const float *x, int n, int cols, int ldx, int8_t *qs, float *d) {
	if (path >= Q8_AVX2) {
		quantize_avx2(x, n, cols, ldx, qs, d);
		return;
	}
	quantize_portable(x, n, cols, ldx, qs, d);
}

void q8_gemm(int path, int r0, int r1, int kb, const int8_t *wq, const float *wd, int nx, const int8_t *xq,
             const float *xd, const float *bias, float *y, int ldy) {
	switch (path) {
	case Q8_AVX2:
		gemm_avx2(r0, r1, kb, wq, wd, nx, xq, xd, bias, y, ldy);
		return;
	case Q8_AVX512:
		gemm_avx512(r0, r1, kb, wq, wd, nx, xq, xd, bias, y, ldy);
		return;
	case Q8_AVX512VNNI:
		gemm_avx512vnni(r0, r1, kb, wq, wd, nx, xq, xd, bias, y, ldy);
		return;
	}
	gemm_portable(r0, r1, kb, wq, wd, nx, xq, xd, bias, y, ldy);
}

#else

int q8_compiled(int path) { return path == Q8_PORTABLE; }

void q8_quantize_rows(int path, const float *x, int n, int cols, int ldx, int8_t *qs, float *d) {
	(void)path;
	quantize_portable(x, n, cols, ldx, qs, d);
}

void q8_gemm(int path, int r0, int r1, int kb, const int8_t *wq, const float *wd, int nx, const int8_t *xq,
             const float *xd, const float *bias, float *y, int ldy) {
	(void)path;
	gemm_portable(r0, r1, kb, wq, wd, nx, xq, xd, bias, y, ldy);
}

#endif
