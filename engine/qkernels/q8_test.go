package qkernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomSlice(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// exact is Y = dequant(X) dequant(W)^T + b in float64 over the quantized
// values: what every path computes, up to float32 rounding of its sums.
func exact(m *Matrix, b, x []float32, n int) []float64 {
	kb := m.Blocks
	xq := make([]int8, n*kb*Block)
	xd := make([]float32, n*kb)
	quantizeRows(Portable, x, n, m.Cols, m.Cols, xq, xd)
	y := make([]float64, n*m.Rows)
	for i := 0; i < n; i++ {
		for r := 0; r < m.Rows; r++ {
			s := 0.0
			if b != nil {
				s = float64(b[r])
			}
			for blk := 0; blk < kb; blk++ {
				var is int64
				for e := 0; e < Block; e++ {
					is += int64(m.Q[(r*kb+blk)*Block+e]) * int64(xq[(i*kb+blk)*Block+e])
				}
				s += float64(m.D[r*kb+blk]) * float64(xd[i*kb+blk]) * float64(is)
			}
			y[i*m.Rows+r] = s
		}
	}
	return y
}

// TestDispatchPicksEveryPath: each path this CPU runs is listed and can be
// built, Best is the fastest of them unless EnvPath forces another, and the
// portable one is always there (a CPU without AVX2 still works).
func TestDispatchPicksEveryPath(t *testing.T) {
	ps := Paths()
	if len(ps) == 0 || ps[0] != Portable {
		t.Fatalf("Paths() = %v, want portable first", ps)
	}
	for p := Portable; p <= AVX512VNNI; p++ {
		if cpuHas(p) && !Supported(p) {
			t.Errorf("the CPU runs %s but it is not supported: not compiled in?", p)
		}
		_, err := New(p, 2)
		if (err == nil) != Supported(p) {
			t.Errorf("New(%s) error %v, Supported %v", p, err, Supported(p))
		}
	}
	t.Setenv(EnvPath, "")
	if b := Best(); b != ps[len(ps)-1] {
		t.Errorf("Best() = %s, want %s", b, ps[len(ps)-1])
	}
	t.Setenv(EnvPath, "portable")
	if b := Best(); b != Portable {
		t.Errorf("with %s=portable Best() = %s", EnvPath, b)
	}
	t.Setenv(EnvPath, "no-such-path")
	if b := Best(); b != ps[len(ps)-1] {
		t.Errorf("an unknown %s should be ignored, Best() = %s", EnvPath, b)
	}
	t.Logf("paths on this machine: %v", ps)
}

// TestPathsAgree runs every supported path on the same inputs: odd and even
// block counts, a padded last block, n = 1 (decode), a multiple of four and
// remainders (prefill), with and without bias, split over goroutines or not.
// Each must match the float64 sum over the quantized values, and so each
// other, to float32 rounding.
func TestPathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{5, 32}, {33, 96}, {67, 133}, {300, 1024}, {64, 3072}} {
		w := randomSlice(rng, shape[0]*shape[1])
		m := Quantize(w, shape[0], shape[1], 2)
		bias := randomSlice(rng, m.Rows)
		for _, n := range []int{1, 2, 4, 7, 9} {
			x := randomSlice(rng, n*m.Cols)
			for _, b := range [][]float32{nil, bias} {
				ref := exact(m, b, x, n)
				var first []float32
				for _, p := range Paths() {
					for _, threads := range []int{1, 3} {
						k, _ := New(p, threads)
						y := make([]float32, n*m.Rows)
						k.MatMul(m, b, x, n, y)
						for i, v := range y {
							tol := 1e-5 * (1 + math.Abs(ref[i])) * math.Sqrt(float64(m.Cols))
							if d := math.Abs(float64(v) - ref[i]); d > tol {
								t.Fatalf("%s threads=%d %dx%d n=%d bias=%v: y[%d] = %v, want %v (|diff| %g)", p, threads, m.Rows, m.Cols, n, b != nil, i, v, ref[i], d)
							}
						}
						if first == nil {
							first = y
						}
					}
				}
				// Row independence: row n-1 alone gives the same value as
				// inside the batch (to rounding) on the best path.
				k, _ := New(Best(), 2)
				y1 := make([]float32, m.Rows)
				k.MatVec(m, b, x[(n-1)*m.Cols:], y1)
				for r, v := range y1 {
					if d := math.Abs(float64(v - first[(n-1)*m.Rows+r])); d > 1e-4*(1+math.Abs(float64(v))) {
						t.Fatalf("%dx%d n=%d: MatVec row %d = %v, batch gave %v", m.Rows, m.Cols, n, r, v, first[(n-1)*m.Rows+r])
					}
				}
			}
		}
	}
}

