// Package f32vec holds the float32 vector loops the CPU engine runs outside
// its matrix products (attention scores and weighted sums, the pure-Go
// matrix-vector product), with an AVX form on x86-64 that gives the Go
// loop's result bit for bit: the float32 reference stays one definition
// whichever form runs.
package f32vec

// Dot is a float32 dot product over len(a) with 8 partial sums (b must be at
// least as long): s_k sums the products of the indices i ≡ k (mod 8) below
// the last multiple of 8 in order, the rest go to s_0, and the result is
// ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). Each product is rounded to float32
// before it is added (the conversions forbid a fused multiply-add), so the
// AVX kernel and this loop give the same bits.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s [8]float32
	i := 0
	if useAVX && len(a) >= 8 {
		i = len(a) &^ 7
		dotLanesAVX(&a[0], &b[0], i, &s)
	}
	for ; i+8 <= len(a); i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s[0] += float32(aa[0] * bb[0])
		s[1] += float32(aa[1] * bb[1])
		s[2] += float32(aa[2] * bb[2])
		s[3] += float32(aa[3] * bb[3])
		s[4] += float32(aa[4] * bb[4])
		s[5] += float32(aa[5] * bb[5])
		s[6] += float32(aa[6] * bb[6])
		s[7] += float32(aa[7] * bb[7])
	}
	for ; i < len(a); i++ {
		s[0] += float32(a[i] * b[i])
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// AddScaled sets dst[i] += w·src[i] for i < len(dst) (src must be at least
// as long), each product rounded to float32 before it is added.
func AddScaled(dst, src []float32, w float32) {
	src = src[:len(dst)]
	i := 0
	if useAVX && len(dst) >= 8 {
		i = len(dst) &^ 7
		addScaledAVX(&dst[0], &src[0], i, w)
	}
	for ; i < len(dst); i++ {
		dst[i] += float32(w * src[i])
	}
}
