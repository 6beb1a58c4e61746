#include "swiglu.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))

// exp of four doubles to ~1 ulp: x = k·ln2 + r with |r| <= ln2/2, then e^r
// by its Taylor series to r^13 (the first term left out, r^14/14!, is below
// 5e-18 there) and 2^k built in the exponent bits. Arguments are clamped to
// [-150, 150], beyond which a float32 result is 0 or infinity either way; a
// NaN argument stays NaN.
TARGET static inline __m256d exp4(__m256d x) {
	const __m256d lo = _mm256_set1_pd(-150.0), hi = _mm256_set1_pd(150.0);
	__m256d nan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
	x = _mm256_min_pd(_mm256_max_pd(x, lo), hi);
	__m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
	                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
	r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);
	// Horner from 1/13! down to 1/1!, then + 1.
	static const double c[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
	                           1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
	                           1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
	                           1.0};
	__m256d p = _mm256_set1_pd(c[0]);
	for (int i = 1; i < 13; i++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c[i]));
	p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
	// 2^k for |k| <= 217: split in two factors so neither leaves the normal
	// range of double.
	__m128i ki = _mm256_cvtpd_epi32(k);
	__m128i k1 = _mm_srai_epi32(ki, 1), k2 = _mm_sub_epi32(ki, k1);
	__m256i e1 = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k1), _mm256_set1_epi64x(1023)), 52);
	__m256i e2 = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k2), _mm256_set1_epi64x(1023)), 52);
	p = _mm256_mul_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(e1)), _mm256_castsi256_pd(e2));
	return _mm256_blendv_pd(p, _mm256_set1_pd(NAN), nan);
}

int swiglu_compiled(void) { return 1; }

TARGET void swiglu_avx2(const float *g, const float *u, float *a, int n) {
	const __m256 one = _mm256_set1_ps(1.0f);
	const __m256d neg = _mm256_set1_pd(-0.0);
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		__m256 gv = _mm256_loadu_ps(g + j);
		__m128 e0 = _mm256_cvtpd_ps(exp4(_mm256_xor_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(gv)), neg)));
		__m128 e1 = _mm256_cvtpd_ps(exp4(_mm256_xor_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(gv, 1)), neg)));
		__m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(e0), e1, 1);
		__m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, e));
		_mm256_storeu_ps(a + j, _mm256_mul_ps(s, _mm256_loadu_ps(u + j)));
	}
	for (; j < n; j++) {
		float e = (float)exp(-(double)g[j]);
		a[j] = g[j] / (1.0f + e) * u[j];
	}
}

#else

int swiglu_compiled(void) { return 0; }

void swiglu_avx2(const float *g, const float *u, float *a, int n) { (void)g, (void)u, (void)a, (void)n; }

#endif
