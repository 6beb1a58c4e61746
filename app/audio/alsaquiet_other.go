//go:build !linux

package audio

// quietALSA: only Linux has ALSA.
func quietALSA() {}
