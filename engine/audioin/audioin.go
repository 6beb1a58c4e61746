// Package audioin turns a user's recording into the reference audio a voice
// clone needs: it decodes WAV (engine/wav) and FLAC, mixes down to mono,
// resamples to 24 kHz exactly as the official loader does (libsoxr HQ, see
// Resample), and checks that the clip is usable: clear errors for what cannot
// work, notices for what it changed or what may sound bad.
package audioin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/mewkiz/flac"

	"talkbox/engine/wav"
	"talkbox/internal/regfile"
)

// SampleRate is the rate of every clip this package returns (the speech
// tokenizer's and the speaker encoder's input rate).
const SampleRate = 24000

// Limits of a reference clip. Shorter than MinSeconds gives too little of
// the voice to embed; longer than MaxSeconds only costs encoder time and
// prompt positions (each second of ICL reference is 12.5 prefill rows), so it
// is trimmed.
const (
	MinSeconds = 1.0
	MaxSeconds = 30.0
)

// Thresholds of the checks, on the mono signal as decoded.
const (
	// silencePeak: a clip whose loudest sample is below -60 dBFS holds no
	// usable voice.
	silencePeak = 1e-3
	// clipLevel and clipFraction: a warning when more than 0.1% of the
	// samples sit at full scale, the mark of a recording that clipped.
	clipLevel    = 0.999
	clipFraction = 1e-3
)

// Errors a caller (CLI, window) can branch on; each is wrapped with details.
var (
	ErrNotAudio  = errors.New("not an audio file this program reads (WAV or FLAC)")
	ErrTruncated = errors.New("the audio file is truncated")
	ErrEmpty     = errors.New("the audio file holds no samples")
	ErrTooShort  = errors.New("the recording is too short")
	ErrSilent    = errors.New("the recording is silent")
)

// Source describes a decoded file before any processing.
type Source struct {
	Format     string // e.g. "WAV PCM 24-bit, stereo, 44100 Hz"
	SampleRate int
	Channels   int
	Frames     int
}

// Clip is reference audio ready for the encoders.
type Clip struct {
	Samples []float32 // mono, 24 kHz
	Source  Source
	// Notices say what was changed or may be wrong (trimmed to 30 s,
	// clipping); the clip is usable either way.
	Notices []string
}

// Seconds is the clip's duration.
func (c *Clip) Seconds() float64 { return float64(len(c.Samples)) / SampleRate }

// Decode reads a WAV or FLAC file's bytes and returns the mono mix at the
// file's own rate (channels averaged in float32, as librosa's to_mono does).
func Decode(b []byte) ([]float32, Source, error) {
	switch {
	case len(b) == 0:
		return nil, Source{}, fmt.Errorf("%w: the file is empty", ErrEmpty)
	case len(b) >= 4 && string(b[:4]) == "RIFF":
		x, info, err := wav.Decode(b)
		if errors.Is(err, wav.ErrTruncated) {
			return nil, Source{}, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		if err != nil {
			return nil, Source{}, fmt.Errorf("%w: %v", ErrNotAudio, err)
		}
		src := Source{Format: info.Describe(), SampleRate: info.SampleRate, Channels: info.Channels, Frames: info.Frames}
		return downmix(x, info.Channels), src, nil
	case len(b) >= 4 && (string(b[:4]) == "fLaC" || string(b[:3]) == "ID3"):
		return decodeFLAC(b)
	}
	return nil, Source{}, fmt.Errorf("%w: unknown header %q", ErrNotAudio, printable(b[:min(len(b), 4)]))
}

func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		out[i] = c
	}
	return string(out)
}