// TestQuantizeError: every weight is within half a step of its block's
// scale, and the int8 product is close to the float32 one (the error the LM
// sees).
func TestQuantizeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rows, cols := 40, 200
	w := randomSlice(rng, rows*cols)
	w[5] = 0
	for c := 0; c < 32; c++ {
		w[cols+c] = 0 // an all-zero block: scale 0, no NaN
	}
	m := Quantize(w, rows, cols, 2)
	dq := m.Dequantize()
	for i, v := range w {
		step := m.D[(i/cols)*m.Blocks+(i%cols)/Block]
		if d := math.Abs(float64(v - dq[i])); d > float64(step)/2*1.0001 || math.IsNaN(float64(dq[i])) {
			t.Fatalf("w[%d] = %v dequantizes to %v (step %v)", i, v, dq[i], step)
		}
	}
	x := randomSlice(rng, cols)
	k, _ := New(Best(), 1)
	y := make([]float32, rows)
	k.MatVec(m, nil, x, y)
	var worst, norm float64
	for r := 0; r < rows; r++ {
		s := 0.0
		for c := 0; c < cols; c++ {
			s += float64(w[r*cols+c]) * float64(x[c])
		}
		worst = max(worst, math.Abs(s-float64(y[r])))
		norm = max(norm, math.Abs(s))
	}
	// Two 8-bit roundings of N(0,1) data over 200 terms: about 1% of the
	// largest output.
	if worst > 0.03*norm {
		t.Errorf("int8 product off by %g (largest output %g)", worst, norm)
	}
}

func TestEmpty(t *testing.T) {
	k, _ := New(Best(), 2)
	y := []float32{7, 7}
	k.MatMul(Quantize(nil, 2, 0, 1), []float32{1, 2}, nil, 1, y)
	if y[0] != 1 || y[1] != 2 {
		t.Errorf("zero-width product gave %v, want the bias", y)
	}
	k.MatMul(Quantize(make([]float32, 6), 2, 3, 1), nil, nil, 0, y)
	if _, err := ParsePath("avx3"); err == nil {
		t.Error("ParsePath accepted an unknown name")
	}
}

// TestQuantizePathsIdentical: every path quantizes to the bytes of the
// portable definition, so only the products' sum order differs between
// paths. Rows cover a partial last block, a row stride wider than the row,
// all-zero and tiny blocks, values that round at exactly .5 steps, huge
// values, and blocks holding NaN or an infinity (which the SIMD form hands to
// the portable one).
func TestQuantizePathsIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n, cols, ldx = 9, 3*Block + 7, 3*Block + 12
	x := randomSlice(rng, n*ldx)
	for c := 0; c < Block; c++ {
		x[ldx+c] = 0                       // row 1, block 0: all zero
		x[2*ldx+c] = float32(c-16) * 1e-40 // row 2: subnormal values
		x[3*ldx+c] = float32(c-16) + 0.5   // row 3: scale 1, every value a tie
		x[4*ldx+c] = float32(c-16) * 3e37  // row 4: near the float32 limit
	}
	x[3*ldx+Block-1] = 127
	x[5*ldx+3] = float32(math.NaN())
	x[6*ldx+Block+2] = float32(math.Inf(1))
	x[7*ldx+2*Block] = float32(math.Inf(-1))
	x[8*ldx+3*Block+1] = float32(math.NaN()) // in the partial last block
	kb := (cols + Block - 1) / Block
	wantQ, wantD := make([]int8, n*kb*Block), make([]float32, n*kb)
	quantizeRows(Portable, x, n, cols, ldx, wantQ, wantD)
	for _, p := range Paths() {
		q, d := make([]int8, n*kb*Block), make([]float32, n*kb)
		for i := range q {
			q[i] = 99 // padding must be written, not left
		}
		quantizeRows(p, x, n, cols, ldx, q, d)
		for i := range q {
			if q[i] != wantQ[i] {
				t.Fatalf("%s: byte %d (row %d, block %d) = %d, portable %d", p, i, i/(kb*Block), i%(kb*Block)/Block, q[i], wantQ[i])
			}
		}
		for i := range d {
			if math.Float32bits(d[i]) != math.Float32bits(wantD[i]) {
				t.Fatalf("%s: scale %d = %v, portable %v", p, i, d[i], wantD[i])
			}
		}
	}
}
