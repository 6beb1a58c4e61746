package qkernels

import "golang.org/x/sys/cpu"

// cpuHas reports whether the CPU and OS run path p (x/sys/cpu checks the
// OS saves the wide registers, not only the CPUID bits).
func cpuHas(p Path) bool {
	x := cpu.X86
	avx2 := x.HasAVX2 && x.HasFMA
	avx512 := avx2 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL
	switch p {
	case Portable:
		return true
	case AVX2:
		return avx2
	case AVX512:
		return avx512
	case AVX512VNNI:
		return avx512 && x.HasAVX512VNNI
	}
	return false
}
