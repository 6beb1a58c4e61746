package speaker

import "math"

// The speaker encoder's mel front end (qwen3-tts-codec.md §6): 24 kHz input,
// n_fft = window = 1024, hop 256, 128 Slaney mel bands over 0-12 kHz.
const (
	melFFT  = 1024
	melHop  = 256
	melBins = melFFT/2 + 1
	NumMels = 128
	melRate = 24000
	melFMax = 12000
)

// Slaney mel scale (librosa's default, htk=False): linear below 1 kHz at
// 200/3 Hz per mel, logarithmic above with ln(6.4)/27 per mel.
const (
	slaneyFSp     = 200.0 / 3
	slaneyMinLog  = 1000.0
	slaneyMinMel  = slaneyMinLog / slaneyFSp // 15
	slaneyLogStep = 0.06875177742094912      // ln(6.4)/27
)

func hzToMel(f float64) float64 {
	if f >= slaneyMinLog {
		return slaneyMinMel + math.Log(f/slaneyMinLog)/slaneyLogStep
	}
	return f / slaneyFSp
}

func melToHz(m float64) float64 {
	if m >= slaneyMinMel {
		return slaneyMinLog * math.Exp(slaneyLogStep*(m-slaneyMinMel))
	}
	return slaneyFSp * m
}

// linspace is numpy's: start + i·step, the last point exactly stop.
func linspace(start, stop float64, n int) []float64 {
	out := make([]float64, n)
	step := (stop - start) / float64(n-1)
	for i := range out {
		out[i] = start + float64(i)*step
	}
	out[n-1] = stop
	return out
}

// MelFilterbank is librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128,
// fmin=0, fmax=12000): triangular filters between band edges equally spaced
// in Slaney mel, area-normalised by 2/(f[i+2]-f[i]). Computed in float64 and
// rounded once, as librosa returns float32. Shape [128][513], row-major.
func MelFilterbank() []float32 {
	mels := linspace(hzToMel(0), hzToMel(melFMax), NumMels+2)
	f := make([]float64, len(mels))
	for i, m := range mels {
		f[i] = melToHz(m)
	}
	fft := linspace(0, melRate/2, melBins)
	fb := make([]float32, NumMels*melBins)
	for i := 0; i < NumMels; i++ {
		lowW, upW := f[i+1]-f[i], f[i+2]-f[i+1]
		norm := 2 / (f[i+2] - f[i])
		for k, fk := range fft {
			lower := -(f[i] - fk) / lowW
			upper := (f[i+2] - fk) / upW
			w := math.Max(0, math.Min(lower, upper))
			fb[i*melBins+k] = float32(w * norm)
		}
	}
	return fb
}

// Mel computes the log-mel spectrogram of 24 kHz audio: reflect-pad by
// (n_fft-hop)/2 = 384 on each side, frames of 1024 every 256 samples
// (center=False), periodic Hann window, magnitude sqrt(re²+im²+1e-9), the
// filterbank, then log(max(x, 1e-5)). Returns [T][128] time-major with
// T = 1 + (n-256)/256 (0 when the audio is shorter than one hop).
func Mel(x []float32, fb []float32) ([]float32, int) {
	pad := (melFFT - melHop) / 2
	n := len(x)
	if n <= pad { // reflect padding needs more samples than it mirrors
		return nil, 0
	}
	padded := make([]float64, n+2*pad)
	for i := range padded {
		j := i - pad
		if j < 0 {
			j = -j
		} else if j >= n {
			j = 2*(n-1) - j
		}
		padded[i] = float64(x[j])
	}
	T := 1 + (len(padded)-melFFT)/melHop
	if T <= 0 {
		return nil, 0
	}
	win := make([]float64, melFFT)
	for i := range win {
		win[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/melFFT)
	}
	out := make([]float32, T*NumMels)
	parallel(T, func(t0, t1 int) {
		buf := make([]complex128, melFFT)
		mag := make([]float64, melBins)
		for t := t0; t < t1; t++ {
			seg := padded[t*melHop:]
			for i := range buf {
				buf[i] = complex(seg[i]*win[i], 0)
			}
			fft(buf)
			for k := range mag {
				re, im := real(buf[k]), imag(buf[k])
				mag[k] = math.Sqrt(re*re + im*im + 1e-9)
			}
			for m := 0; m < NumMels; m++ {
				row := fb[m*melBins : (m+1)*melBins]
				var s float64
				for k, w := range row {
					if w != 0 {
						s += float64(w) * mag[k]
					}
				}
				out[t*NumMels+m] = float32(math.Log(math.Max(s, 1e-5)))
			}
		}
	})
	return out, T
}

// melTwiddles are exp(-2πik/1024) for k < 512, each evaluated directly so
// every one is accurate to an ulp.
var melTwiddles = func() []complex128 {
	tw := make([]complex128, melFFT/2)
	for k := range tw {
		ang := -2 * math.Pi * float64(k) / melFFT
		tw[k] = complex(math.Cos(ang), math.Sin(ang))
	}
	return tw
}()

// fft is an in-place iterative radix-2 FFT of length melFFT.
func fft(a []complex128) {
	n := len(a)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			a[i], a[j] = a[j], a[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		half, stride := size/2, n/size
		for start := 0; start < n; start += size {
			for k := 0; k < half; k++ {
				u := a[start+k]
				v := a[start+k+half] * melTwiddles[k*stride]
				a[start+k] = u + v
				a[start+k+half] = u - v
			}
		}
	}
}
