//go:build noblas

package linalg

// New returns the pure-Go kernels in builds without OpenBLAS
// (go build -tags noblas); threads is their goroutine count (0 = GOMAXPROCS).
func New(threads int) Kernels { return NewGo(threads) }
