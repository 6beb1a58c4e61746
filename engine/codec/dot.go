package codec

// dot is Σ a[k]·b[k] in float32 (the attention's scores), with the AVX2+FMA
// kernel of dot_amd64.s for the multiple-of-8 part when the CPU has it.
func dot(a, b []float32) float32 {
	K := len(a)
	b = b[:K]
	var s float32
	k8 := 0
	if useAVX {
		k8 = K &^ 7
		if k8 > 0 {
			s = dot1AVX(&a[0], &b[0], k8)
		}
	}
	for k := k8; k < K; k++ {
		s += a[k] * b[k]
	}
	return s
}
