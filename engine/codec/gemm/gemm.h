#ifndef TALKBOX_GEMM_H
#define TALKBOX_GEMM_H
#include <stdint.h>

// Columns per packed panel: a panel holds NR weight rows (output columns)
// interleaved k by k, [K][NR], the last panel zero-padded.
#define GEMM_NR 16

enum { GEMM_PORTABLE = 0, GEMM_AVX2 = 1 };

// gemm_compiled reports whether path p is compiled in.
int gemm_compiled(int path);

// gemm_conv computes, for rows m in [m0, m1) and panels [p0, p1),
//   c[m*ldc + n] = bias[n] + sum over taps t, then channels i < kin, in that
//                  order, of a[m*lda + off[t] + i] * W[n][t*kin + i]
// with one float32 accumulator per output (so a row's result does not depend
// on which other rows are computed). w is packed (K = taps*kin), n < N.
// bias may be NULL.
void gemm_conv(int path, float *c, int64_t ldc, const float *a, int64_t lda, const int64_t *off, int taps, int kin,
               const float *w, int N, const float *bias, int m0, int m1, int p0, int p1);
#endif
