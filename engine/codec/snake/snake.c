#include "snake.h"

#if defined(__x86_64__)
#include <immintrin.h>

// sin²(u) eight lanes at a time in float32: u reduced by the nearest
// multiple of π (sin² has period π) with π split in two parts, the second
// applied by FMA so the reduction keeps float32 accuracy for |u| < 2^16,
// then sin r by its Taylor series to r¹¹ on [-π/2, π/2] (truncation < 6e-8).
__attribute__((target("avx2,fma"))) void snake_rows_avx2(const float *x, float *y, const float *a, const float *ib,
                                                         int t0, int t1, int C) {
	const __m256 invpi = _mm256_set1_ps(0.318309886183790671538f);
	const __m256 pihi = _mm256_set1_ps(3.14159274101257324219f);
	const __m256 pilo = _mm256_set1_ps(-8.74227800037248952e-8f);
	const __m256 c3 = _mm256_set1_ps(-1.0f / 6), c5 = _mm256_set1_ps(1.0f / 120), c7 = _mm256_set1_ps(-1.0f / 5040),
	             c9 = _mm256_set1_ps(1.0f / 362880), c11 = _mm256_set1_ps(-1.0f / 39916800);
	for (int t = t0; t < t1; t++) {
		const float *row = x + (size_t)t * C;
		float *out = y + (size_t)t * C;
		int c = 0;
		for (; c + 8 <= C; c += 8) {
			__m256 v = _mm256_loadu_ps(row + c);
			__m256 u = _mm256_mul_ps(v, _mm256_loadu_ps(a + c));
			__m256 k = _mm256_round_ps(_mm256_mul_ps(u, invpi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			__m256 r = _mm256_fnmadd_ps(k, pihi, u);
			r = _mm256_fnmadd_ps(k, pilo, r);
			__m256 r2 = _mm256_mul_ps(r, r);
			__m256 p = _mm256_fmadd_ps(r2, c11, c9);
			p = _mm256_fmadd_ps(r2, p, c7);
			p = _mm256_fmadd_ps(r2, p, c5);
			p = _mm256_fmadd_ps(r2, p, c3);
			p = _mm256_mul_ps(r2, p);
			__m256 s = _mm256_fmadd_ps(r, p, r);
			_mm256_storeu_ps(out + c, _mm256_fmadd_ps(_mm256_loadu_ps(ib + c), _mm256_mul_ps(s, s), v));
		}
		for (; c < C; c++) {
			out[c] = row[c] + ib[c] * snake_sinsq(row[c] * a[c]);
		}
	}
}

int snake_compiled(void) { return 1; }
#else
int snake_compiled(void) { return 0; }
void snake_rows_avx2(const float *x, float *y, const float *a, const float *ib, int t0, int t1, int C) {
	(void)x, (void)y, (void)a, (void)ib, (void)t0, (void)t1, (void)C;
}
#endif
