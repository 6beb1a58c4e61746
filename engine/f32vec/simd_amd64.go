package f32vec

import "golang.org/x/sys/cpu"

// useAVX selects simd_amd64.s for Dot and AddScaled: the same results as
// the Go loops, bit for bit, 2-4x faster (the attention of the CPU LM is
// made of them).
var useAVX = cpu.X86.HasAVX

//go:noescape
func dotLanesAVX(a, b *float32, n int, lanes *[8]float32)

//go:noescape
func addScaledAVX(dst, src *float32, n int, w float32)
