//go:build !noblas

package cpu

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

import "runtime"

const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// blasKernels calls OpenBLAS: measured on the 2-core dev box it streams f32
// weights about 4x faster than the Go loops (desktop notes section 7 and the
// bench verb), which is what decode is bound by.
type blasKernels struct{}

// newDefaultKernels returns OpenBLAS kernels. OpenBLAS's thread count is
// process-wide; the last LM created sets it.
func newDefaultKernels(threads int) kernels {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	C.openblas_set_num_threads(C.int(threads))
	return blasKernels{}
}

func (blasKernels) name() string { return "openblas" }

func (blasKernels) matVec(m *matrix, x, y []float32) {
	if m.rows == 0 || m.cols == 0 {
		return
	}
	_ = x[m.cols-1]
	_ = y[m.rows-1]
	C.cblas_sgemv(cblasRowMajor, cblasNoTrans, C.int(m.rows), C.int(m.cols), 1,
		(*C.float)(&m.w[0]), C.int(m.cols), (*C.float)(&x[0]), 1, 0, (*C.float)(&y[0]), 1)
}

func (b blasKernels) matMul(m *matrix, x []float32, n int, y []float32) {
	if n == 1 {
		b.matVec(m, x, y)
		return
	}
	if n == 0 || m.rows == 0 || m.cols == 0 {
		return
	}
	_ = x[n*m.cols-1]
	_ = y[n*m.rows-1]
	C.cblas_sgemm(cblasRowMajor, cblasNoTrans, cblasTrans, C.int(n), C.int(m.rows), C.int(m.cols), 1,
		(*C.float)(&x[0]), C.int(m.cols), (*C.float)(&m.w[0]), C.int(m.cols), 0, (*C.float)(&y[0]), C.int(m.rows))
}
