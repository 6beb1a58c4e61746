package codec

import (
	"fmt"

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
	li := linear{in: in, out: out, w: l.get(name+".weight", out, in)}
	if bias {
		li.b = l.get(name+".bias", out)
	}
	return li
}

// conv loads a Conv1d [out, in, k] and reorders it to [out][k][in], the row
// layout of an im2col'd input.
func (l *loader) conv(name string, in, out, k, dil int, bias bool) conv {
	w := l.get(name+".weight", out, in, k)
	c := conv{in: in, out: out, k: k, dil: dil, w: make([]float32, len(w))}
	for o := 0; o < out; o++ {
		for i := 0; i < in; i++ {
			for j := 0; j < k; j++ {
				c.w[(o*k+j)*in+i] = w[(o*in+i)*k+j]
			}
		}
	}
	if bias {
		c.b = l.get(name+".bias", out)
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
	tc := transConv{in: in, out: out, s: s, taps: taps, w: make([]float32, s*out*taps*in), b: make([]float32, s*out)}
	for p := 0; p < s; p++ {
		for o := 0; o < out; o++ {
			row := tc.w[(p*out+o)*taps*in:]
			for tap := 0; tap < taps; tap++ {
				for i := 0; i < in; i++ {
					row[tap*in+i] = w[(i*out+o)*k+p+tap*s]
				}
			}
			tc.b[p*out+o] = b[o]
		}
	}
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
