package cpu

import (
	"math"
	"slices"
)

// rmsNorm writes x·rsqrt(mean(x²)+eps)·w into dst. The mean is accumulated in
// float64 (the official code computes it in float32; float64 only removes
// rounding); the scaling happens in float32 like the official cast order.
func rmsNorm(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		dst[i] = (v * inv) * w[i]
	}
}

// rmsNormRows applies rmsNorm to each of the n rows of width len(w).
func rmsNormRows(dst, x, w []float32, n int, eps float32) {
	d := len(w)
	for i := 0; i < n; i++ {
		rmsNorm(dst[i*d:(i+1)*d], x[i*d:(i+1)*d], w, eps)
	}
}

// rope holds rotate-half RoPE tables, grown on demand: cos/sin of
// pos·inv_freq[j] for j < headDim/2, in float32 as the official code builds
// them (inv_freq = 1/theta^(2j/d) in float32, angle product in float32).
type rope struct {
	half    int
	invFreq []float32
	cos     []float32 // [pos, half]
	sin     []float32
}

func newRope(headDim int, theta float64) *rope {
	half := headDim / 2
	r := &rope{half: half, invFreq: make([]float32, half)}
	for j := 0; j < half; j++ {
		exp := float32(2*j) / float32(headDim)
		r.invFreq[j] = 1 / float32(math.Pow(theta, float64(exp)))
	}
	return r
}

// ensure makes the tables cover positions [0, n).
func (r *rope) ensure(n int) {
	have := len(r.cos) / r.half
	if have >= n {
		return
	}
	n = max(n, 2*have) // amortise growth during decoding
	r.cos = slices.Grow(r.cos, (n-have)*r.half)
	r.sin = slices.Grow(r.sin, (n-have)*r.half)
	for p := have; p < n; p++ {
		for j := 0; j < r.half; j++ {
			a := float64(float32(p) * r.invFreq[j])
			r.cos = append(r.cos, float32(math.Cos(a)))
			r.sin = append(r.sin, float32(math.Sin(a)))
		}
	}
}

// apply rotates one head vector at position pos: element i pairs with
// i+half (split-half / NeoX pairing, not adjacent pairs).
func (r *rope) apply(x []float32, pos int) {
	c := r.cos[pos*r.half : (pos+1)*r.half]
	s := r.sin[pos*r.half : (pos+1)*r.half]
	h := r.half
	lo, hi := x[:h], x[h:2*h]
	for i := 0; i < h; i++ {
		a, b := lo[i], hi[i]
		lo[i] = a*c[i] - b*s[i]
		hi[i] = b*c[i] + a*s[i]
	}
}

// grow returns buf resized to n elements, reusing its storage when possible.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
