#include "gemm.h"

#include <string.h>

// Blocking: a kc-long slice of MR input rows (6 KiB) stays in L1 while it
// meets every panel of an nc-wide block of packed weights (kc x nc floats,
// 256 KiB, held in L2); the weights are then reused by the next MR rows.
#define MR 6
#define KC 256
#define NCP 16 // panels per nc block: 256 columns

// Loads the mr x 16 tile at c (row stride ldc) into t (row stride 16), or
// only the valid ncol columns of it, zeros elsewhere.
static void tile_in(float *t, const float *c, int64_t ldc, int mr, int ncol) {
	memset(t, 0, sizeof(float) * MR * GEMM_NR);
	for (int i = 0; i < mr; i++) memcpy(t + i * GEMM_NR, c + i * ldc, sizeof(float) * ncol);
}

static void tile_out(float *c, int64_t ldc, const float *t, int mr, int ncol) {
	for (int i = 0; i < mr; i++) memcpy(c + i * ldc, t + i * GEMM_NR, sizeof(float) * ncol);
}

// ---- portable ----

static void kern_portable(int mr, int kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc, int first,
                          const float *bias) {
	for (int i = 0; i < mr; i++) {
		float acc[GEMM_NR];
		for (int j = 0; j < GEMM_NR; j++) acc[j] = first ? 0.0f : c[i * ldc + j];
		const float *ar = a + i * lda;
		for (int k = 0; k < kc; k++) {
			float x = ar[k];
			const float *br = b + k * GEMM_NR;
			for (int j = 0; j < GEMM_NR; j++) acc[j] += x * br[j];
		}
		if (bias)
			for (int j = 0; j < GEMM_NR; j++) acc[j] += bias[j];
		for (int j = 0; j < GEMM_NR; j++) c[i * ldc + j] = acc[j];
	}
}

// ---- AVX2 + FMA ----

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2 1

// The accumulators are named variables, not arrays: GCC keeps arrays of
// vectors in memory and stores them every iteration. mr is a constant after
// inlining, so the unused rows compile away.
#define ROW_INIT(i)                                                                                                    \
	__m256 c##i##a = _mm256_setzero_ps(), c##i##b = _mm256_setzero_ps();                                                 \
	if (mr > i && !first) {                                                                                               \
		c##i##a = _mm256_loadu_ps(c + i * ldc);                                                                          \
		c##i##b = _mm256_loadu_ps(c + i * ldc + 8);                                                                      \
	}
#define ROW_FMA(i)                                                                                                     \
	if (mr > i) {                                                                                                         \
		__m256 x = _mm256_broadcast_ss(a + i * lda + k);                                                                 \
		c##i##a = _mm256_fmadd_ps(x, b0, c##i##a);                                                                       \
		c##i##b = _mm256_fmadd_ps(x, b1, c##i##b);                                                                       \
	}
