package codec

import "golang.org/x/sys/cpu"

// useAVX selects the AVX2+FMA kernels of dot_amd64.s; without them the
// portable Go loops run (same results up to float rounding order).
var useAVX = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dot2x4AVX(a0, a1, w0, w1, w2, w3 *float32, n int, out *[8]float32)

//go:noescape
func dot1AVX(a, b *float32, n int) float32
