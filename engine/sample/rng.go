package sample

// The sampler's randomness is counter-based: every draw is a pure function of
// (seed, frame, group), so a run can be repeated exactly, a draw does not
// depend on how many draws came before it, and the CUDA sampler can compute
// the same uniform number in any thread without sharing RNG state.
//
// Definition (the CUDA sampler must implement exactly this):
//
//	mix(z)  = splitmix64 finaliser of z + 0x9E3779B97F4A7C15
//	key     = mix(seed)
//	counter = frame<<8 | group              (group < 256)
//	bits    = mix(key XOR counter)
//	u       = (bits >> 11) * 2^-53          (uniform in [0, 1))

// mix is splitmix64's step: a bijection on uint64 with good avalanche.
func mix(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Uniform returns the uniform number in [0, 1) for one draw.
func Uniform(seed uint64, frame int, group int) float64 {
	counter := uint64(frame)<<8 | uint64(group&0xFF)
	bits := mix(mix(seed) ^ counter)
	return float64(bits>>11) * (1.0 / (1 << 53))
}
