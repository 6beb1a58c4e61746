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
	// Format is S16 or F32 when the file is in one of the writer's own
	// formats; Bits and Float describe every file.
	Format     Format
	SampleRate int
	Channels   int
	Bits       int  // bits per stored sample: 8, 16, 24, 32 or 64
	Float      bool // IEEE float samples (32 or 64 bits)
	Frames     int  // samples per channel
}

// Describe is a short human description, e.g. "WAV PCM 24-bit, stereo, 44100 Hz".
func (i Info) Describe() string {
	kind := fmt.Sprintf("PCM %d-bit", i.Bits)
	if i.Float {
		kind = fmt.Sprintf("float %d-bit", i.Bits)
	}
	ch := "mono"
	if i.Channels == 2 {
		ch = "stereo"
	} else if i.Channels > 2 {
		ch = fmt.Sprintf("%d channels", i.Channels)
	}
	return fmt.Sprintf("WAV %s, %s, %d Hz", kind, ch, i.SampleRate)
}

// streamedData is the smallest data size taken as "until the end of the
// stream": writers that cannot seek put the largest size that fits (this
// package's NewWriter writes maxSamples; others 0xFFFFFFFF).
const streamedData = math.MaxUint32 - 64

// ErrFormat is wrapped when a file is not a WAV this package understands.
var ErrFormat = errors.New("wav: unsupported or corrupt file")

// ErrTruncated is wrapped when a WAV file ends before its data chunk does;
// it wraps ErrFormat.
var ErrTruncated = fmt.Errorf("%w: the file is truncated", ErrFormat)

const tagExtensible = 0xFFFE

// Decode parses a RIFF/WAVE file and returns the interleaved samples as
// float32: PCM 8-bit (unsigned), 16, 24 and 32-bit, IEEE float 32 and 64-bit,
// plain or WAVE_FORMAT_EXTENSIBLE, any rate and channel count. Integer PCM is
// scaled by 2^(bits-1) (int16/32768, int24/2^23, as libsndfile and so the
// official loader read it); float samples are taken as stored. Chunks other
// than "fmt " and "data" (fact, PEAK, LIST, ...) are skipped.
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
		if id == "data" && haveFmt && body+size > len(b) {
			return nil, info, fmt.Errorf("%w: the data chunk promises %d bytes, the file holds %d", ErrTruncated, size, len(b)-body)
		}
		if size < 0 || body+size > len(b) {
			return nil, info, fmt.Errorf("%w: chunk %q overruns the file", ErrFormat, id)
		}
		switch id {
		case "fmt ":
			if err := parseFmt(b[body:body+size], &info); err != nil {
				return nil, info, err
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, info, fmt.Errorf("%w: data before fmt", ErrFormat)
			}
			return decodeData(b[body:body+size], &info), info, nil
		}
		off = body + size + size&1 // chunks are word aligned
	}
	if haveFmt {
		return nil, info, fmt.Errorf("%w: no data chunk", ErrTruncated)
	}
	return nil, info, fmt.Errorf("%w: no data chunk", ErrFormat)
}

func parseFmt(f []byte, info *Info) error {
	le := binary.LittleEndian
	if len(f) < 16 {
		return fmt.Errorf("%w: fmt chunk of %d bytes", ErrFormat, len(f))
	}
	tag, ch := le.Uint16(f), int(le.Uint16(f[2:]))
	info.SampleRate, info.Channels = int(le.Uint32(f[4:])), ch
	bits := int(le.Uint16(f[14:]))
	if tag == tagExtensible {
		// cbSize(2) validBits(2) channelMask(4) then the sub-format GUID,
		// whose first two bytes are the plain format tag.
		if len(f) < 40 {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE fmt chunk of %d bytes", ErrFormat, len(f))
		}
		tag = le.Uint16(f[24:])
	}
	switch {
	case tag == tagPCM && (bits == 8 || bits == 16 || bits == 24 || bits == 32):
	case tag == tagFloat && (bits == 32 || bits == 64):
		info.Float = true
	default:
		return fmt.Errorf("%w: format tag %d with %d bits (want PCM 8/16/24/32-bit or float 32/64-bit)", ErrFormat, tag, bits)
	}
	if ch < 1 || ch > 64 {
		return fmt.Errorf("%w: %d channels", ErrFormat, ch)
	}
	if info.SampleRate <= 0 {
		return fmt.Errorf("%w: sample rate %d", ErrFormat, info.SampleRate)
	}
	info.Bits = bits
	info.Format = -1
	if !info.Float && bits == 16 {
		info.Format = S16
	} else if info.Float && bits == 32 {
		info.Format = F32
	}
	return nil
}

// decodeData converts whole frames; a trailing partial frame is dropped.
func decodeData(data []byte, info *Info) []float32 {
	le := binary.LittleEndian
	bps := info.Bits / 8
	info.Frames = len(data) / (bps * info.Channels)
	out := make([]float32, info.Frames*info.Channels)
	for i := range out {
		p := data[i*bps:]
		switch {
		case info.Float && bps == 4:
			out[i] = math.Float32frombits(le.Uint32(p))
		case info.Float:
			out[i] = float32(math.Float64frombits(le.Uint64(p)))
		case bps == 1:
			out[i] = float32(int(p[0])-128) / 128
		case bps == 2:
			out[i] = float32(int16(le.Uint16(p))) / 32768
		case bps == 3:
			v := int32(uint32(p[0])<<8|uint32(p[1])<<16|uint32(p[2])<<24) >> 8
			out[i] = float32(v) / (1 << 23)
		default:
			out[i] = float32(float64(int32(le.Uint32(p))) / (1 << 31))
		}
	}
	return out
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
