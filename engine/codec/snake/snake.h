#ifndef TALKBOX_SNAKE_H
#define TALKBOX_SNAKE_H
#include <math.h>
#include <stddef.h>

static inline float snake_sinsq(float u) {
	double s = sin((double)u);
	return (float)(s * s);
}

// snake_compiled reports whether the AVX2 kernel is compiled in (x86-64).
int snake_compiled(void);

// snake_rows_avx2 sets y = x + ib·sin²(x·a) for rows [t0, t1) of C channels.
void snake_rows_avx2(const float *x, float *y, const float *a, const float *ib, int t0, int t1, int C);
#endif
