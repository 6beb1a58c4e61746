package linalg

import (
	"sync"

	"talkbox/engine/cores"
	"talkbox/engine/f32vec"
)

// goKernels is the pure-Go implementation: rows are split into one contiguous
// band per goroutine, and each dot product runs 8 independent accumulators so
// the additions do not serialise on one register.
type goKernels struct{ threads int }

// NewGo returns the pure-Go kernels with the given number of goroutines (0 =
// every core engine/cores computes on). Tests compare them with the default
// ones, and -tags noblas builds use them as the default.
func NewGo(threads int) Kernels {
	if threads <= 0 {
		threads = cores.Limit()
	}
	return &goKernels{threads: threads}
}

func (g *goKernels) Name() string { return "go" }

// ParallelRows runs fn over [0, rows) in at most threads contiguous bands;
// work is the job's size in multiply-adds (or elements), and small jobs stay
// on the caller's goroutine because the spawn cost would dominate.
func ParallelRows(threads, rows, work int, fn func(lo, hi int)) {
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

func (g *goKernels) MatVec(m *Matrix, b, x, y []float32) {
	x = x[:m.Cols]
	ParallelRows(g.threads, m.Rows, m.Rows*m.Cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			y[r] = f32vec.Dot(m.Row(r), x) + biasAt(b, r)
		}
	})
}

// MatMul with n = 1 is MatVec (decode speed). For n >= 2 every input row
// goes through dot4, the last ones padded with repeats, so a row's result
// has the same bits whatever rows share the call or where it sits among
// them; OpenBLAS's gemm has the same property, and the prompt builder relies
// on it (a token's row must not change with the rows before it).
func (g *goKernels) MatMul(m *Matrix, b, x []float32, n int, y []float32) {
	if n == 1 {
		g.MatVec(m, b, x, y)
		return
	}
	cols, rows := m.Cols, m.Rows
	in := func(i int) []float32 { i = min(i, n-1); return x[i*cols : (i+1)*cols] }
	ParallelRows(g.threads, rows, n*rows*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			w := m.Row(r)
			br := biasAt(b, r)
			// Four input rows per pass reuse each loaded weight four times.
			for i := 0; i < n; i += 4 {
				d := [4]float32{}
				d[0], d[1], d[2], d[3] = dot4(w, in(i), in(i+1), in(i+2), in(i+3))
				for j := i; j < min(i+4, n); j++ {
					y[j*rows+r] = d[j-i] + br
				}
			}
		}
	})
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
