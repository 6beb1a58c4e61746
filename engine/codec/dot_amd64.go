package codec

import "golang.org/x/sys/cpu"

// useAVX selects the AVX2+FMA kernel of dot_amd64.s; without it the
// portable Go loop runs (same result up to float rounding order).
var useAVX = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dot1AVX(a, b *float32, n int) float32
