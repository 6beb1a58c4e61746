// Q8 block kernels: weights and activations in blocks of 32 int8 values with
// one float32 scale each (x ≈ d·q, d = max|x|/127), the layout of llama.cpp's
// Q8_0 with a float32 scale instead of float16.
#ifndef TALKBOX_Q8_H
#define TALKBOX_Q8_H

#include <stdint.h>

#define Q8_BLOCK 32

// Paths, in the order Go's Path constants use.
enum { Q8_PORTABLE = 0, Q8_AVX2 = 1, Q8_AVX512 = 2, Q8_AVX512VNNI = 3 };

// q8_compiled reports whether path was compiled into this build (the x86-64
// SIMD paths exist only on x86-64); the caller checks the CPU supports it.
int q8_compiled(int path);

// q8_quantize_rows quantizes n rows of cols floats (x, row stride ldx) into
// blocks: row i's kb = ceil(cols/32) blocks at qs + i*kb*32 and d + i*kb;
// the last block is zero-padded. Every path gives the same bytes (path only
// picks the instructions), so the paths' products differ only in the order
// their float sums are added.
void q8_quantize_rows(int path, const float *x, int n, int cols, int ldx, int8_t *qs, float *d);

// q8_gemm sets y[j*ldy + r] = bias[r] + Σ_b wd[r,b]·xd[j,b]·Σ_i wq[r,b,i]·xq[j,b,i]
// for weight rows r in [r0, r1) and activation rows j in [0, nx); kb blocks a
// row. bias may be NULL.
void q8_gemm(int path, int r0, int r1, int kb, const int8_t *wq, const float *wd,
             int nx, const int8_t *xq, const float *xd, const float *bias, float *y, int ldy);

#endif
