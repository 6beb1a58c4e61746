//go:build !amd64

package f32vec

var useAVX = false

func dotLanesAVX(a, b *float32, n int, lanes *[8]float32) {
	panic("f32vec: no AVX kernels on this architecture")
}

func addScaledAVX(dst, src *float32, n int, w float32) {
	panic("f32vec: no AVX kernels on this architecture")
}
