//go:build noblas

package linalg

// New returns the pure-Go kernels in builds without OpenBLAS
// (go build -tags noblas); threads is their goroutine count (0 = every core
// engine/cores computes on).
func New(threads int) Kernels { return NewGo(threads) }
