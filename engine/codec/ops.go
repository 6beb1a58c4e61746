package codec

import (
	"math"

	"talkbox/engine/codec/gemm"
	snakec "talkbox/engine/codec/snake"
	"talkbox/engine/cores"
)

func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// parallelRows runs fn over [0,T) split into contiguous ranges on the cores
// the LM leaves free (engine/cores), when the work (T·width) is large enough
// to pay for goroutines.
func parallelRows(T, width int, fn func(t0, t1 int)) {
	p := cores.Limit()
	if p <= 1 || T < 2 || T*width < 1<<14 {
		fn(0, T)
		return
	}
	cores.For(T, 1, min(p, 16), fn)
}

// apply runs a linear layer on T time-major rows.
func (l *linear) apply(x []float32, T int) []float32 {
	y := make([]float32, T*l.out)
	gemm.NT(y, x, T, l.w, l.b)
	return y
}

// histRows is how many past input rows a causal conv needs.
func (c *conv) histRows() int { return (c.k - 1) * c.dil }

// run applies the causal conv to T new rows x. hist holds the previous
// histRows() input rows (zeros at the start of a stream, which is exactly the
// official left zero padding) and is updated in place. The product reads
// the taps as row offsets into history-then-input, with no im2col copy.
func (c *conv) run(hist, x []float32, T int) []float32 {
	H := c.histRows()
	y := make([]float32, T*c.out)
	if H == 0 {
		gemm.NT(y, x, T, c.w, c.b)
		return y
	}
	ext := make([]float32, 0, (H+T)*c.in)
	ext = append(append(ext, hist...), x...)
	gemm.Conv(y, ext, T, c.in, c.off, c.w, c.b)
	copy(hist, ext[T*c.in:])
	return y
}

// run applies the causal transposed conv to T rows, giving T·s rows. prev is
// the previous input row (needed when k = 2s), updated in place.
func (tc *transConv) run(prev, x []float32, T int) []float32 {
	y := make([]float32, T*tc.s*tc.out)
	if tc.taps == 1 {
		gemm.NT(y, x, T, tc.w, tc.b)
		return y
	}
	// Row t of prev-then-x is input t-1: tap 0 (input t) starts one row on.
	ext := make([]float32, 0, (T+1)*tc.in)
	ext = append(append(ext, prev...), x...)
	gemm.Conv(y, ext, T, tc.in, []int{tc.in, 0}, tc.w, tc.b)
	copy(prev, x[(T-1)*tc.in:T*tc.in])
	return y
}

// apply returns SnakeBeta(x) = x + sin²(x·a)/(b+1e-9) for T rows of C
// channels, as a new slice (the input is still needed by residual paths).
func (s *snake) apply(x []float32, T int) []float32 {
	C := len(s.a)
	y := make([]float32, len(x))
	parallelRows(T, C, func(t0, t1 int) {
		if snakec.Available {
			snakec.Rows(x, y, s.a, s.ib, t0, t1, C)
			return
		}
		for t := t0; t < t1; t++ {
			row := x[t*C : (t+1)*C]
			out := y[t*C : (t+1)*C]
			for c, v := range row {
				out[c] = v + s.ib[c]*sinSq(v*s.a[c])
			}
		}
	})
	return y
}

// rmsNorm returns x·rsqrt(mean(x²)+eps)·w per row.
func rmsNorm(x, w []float32, T int, eps float64) []float32 {
	C := len(w)
	y := make([]float32, len(x))
	for t := 0; t < T; t++ {
		row := x[t*C : (t+1)*C]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		r := float32(1 / math.Sqrt(ss/float64(C)+eps))
		for c, v := range row {
			y[t*C+c] = w[c] * (v * r)
		}
	}
	return y
}

// layerNorm normalises each row over its channels (biased variance).
func layerNorm(x, w, b []float32, T int, eps float64) {
	C := len(w)
	for t := 0; t < T; t++ {
		row := x[t*C : (t+1)*C]
		var mean float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(C)
		var vr float64
		for _, v := range row {
			d := float64(v) - mean
			vr += d * d
		}
		inv := 1 / math.Sqrt(vr/float64(C)+eps)
		for c, v := range row {
			row[c] = float32((float64(v)-mean)*inv)*w[c] + b[c]
		}
	}
}

// geluErf is the exact GELU, 0.5·x·(1+erf(x/√2)).
func geluErf(x []float32) {
	parallelRows(len(x)/256+1, 256, func(b0, b1 int) {
		for i := b0 * 256; i < min(b1*256, len(x)); i++ {
			v := float64(x[i])
			x[i] = float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
		}
	})
}

func silu(v float32) float32 { return v / (1 + expf(-v)) }

// rope holds the inverse frequencies of rotate-half RoPE, rounded to float32
// as the official float32 buffer is.
type rope struct {
	invFreq []float32
	half    int
}

func newRope(headDim int, theta float64) rope {
	r := rope{half: headDim / 2, invFreq: make([]float32, headDim/2)}
	for j := range r.invFreq {
		r.invFreq[j] = float32(1 / math.Pow(theta, float64(2*j)/float64(headDim)))
	}
	return r
}

// tables returns cos and sin for position pos, [half] each. The angle is a
// float32 product, as in the official float32 forward, so streaming and the
// official decode see the same angles at the same positions.
func (r *rope) tables(pos int, cos, sin []float32) {
	for j, f := range r.invFreq {
		a := float64(f * float32(pos))
		cos[j] = float32(math.Cos(a))
		sin[j] = float32(math.Sin(a))
	}
}

// rotate applies RoPE in place to one head vector v [2·half].
func (r *rope) rotate(v, cos, sin []float32) {
	h := r.half
	for j := 0; j < h; j++ {
		x1, x2 := v[j], v[j+h]
		v[j] = x1*cos[j] - x2*sin[j]
		v[j+h] = x2*cos[j] + x1*sin[j]
	}
}

// sinSq is sin²(x) for float32 x, evaluated in float64 without math.Sin:
// sin² has period π, so x is reduced to r = x - kπ in [-π/2, π/2] and sin r
// comes from its Taylor series to r¹³ (truncation error < 7e-10 there). It is
// several times faster than math.Sin, which matters because SnakeBeta runs
// about 2.8 million times per frame at the released sizes.
func sinSq(x float32) float32 {
	xd := float64(x)
	k := math.Floor(xd*(1/math.Pi) + 0.5)
	r := xd - k*math.Pi
	r2 := r * r
	sn := r * (1 + r2*(-1.0/6+r2*(1.0/120+r2*(-1.0/5040+r2*(1.0/362880+r2*(-1.0/39916800+r2*(1.0/6227020800)))))))
	return float32(sn * sn)
}
