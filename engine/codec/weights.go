package codec

import (
	"fmt"

	"talkbox/engine/codec/gemm"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

// tensorSource returns a float32 tensor by name, checked against shape.
type tensorSource func(name string, shape ...int) ([]float32, error)

func fileSource(f *safetensors.File) tensorSource {
	return func(name string, shape ...int) ([]float32, error) {
		info, ok := f.Info(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s: missing tensor %s", model.ErrIncompleteCheckpoint, f.Path, name)
		}
		if !sameShape(info.Shape, shape) {
			return nil, fmt.Errorf("%w: %s: tensor %s has shape %v, want %v", model.ErrIncompleteCheckpoint, f.Path, name, info.Shape, shape)
		}
		v, err := f.F32(name)
		if err != nil {
			return nil, fmt.Errorf("codec weights: %w", err)
		}
		return v, nil
	}
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// loader reads tensors in sequence and keeps the first error, so the layer
// constructors stay linear.
type loader struct {
	src tensorSource
	err error
}

func (l *loader) get(name string, shape ...int) []float32 {
	if l.err != nil {
		return nil
	}
	v, err := l.src("decoder."+name, shape...)
	if err != nil {
		l.err = err
		return make([]float32, prod(shape))
	}
	return v
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func (l *loader) linear(name string, out, in int, bias bool) linear {
	w := l.get(name+".weight", out, in)
	var b []float32
	if bias {
		b = l.get(name+".bias", out)
	}
	return newLinear(w, out, in, b)
}

// newLinear packs a [out][in] weight for the kernels (a nil w, after a load
// error, gives zeros).
func newLinear(w []float32, out, in int, b []float32) linear {
	if w == nil {
		w = make([]float32, out*in)
	}
	return linear{in: in, out: out, w: gemm.Pack(w, out, in), b: b}
}

// conv loads a Conv1d [out, in, k].
func (l *loader) conv(name string, in, out, k, dil int, bias bool) conv {
	w := l.get(name+".weight", out, in, k)
	var b []float32
	if bias {
		b = l.get(name+".bias", out)
	}
	return newConv(w, in, out, k, dil, b)
}

// newConv reorders a Conv1d weight [out, in, k] to [out][k][in] (tap by tap,
// the order the kernels read the input rows in) and packs it.
func newConv(w []float32, in, out, k, dil int, b []float32) conv {
	c := conv{in: in, out: out, k: k, dil: dil, b: b, off: make([]int, k)}
	rw := make([]float32, out*k*in)
	if w != nil {
		for o := 0; o < out; o++ {
			for i := 0; i < in; i++ {
				for j := 0; j < k; j++ {
					rw[(o*k+j)*in+i] = w[(o*in+i)*k+j]
				}
			}
		}
	}
	c.w = gemm.Pack(rw, out, k*in)
	for j := range c.off {
		c.off[j] = j * dil * in
	}
	return c
}

// transConv loads a ConvTranspose1d [in, out, k] with stride s, k = s or
// k = 2s. Output sample t·s+p is W[:,:,p]ᵀ·x[t] + W[:,:,p+s]ᵀ·x[t-1] + bias,
// so the weights become one [s·out][taps·in] matrix whose row (p, o) holds
// tap p then tap p+s, and one frame of output is a single product.
func (l *loader) transConv(name string, in, out, k, s int) transConv {
	w := l.get(name+".conv.weight", in, out, k)
	b := l.get(name+".conv.bias", out)
	taps := k / s
	if l.err == nil && (k%s != 0 || taps < 1 || taps > 2) {
		l.err = fmt.Errorf("codec: %s: kernel %d with stride %d is not supported (want k = s or 2s)", name, k, s)
		return transConv{}
	}
	if l.err != nil {
		return transConv{}
	}
	tc := transConv{in: in, out: out, s: s, taps: taps, b: make([]float32, s*out)}
	rw := make([]float32, s*out*taps*in)
	for p := 0; p < s; p++ {
		for o := 0; o < out; o++ {
			row := rw[(p*out+o)*taps*in:]
			for tap := 0; tap < taps; tap++ {
				for i := 0; i < in; i++ {
					row[tap*in+i] = w[(i*out+o)*k+p+tap*s]
				}
			}
			tc.b[p*out+o] = b[o]
		}
	}
	tc.w = gemm.Pack(rw, s*out, taps*in)
	return tc
}

// snake loads log-scale SnakeBeta parameters and stores exp(α) and
// 1/(exp(β)+1e-9), computed in float32 as the official forward does.
func (l *loader) snake(name string, ch int) snake {
	a := l.get(name+".alpha", ch)
	b := l.get(name+".beta", ch)
	s := snake{a: make([]float32, ch), ib: make([]float32, ch)}
	for c := 0; c < ch; c++ {
		s.a[c] = expf(a[c])
		s.ib[c] = 1 / (expf(b[c]) + 1e-9)
	}
	return s
}
