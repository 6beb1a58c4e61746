package cpu

import (
	"fmt"

	"talkbox/engine/linalg"
	"talkbox/engine/qkernels"
)

// Precision is the number format of the LM's weight matrices.
type Precision string

const (
	// F32 is the exact reference: every golden test runs it.
	F32 Precision = "f32"
	// Int8 stores the matrices as int8 in blocks of 32 with a float32
	// scale (engine/qkernels) and quantizes each input row the same way:
	// a quarter of F32's memory traffic, which bounds decoding. Embedding
	// tables, norms and the KV cache stay float32.
	Int8 Precision = "int8"
	// DefaultPrecision is what an empty Options.Precision means.
	DefaultPrecision = Int8
)

// ParsePrecision reads "f32" or "int8"; "" is DefaultPrecision.
func ParsePrecision(s string) (Precision, error) {
	switch Precision(s) {
	case "":
		return DefaultPrecision, nil
	case F32, Int8:
		return Precision(s), nil
	}
	return "", fmt.Errorf("cpu: unknown precision %q (want f32 or int8)", s)
}

// weight is one LM matrix in one of the two formats: f for F32, q for Int8.
type weight struct {
	f *linalg.Matrix
	q *qkernels.Matrix
}

func (w *weight) rows() int {
	if w.q != nil {
		return w.q.Rows
	}
	return w.f.Rows
}

// prods runs the products of either format: f32 weights on linalg's
// kernels, int8 ones on qkernels'.
type prods struct {
	f       linalg.Kernels
	q       *qkernels.Kernels // nil under F32
	threads int               // for the loops around the products (attention, SiLU)
}

// mul sets Y = X W^T + b for n rows of x (see linalg.Kernels.MatMul).
func (p prods) mul(w *weight, b, x []float32, n int, y []float32) {
	if w.q != nil {
		p.q.MatMul(w.q, b, x, n, y)
		return
	}
	p.f.MatMul(w.f, b, x, n, y)
}

// name says which kernels run the matrices, for Device.
func (p prods) name() string {
	if p.q == nil {
		return "f32 " + p.f.Name()
	}
	s := "int8 " + p.q.Path().String()
	if p.q.Path() == qkernels.Portable {
		s += " (no AVX2: portable kernels, slow)"
	}
	return s
}
