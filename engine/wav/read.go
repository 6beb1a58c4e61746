package wav

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
)

// Info describes a decoded file.
type Info struct {
	Format     Format
	SampleRate int
	Channels   int
}

// streamedData is the smallest data size taken as "until the end of the
// stream": writers that cannot seek put the largest size that fits (this
// package's NewWriter writes maxSamples; others 0xFFFFFFFF).
const streamedData = math.MaxUint32 - 64

// ErrFormat is wrapped when a file is not a WAV this package understands.
var ErrFormat = errors.New("wav: unsupported or corrupt file")

// Decode parses a mono or multi-channel 16-bit PCM or 32-bit float WAV and
// returns the interleaved samples as float32 (PCM divided by 32767, the
// inverse of the writer's scaling).
func Decode(b []byte) ([]float32, Info, error) {
	var info Info
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, info, fmt.Errorf("%w: no RIFF/WAVE header", ErrFormat)
	}
	le := binary.LittleEndian
	haveFmt := false
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(le.Uint32(b[off+4:]))
		body := off + 8
		if id == "data" && body+size > len(b) && size >= streamedData {
			size = len(b) - body // a streamed file: the data runs to the end
		}
		if size < 0 || body+size > len(b) {
			return nil, info, fmt.Errorf("%w: chunk %q overruns the file", ErrFormat, id)
		}
		switch id {
		case "fmt ":
			if size < 16 {
				return nil, info, fmt.Errorf("%w: fmt chunk of %d bytes", ErrFormat, size)
			}
			tag, ch := le.Uint16(b[body:]), int(le.Uint16(b[body+2:]))
			info.SampleRate, info.Channels = int(le.Uint32(b[body+4:])), ch
			bits := le.Uint16(b[body+14:])
			switch {
			case tag == tagPCM && bits == 16:
				info.Format = S16
			case tag == tagFloat && bits == 32:
				info.Format = F32
			default:
				return nil, info, fmt.Errorf("%w: format tag %d with %d bits", ErrFormat, tag, bits)
			}
			if ch < 1 {
				return nil, info, fmt.Errorf("%w: %d channels", ErrFormat, ch)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, info, fmt.Errorf("%w: data before fmt", ErrFormat)
			}
			bps := info.Format.bytesPerSample()
			data := b[body : body+size-size%bps]
			out := make([]float32, len(data)/bps)
			for i := range out {
				if info.Format == F32 {
					out[i] = math.Float32frombits(le.Uint32(data[4*i:]))
				} else {
					out[i] = float32(int16(le.Uint16(data[2*i:]))) / 32767
				}
			}
			return out, info, nil
		}
		off = body + size + size&1 // chunks are word aligned
	}
	return nil, info, fmt.Errorf("%w: no data chunk", ErrFormat)
}

// ReadFile decodes a WAV file.
func ReadFile(path string) ([]float32, Info, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, Info{}, fmt.Errorf("wav: %w", err)
	}
	s, info, err := Decode(b)
	if err != nil {
		return nil, info, fmt.Errorf("%s: %w", path, err)
	}
	return s, info, nil
}
