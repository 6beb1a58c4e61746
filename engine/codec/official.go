package codec

import (
	"errors"
	"fmt"

	"talkbox/engine/backend"
)

// The official decode (Qwen3TTSTokenizerV2Model.decode) runs chunked_decode
// with these settings.
const (
	OfficialChunkSize   = 300
	OfficialLeftContext = 25
)

// ErrNoFrames is returned when there is nothing to decode.
var ErrNoFrames = errors.New("codec: no frames to decode")

// DecodeOfficial reproduces the official decode with 300-frame chunks and 25
// frames of left context.
func (d *Decoder) DecodeOfficial(frames []backend.Codes) ([]float32, error) {
	return d.DecodeChunked(frames, OfficialChunkSize, OfficialLeftContext)
}

// DecodeChunked is the official chunked_decode: chunk starts s = 0, chunk,
// 2·chunk, …; each chunk is a fresh forward (zero history, RoPE from 0) over
// frames [s-ctx, min(s+chunk, T)) with ctx = leftContext when
// s-leftContext > 0 and ctx = s otherwise, and the first ctx frames of its
// audio are dropped.
func (d *Decoder) DecodeChunked(frames []backend.Codes, chunk, leftContext int) ([]float32, error) {
	if len(frames) == 0 {
		return nil, ErrNoFrames
	}
	if chunk < 1 || leftContext < 0 {
		return nil, fmt.Errorf("codec: chunk size %d and left context %d: want chunk ≥ 1, context ≥ 0", chunk, leftContext)
	}
	if err := d.CheckCodes(frames); err != nil {
		return nil, err
	}
	out := make([]float32, 0, len(frames)*d.spf)
	for s := 0; s < len(frames); s += chunk {
		end := min(s+chunk, len(frames))
		ctx := s
		if s-leftContext > 0 {
			ctx = leftContext
		}
		st := d.newStream()
		wav, err := st.Push(frames[s-ctx : end])
		if err != nil {
			return nil, err
		}
		out = append(out, wav[ctx*d.spf:]...)
	}
	return out, nil
}

// DecodeFull is one decoder pass over all frames (no chunking): the result a
// Stream gives for the same frames.
func (d *Decoder) DecodeFull(frames []backend.Codes) ([]float32, error) {
	if len(frames) == 0 {
		return nil, ErrNoFrames
	}
	return d.newStream().Push(frames)
}

// ReferenceCut is how many leading samples the official voice-clone path
// drops after decoding concat(ref_code, generated): int(refLen/totalLen·n),
// evaluated in float64 in that order. It is refLen·SamplesPerFrame except for
// some lengths, where rounding makes it one less.
func ReferenceCut(refFrames, totalFrames, samples int) int {
	if totalFrames <= 0 {
		return 0
	}
	return int(float64(refFrames) / float64(totalFrames) * float64(samples))
}
