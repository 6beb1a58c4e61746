//go:build !amd64

package codec

const useAVX = false

func dot2x4AVX(a0, a1, w0, w1, w2, w3 *float32, n int, out *[8]float32) {
	panic("codec: AVX kernel called on a non-amd64 build")
}

func dot1AVX(a, b *float32, n int) float32 { panic("codec: AVX kernel called on a non-amd64 build") }
