// Package linalg holds the two float32 products the engines spend their time
// in, over a row-major [out, in] weight (the PyTorch Linear layout): MatVec
// (y = W x + b, one dot product per weight row) and MatMul over n input rows
// (Y = X W^T + b). OpenBLAS is the default implementation; `-tags noblas`
// builds the pure-Go one. It knows nothing of models.
package linalg

// Matrix is a row-major [Rows, Cols] weight, the PyTorch Linear layout
// [out, in], so y = W x is one dot product per row.
type Matrix struct {
	Rows, Cols int
	W          []float32 // len Rows*Cols
}

// Row returns row i of m (aliasing W).
func (m *Matrix) Row(i int) []float32 { return m.W[i*m.Cols : (i+1)*m.Cols] }

// Kernels are the two products. Decode is memory-bound matrix-vector work;
// prefill is matrix-matrix work over all prompt rows at once. The bias b may
// be nil; when given it has m.Rows entries. Implementations are safe for
// concurrent use.
type Kernels interface {
	// MatVec sets y[r] = W[r,:]·x + b[r] for every row r (x has m.Cols
	// entries, y has m.Rows).
	MatVec(m *Matrix, b, x, y []float32)
	// MatMul sets Y[i, r] = W[r,:]·X[i,:] + b[r] for n input rows (X is
	// [n, m.Cols], Y is [n, m.Rows]).
	MatMul(m *Matrix, b, x []float32, n int, y []float32)
	// Name says which implementation runs ("openblas" or "go").
	Name() string
}

// biasAt is b[r], or 0 without a bias.
func biasAt(b []float32, r int) float32 {
	if b == nil {
		return 0
	}
	return b[r]
}
