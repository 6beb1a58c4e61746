//go:build !amd64

package codec

const useAVX = false

func dot1AVX(a, b *float32, n int) float32 { panic("codec: AVX kernel called on a non-amd64 build") }