// decodeFLAC decodes every frame; samples scale by 2^(bits-1) like PCM.
func decodeFLAC(b []byte) ([]float32, Source, error) {
	st, err := flac.New(bytes.NewReader(b))
	if err != nil {
		return nil, Source{}, fmt.Errorf("%w: FLAC: %v", ErrNotAudio, err)
	}
	defer st.Close()
	si := st.Info
	ch, bits := int(si.NChannels), int(si.BitsPerSample)
	if si.SampleRate == 0 || ch < 1 || bits < 4 || bits > 32 {
		return nil, Source{}, fmt.Errorf("%w: FLAC stream info: %d Hz, %d channels, %d bits", ErrNotAudio, si.SampleRate, ch, bits)
	}
	scale := 1 / math.Ldexp(1, bits-1)
	var mono []float32
	for {
		fr, err := st.ParseNext()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, Source{}, fmt.Errorf("%w: FLAC frame %d: %v", ErrTruncated, len(mono), err)
			}
			return nil, Source{}, fmt.Errorf("%w: FLAC frame: %v", ErrNotAudio, err)
		}
		n := int(fr.BlockSize)
		if len(fr.Subframes) < ch {
			return nil, Source{}, fmt.Errorf("%w: FLAC frame %d has %d channels, the stream %d", ErrNotAudio, len(mono), len(fr.Subframes), ch)
		}
		for c := 0; c < ch; c++ {
			if len(fr.Subframes[c].Samples) < n {
				return nil, Source{}, fmt.Errorf("%w: FLAC frame %d is short of samples", ErrNotAudio, len(mono))
			}
		}
		if len(mono)+n > maxDecodedSeconds*int(si.SampleRate) {
			// A few bytes of FLAC can describe hours of constant samples;
			// Prepare keeps MaxSeconds, so decoding further only costs memory.
			break
		}
		for i := 0; i < n; i++ {
			var s float32
			for c := 0; c < ch; c++ {
				s += float32(float64(fr.Subframes[c].Samples[i]) * scale)
			}
			if ch > 1 {
				s /= float32(ch)
			}
			mono = append(mono, s)
		}
	}
	if si.NSamples != 0 && uint64(len(mono)) < si.NSamples {
		return nil, Source{}, fmt.Errorf("%w: %d of the %d samples the header promises", ErrTruncated, len(mono), si.NSamples)
	}
	chName := map[int]string{1: "mono", 2: "stereo"}[ch]
	if chName == "" {
		chName = fmt.Sprintf("%d channels", ch)
	}
	src := Source{Format: fmt.Sprintf("FLAC %d-bit, %s, %d Hz", bits, chName, si.SampleRate),
		SampleRate: int(si.SampleRate), Channels: ch, Frames: len(mono)}
	return mono, src, nil
}

// downmix averages interleaved channels in float32.
func downmix(x []float32, ch int) []float32 {
	if ch == 1 {
		return x
	}
	out := make([]float32, len(x)/ch)
	for i := range out {
		var s float32
		for c := 0; c < ch; c++ {
			s += x[i*ch+c]
		}
		out[i] = s / float32(ch)
	}
	return out
}

// maxDecodedSeconds bounds how much of a FLAC stream is decoded: past
// MaxSeconds (which Prepare keeps) only the notice that it was cut matters.
const maxDecodedSeconds = 2 * MaxSeconds

// MaxFileBytes bounds an audio file LoadFile reads: over ten minutes of
// 48 kHz stereo 32-bit audio; a reference clip is cut to MaxSeconds anyway.
const MaxFileBytes = 256 << 20

// Load decodes, checks and resamples a file's bytes.
func Load(b []byte) (*Clip, error) {
	mono, src, err := Decode(b)
	if err != nil {
		return nil, err
	}
	return Prepare(mono, src)
}

// LoadFile is Load on a file.
func LoadFile(path string) (*Clip, error) {
	// A regular file of bounded size: a FIFO or device must not hang or
	// exhaust memory.
	b, err := regfile.ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	c, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Prepare checks mono samples at src.SampleRate (a decoded file or a
// microphone capture) and resamples them to 24 kHz. More than MaxSeconds is
// cut to its first MaxSeconds, with a notice.
func Prepare(mono []float32, src Source) (*Clip, error) {
	rate := src.SampleRate
	if rate <= 0 {
		return nil, fmt.Errorf("%w: sample rate %d", ErrNotAudio, rate)
	}
	if len(mono) == 0 {
		return nil, fmt.Errorf("%w (%s)", ErrEmpty, src.Format)
	}
	secs := float64(len(mono)) / float64(rate)
	if secs < MinSeconds {
		return nil, fmt.Errorf("%w: %.2f s; record at least %.0f s (3-20 s of speech works best)", ErrTooShort, secs, MinSeconds)
	}
	var notices []string
	if secs > MaxSeconds {
		keep := int(MaxSeconds * float64(rate))
		mono = mono[:keep]
		notices = append(notices, fmt.Sprintf("the recording is %.1f s long; using its first %.0f s (0.0-%.1f s)", secs, MaxSeconds, MaxSeconds))
	}
	peak, clipped := 0.0, 0
	for _, v := range mono {
		a := math.Abs(float64(v))
		peak = math.Max(peak, a)
		if a >= clipLevel {
			clipped++
		}
	}
	if !(peak >= silencePeak) { // also catches NaN
		return nil, fmt.Errorf("%w: its loudest sample is %.1f dBFS", ErrSilent, 20*math.Log10(max(peak, 1e-12)))
	}
	if float64(clipped) > clipFraction*float64(len(mono)) {
		notices = append(notices, fmt.Sprintf("the recording clips (%.2f%% of samples at full scale); a quieter recording will clone better", 100*float64(clipped)/float64(len(mono))))
	}
	out, err := Resample(mono, rate, SampleRate)
	if err != nil {
		return nil, err
	}
	if len(out) > int(MaxSeconds*SampleRate) {
		out = out[:int(MaxSeconds*SampleRate)]
	}
	return &Clip{Samples: out, Source: src, Notices: notices}, nil
}
