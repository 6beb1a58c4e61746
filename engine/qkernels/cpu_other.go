//go:build !amd64

package qkernels

// cpuHas: only the portable kernels are compiled off x86-64.
func cpuHas(p Path) bool { return p == Portable }
