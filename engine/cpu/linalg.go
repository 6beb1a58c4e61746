package cpu

import (
	"runtime"
	"sync"
)

// matrix is a row-major [rows, cols] weight, the PyTorch Linear layout
// [out, in], so y = W x is one dot product per row.
type matrix struct {
	rows, cols int
	w          []float32
}

func (m *matrix) row(i int) []float32 { return m.w[i*m.cols : (i+1)*m.cols] }

// kernels are the two products the engine spends its time in. Decode is
// memory-bound matrix-vector work; prefill is matrix-matrix work over all
// prompt rows at once.
type kernels interface {
	// matVec sets y[r] = W[r,:]·x for every row r.
	matVec(m *matrix, x, y []float32)
	// matMul sets Y[i, r] = W[r,:]·X[i,:] for n input rows (X is [n, cols],
	// Y is [n, rows]).
	matMul(m *matrix, x []float32, n int, y []float32)
	name() string
}

// goKernels is the pure-Go implementation: rows are split into one contiguous
// band per goroutine, and each dot product runs 8 independent accumulators so
// the additions do not serialise on one register.
type goKernels struct{ threads int }

func newGoKernels(threads int) *goKernels {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &goKernels{threads: threads}
}

func (g *goKernels) name() string { return "go" }

// parallelRows runs fn over [0, rows) in bands; small jobs stay on the caller's
// goroutine because the spawn cost would dominate.
func parallelRows(threads, rows, work int, fn func(lo, hi int)) {
	const minWorkPerThread = 1 << 15
	t := min(threads, rows, max(1, work/minWorkPerThread))
	if t <= 1 {
		fn(0, rows)
		return
	}
	var wg sync.WaitGroup
	band := (rows + t - 1) / t
	for lo := 0; lo < rows; lo += band {
		hi := min(lo+band, rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

func (g *goKernels) matVec(m *matrix, x, y []float32) {
	x = x[:m.cols]
	parallelRows(g.threads, m.rows, m.rows*m.cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			y[r] = dot(m.row(r), x)
		}
	})
}

func (g *goKernels) matMul(m *matrix, x []float32, n int, y []float32) {
	cols, rows := m.cols, m.rows
	parallelRows(g.threads, rows, n*rows*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			w := m.row(r)
			i := 0
			// Four input rows per pass reuse each loaded weight four times.
			for ; i+4 <= n; i += 4 {
				d0, d1, d2, d3 := dot4(w, x[i*cols:(i+1)*cols], x[(i+1)*cols:(i+2)*cols], x[(i+2)*cols:(i+3)*cols], x[(i+3)*cols:(i+4)*cols])
				y[i*rows+r], y[(i+1)*rows+r], y[(i+2)*rows+r], y[(i+3)*rows+r] = d0, d1, d2, d3
			}
			for ; i < n; i++ {
				y[i*rows+r] = dot(w, x[i*cols:(i+1)*cols])
			}
		}
	})
}

// dot is a float32 dot product with 8 partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// dot4 computes w·x0 .. w·x3 in one pass over w.
func dot4(w, x0, x1, x2, x3 []float32) (float32, float32, float32, float32) {
	n := len(w)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	var a0, a1, b0, b1, c0, c1, d0, d1 float32
	i := 0
	for ; i+2 <= n; i += 2 {
		w0, w1 := w[i], w[i+1]
		a0 += w0 * x0[i]
		a1 += w1 * x0[i+1]
		b0 += w0 * x1[i]
		b1 += w1 * x1[i+1]
		c0 += w0 * x2[i]
		c1 += w1 * x2[i+1]
		d0 += w0 * x3[i]
		d1 += w1 * x3[i+1]
	}
	if i < n {
		a0 += w[i] * x0[i]
		b0 += w[i] * x1[i]
		c0 += w[i] * x2[i]
		d0 += w[i] * x3[i]
	}
	return a0 + a1, b0 + b1, c0 + c1, d0 + d1
}
