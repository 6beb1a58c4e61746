package audioenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/mewkiz/flac"

	"talkbox/engine/wav"
)

// Decoded is audio read back by Decode.
type Decoded struct {
	PCM []float32 // mono samples; 16-bit formats give s/32767, the inverse of wav.ToS16
	// SampleRate is the rate of PCM: the stream's own, except Opus, which
	// always decodes at 48 kHz. 0 for raw PCM, which does not say.
	SampleRate int
	// SourceRate is the rate the encoder was given (Opus keeps it in its
	// header); equal to SampleRate for the other formats.
	SourceRate int
	// Exact16 holds the 16-bit sample values (WAV, PCM and FLAC), so a check
	// can compare them bit for bit; nil for Opus.
	Exact16 []int16
}

// Decode reads a whole stream of format f back, for checks and tests: WAV
// through engine/wav, FLAC through github.com/mewkiz/flac, Opus through
// libopusfile. (mewkiz/flac's decoder prints a note through the standard
// logger for every 24 kHz frame; tests silence it with log.SetOutput.)
func Decode(b []byte, f Format) (Decoded, error) {
	switch f {
	case WAV:
		s, info, err := wav.Decode(b)
		if err != nil {
			return Decoded{}, err
		}
		if info.Channels != 1 || info.Format != wav.S16 {
			return Decoded{}, fmt.Errorf("audioenc: wav: %d channels, %v, want mono s16", info.Channels, info.Format)
		}
		return Decoded{PCM: s, SampleRate: info.SampleRate, SourceRate: info.SampleRate, Exact16: to16(s)}, nil
	case PCM:
		if len(b)%2 != 0 {
			return Decoded{}, fmt.Errorf("audioenc: pcm: %d bytes is not whole 16-bit samples", len(b))
		}
		v := make([]int16, len(b)/2)
		for i := range v {
			v[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return Decoded{PCM: from16(v), Exact16: v}, nil
	case FLAC:
		return decodeFLAC(b)
	case Opus:
		return decodeOpus(b)
	}
	return Decoded{}, fmt.Errorf("audioenc: unknown format %d", int(f))
}

func decodeFLAC(b []byte) (Decoded, error) {
	s, err := flac.New(bytes.NewReader(b))
	if err != nil {
		return Decoded{}, fmt.Errorf("audioenc: flac: %w", err)
	}
	defer s.Close()
	if s.Info.NChannels != 1 || s.Info.BitsPerSample != 16 {
		return Decoded{}, fmt.Errorf("audioenc: flac: %d channels, %d bits, want mono 16-bit", s.Info.NChannels, s.Info.BitsPerSample)
	}
	var v []int16
	for {
		fr, err := s.ParseNext()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Decoded{}, fmt.Errorf("audioenc: flac: frame: %w", err)
		}
		for _, x := range fr.Subframes[0].Samples {
			v = append(v, int16(x))
		}
	}
	if n := s.Info.NSamples; n != 0 && n != uint64(len(v)) {
		return Decoded{}, fmt.Errorf("audioenc: flac: STREAMINFO says %d samples, the frames hold %d", n, len(v))
	}
	rate := int(s.Info.SampleRate)
	return Decoded{PCM: from16(v), SampleRate: rate, SourceRate: rate, Exact16: v}, nil
}

// to16 recovers the stored 16-bit values of wav.Decode's samples, which
// are v/32768 exactly.
func to16(s []float32) []int16 {
	v := make([]int16, len(s))
	for i, x := range s {
		v[i] = int16(x * 32768)
	}
	return v
}

func from16(v []int16) []float32 {
	s := make([]float32, len(v))
	for i, x := range v {
		s[i] = float32(x) / 32767
	}
	return s
}
