package speaker

import (
	"fmt"
	"math"

	"talkbox/engine/cores"
	"talkbox/engine/linalg"
	"talkbox/engine/safetensors"
)

// Activations are time-major: x[t*C+c] for T rows of C channels, so a 1-D
// convolution is one product of im2col rows with the [out][k·in] weight.

// parallel runs fn over [0,n) in one contiguous band per CPU.
func parallel(n int, fn func(lo, hi int)) {
	linalg.ParallelRows(cores.Limit(), n, n<<15, fn)
}

// padMode is how a convolution fills samples outside the input.
type padMode int

const (
	padZero      padMode = iota // constant 0
	padReflect                  // mirror without repeating the edge (torch "reflect")
	padReplicate                // repeat the edge sample
)

// conv1d is a Conv1d with PyTorch's [out, in, k] weight reordered to
// [out][k][in] (the im2col row layout).
type conv1d struct {
	in, out, k, dil, stride int
	w                       linalg.Matrix
	b                       []float32 // nil without bias
}

// run convolves T rows of x after padding left and right rows with mode and
// returns the output rows and their count.
func (c *conv1d) run(kern linalg.Kernels, x []float32, T, left, right int, mode padMode) ([]float32, int) {
	span := (c.k-1)*c.dil + 1
	P := T + left + right
	Tout := 0
	if P >= span {
		Tout = (P-span)/c.stride + 1
	}
	y := make([]float32, Tout*c.out)
	if Tout == 0 {
		return y, 0
	}
	src := func(p int) int { // padded row p -> input row, or -1 for zero
		i := p - left
		if i >= 0 && i < T {
			return i
		}
		switch mode {
		case padReflect:
			if i < 0 {
				i = -i
			} else {
				i = 2*(T-1) - i
			}
			if i < 0 || i >= T { // input shorter than the padding
				i = max(0, min(T-1, i))
			}
			return i
		case padReplicate:
			return max(0, min(T-1, i))
		}
		return -1
	}
	K := c.k * c.in
	if c.k == 1 && c.stride == 1 && left == 0 && right == 0 {
		kern.MatMul(&c.w, c.b, x, T, y)
		return y, Tout
	}
	col := make([]float32, Tout*K)
	parallel(Tout, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for j := 0; j < c.k; j++ {
				dst := col[t*K+j*c.in : t*K+(j+1)*c.in]
				if r := src(t*c.stride + j*c.dil); r >= 0 {
					copy(dst, x[r*c.in:(r+1)*c.in])
				}
			}
		}
	})
	kern.MatMul(&c.w, c.b, col, Tout, y)
	return y, Tout
}

// same pads for torch's padding="same" with reflect mode: (d·(k-1))/2 rows
// on the left, the rest on the right.
func (c *conv1d) same(kern linalg.Kernels, x []float32, T int) []float32 {
	total := c.dil * (c.k - 1)
	y, _ := c.run(kern, x, T, total/2, total-total/2, padReflect)
	return y
}

// tensors reads float tensors (F32 or BF16, widened) and checks shapes,
// keeping the first error so layer constructors stay linear.
type tensors struct {
	f   *safetensors.File
	err error
}

func (l *tensors) get(name string, shape ...int) []float32 {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if l.err != nil {
		return make([]float32, n)
	}
	info, ok := l.f.Info(name)
	if !ok {
		l.err = fmt.Errorf("%s: missing tensor %s", l.f.Path, name)
		return make([]float32, n)
	}
	if fmt.Sprint(info.Shape) != fmt.Sprint(shape) {
		l.err = fmt.Errorf("%s: tensor %s has shape %v, want %v", l.f.Path, name, info.Shape, shape)
		return make([]float32, n)
	}
	v, err := l.f.F32(name)
	if err != nil {
		l.err = err
		return make([]float32, n)
	}
	return v
}

// conv loads a Conv1d weight [out, in, k] (and bias when asked).
func (l *tensors) conv(name string, in, out, k, dil, stride int, bias bool) conv1d {
	w := l.get(name+".weight", out, in, k)
	c := conv1d{in: in, out: out, k: k, dil: dil, stride: stride,
		w: linalg.Matrix{Rows: out, Cols: k * in, W: make([]float32, out*k*in)}}
	for o := 0; o < out; o++ {
		for i := 0; i < in; i++ {
			for j := 0; j < k; j++ {
				c.w.W[(o*k+j)*in+i] = w[(o*in+i)*k+j]
			}
		}
	}
	if bias {
		c.b = l.get(name+".bias", out)
	}
	return c
}

func relu(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func sigmoid(v float32) float32 { return float32(1 / (1 + math.Exp(-float64(v)))) }