#define ROW_OUT(i)                                                                                                     \
	if (mr > i) {                                                                                                         \
		if (bias) {                                                                                                       \
			c##i##a = _mm256_add_ps(c##i##a, _mm256_loadu_ps(bias));                                                     \
			c##i##b = _mm256_add_ps(c##i##b, _mm256_loadu_ps(bias + 8));                                                 \
		}                                                                                                                 \
		_mm256_storeu_ps(c + i * ldc, c##i##a);                                                                          \
		_mm256_storeu_ps(c + i * ldc + 8, c##i##b);                                                                      \
	}

__attribute__((target("avx2,fma"), always_inline)) static inline void
kern_avx2_n(const int mr, int kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc, int first,
            const float *bias) {
	ROW_INIT(0) ROW_INIT(1) ROW_INIT(2) ROW_INIT(3) ROW_INIT(4) ROW_INIT(5)
	for (int k = 0; k < kc; k++) {
		__m256 b0 = _mm256_loadu_ps(b + k * GEMM_NR);
		__m256 b1 = _mm256_loadu_ps(b + k * GEMM_NR + 8);
		ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
	}
	ROW_OUT(0) ROW_OUT(1) ROW_OUT(2) ROW_OUT(3) ROW_OUT(4) ROW_OUT(5)
}

__attribute__((target("avx2,fma"))) static void kern_avx2(int mr, int kc, const float *a, int64_t lda, const float *b,
                                                          float *c, int64_t ldc, int first, const float *bias) {
	switch (mr) {
	case 6: kern_avx2_n(6, kc, a, lda, b, c, ldc, first, bias); break;
	case 5: kern_avx2_n(5, kc, a, lda, b, c, ldc, first, bias); break;
	case 4: kern_avx2_n(4, kc, a, lda, b, c, ldc, first, bias); break;
	case 3: kern_avx2_n(3, kc, a, lda, b, c, ldc, first, bias); break;
	case 2: kern_avx2_n(2, kc, a, lda, b, c, ldc, first, bias); break;
	default: kern_avx2_n(1, kc, a, lda, b, c, ldc, first, bias); break;
	}
}
#else
#define HAVE_AVX2 0
#endif

int gemm_compiled(int path) {
	switch (path) {
	case GEMM_PORTABLE: return 1;
	case GEMM_AVX2: return HAVE_AVX2;
	}
	return 0;
}

typedef void (*kern_fn)(int, int, const float *, int64_t, const float *, float *, int64_t, int, const float *);

void gemm_conv(int path, float *c, int64_t ldc, const float *a, int64_t lda, const int64_t *off, int taps, int kin,
               const float *w, int N, const float *bias, int m0, int m1, int p0, int p1) {
	kern_fn kern = kern_portable;
#if HAVE_AVX2
	if (path == GEMM_AVX2) kern = kern_avx2;
#endif
	const int64_t K = (int64_t)taps * kin;
	float tile[MR * GEMM_NR], tbias[GEMM_NR];
	// One block of rows (decoding a frame's first layers, the transformer):
	// the weights are read once, so each panel is streamed start to end
	// rather than in kc slices across panels, which the prefetcher follows.
	const int one_block = m1 - m0 <= MR;
	const int pstep = one_block ? 1 : NCP;
	for (int pb = p0; pb < p1; pb += pstep) {
		const int pe = pb + pstep < p1 ? pb + pstep : p1;
		for (int t = 0; t < taps; t++) {
			for (int i0 = 0; i0 < kin; i0 += KC) {
				const int kc = kin - i0 < KC ? kin - i0 : KC;
				const int first = t == 0 && i0 == 0;
				const int last = t == taps - 1 && i0 + kc == kin;
				for (int m = m0; m < m1; m += MR) {
					const int mr = m1 - m < MR ? m1 - m : MR;
					const float *am = a + m * lda + off[t] + i0;
					for (int p = pb; p < pe; p++) {
						const float *bp = w + (int64_t)p * K * GEMM_NR + ((int64_t)t * kin + i0) * GEMM_NR;
						float *cm = c + m * ldc + p * GEMM_NR;
						const int ncol = N - p * GEMM_NR < GEMM_NR ? N - p * GEMM_NR : GEMM_NR;
						const float *bb = NULL;
						if (last && bias) {
							if (ncol == GEMM_NR) {
								bb = bias + p * GEMM_NR;
							} else {
								memset(tbias, 0, sizeof tbias);
								memcpy(tbias, bias + p * GEMM_NR, sizeof(float) * ncol);
								bb = tbias;
							}
						}
						if (ncol == GEMM_NR) {
							kern(mr, kc, am, lda, bp, cm, ldc, first, bb);
						} else {
							if (!first) tile_in(tile, cm, ldc, mr, ncol);
							kern(mr, kc, am, lda, bp, tile, GEMM_NR, first, bb);
							tile_out(cm, ldc, tile, mr, ncol);
						}
					}
				}
			}
		}
	}
}
