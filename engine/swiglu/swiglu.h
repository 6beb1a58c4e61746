#ifndef TALKBOX_SWIGLU_H
#define TALKBOX_SWIGLU_H

// swiglu_compiled reports whether the AVX2 form was compiled in (x86-64).
int swiglu_compiled(void);

// swiglu_avx2 sets a[j] = silu(g[j])·u[j] for j < n: silu(g) = g / (1 + e)
// with e = exp(-g) evaluated in double precision and rounded to float32, the
// division and the product in float32.
void swiglu_avx2(const float *g, const float *u, float *a, int n);

#endif
