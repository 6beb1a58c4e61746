//go:build noblas

package cpu

// newDefaultKernels returns the pure-Go kernels in builds without OpenBLAS
// (go build -tags noblas).
func newDefaultKernels(threads int) kernels { return newGoKernels(threads) }
