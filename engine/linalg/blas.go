//go:build !noblas

package linalg

/*
#cgo LDFLAGS: -lopenblas
// Prototypes written out instead of including cblas.h: Debian installs the
// header under a variant-specific directory. Enum arguments are plain ints in
// the C ABI (CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112).
void cblas_sgemv(int order, int trans, int m, int n, float alpha, const float *a, int lda,
                 const float *x, int incx, float beta, float *y, int incy);
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void openblas_set_num_threads(int n);
*/
import "C"

const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// blasKernels calls OpenBLAS: measured on the 2-core dev box it streams f32
// weights about 4x faster than the Go loops (docs/design/platform.md and the
// bench verb), which is what decode is bound by.
type blasKernels struct{}

// New returns the default kernels: OpenBLAS. OpenBLAS's thread count is
// process-wide: threads > 0 sets it (the last caller wins), threads <= 0
// leaves it as it is, so a small user (the prompt builder) does not undo the
// engine's choice.
func New(threads int) Kernels {
	if threads > 0 {
		C.openblas_set_num_threads(C.int(threads))
	}
	return blasKernels{}
}

func (blasKernels) Name() string { return "openblas" }

// fillBias puts b[:w] in each of the n rows of y (width w), so that BLAS adds
// the product onto it with beta = 1. It reports whether there was a bias.
func fillBias(b, y []float32, n, w int) bool {
	if b == nil {
		return false
	}
	b = b[:w]
	for i := 0; i < n; i++ {
		copy(y[i*w:(i+1)*w], b)
	}
	return true
}

func (blasKernels) MatVec(m *Matrix, b, x, y []float32) {
	if m.Rows == 0 {
		return
	}
	y = y[:m.Rows]
	if m.Cols == 0 {
		for r := range y {
			y[r] = biasAt(b, r)
		}
		return
	}
	_ = x[m.Cols-1]
	_ = m.W[m.Rows*m.Cols-1]
	var beta C.float
	if fillBias(b, y, 1, m.Rows) {
		beta = 1
	}
	C.cblas_sgemv(cblasRowMajor, cblasNoTrans, C.int(m.Rows), C.int(m.Cols), 1,
		(*C.float)(&m.W[0]), C.int(m.Cols), (*C.float)(&x[0]), 1, beta, (*C.float)(&y[0]), 1)
}

func (k blasKernels) MatMul(m *Matrix, b, x []float32, n int, y []float32) {
	if n == 1 {
		k.MatVec(m, b, x, y)
		return
	}
	if n <= 0 || m.Rows == 0 {
		return
	}
	y = y[:n*m.Rows]
	if m.Cols == 0 {
		for i := range y {
			y[i] = biasAt(b, i%m.Rows)
		}
		return
	}
	_ = x[n*m.Cols-1]
	_ = m.W[m.Rows*m.Cols-1]
	var beta C.float
	if fillBias(b, y, n, m.Rows) {
		beta = 1
	}
	C.cblas_sgemm(cblasRowMajor, cblasNoTrans, cblasTrans, C.int(n), C.int(m.Rows), C.int(m.Cols), 1,
		(*C.float)(&x[0]), C.int(m.Cols), (*C.float)(&m.W[0]), C.int(m.Cols), beta, (*C.float)(&y[0]), C.int(m.Rows))
}
