package audioin

import (
	"bytes"
	"errors"
	"testing"

	"talkbox/engine/wav"
)

// FuzzDecode: WAV or FLAC bytes decode without panic to a bounded number of
// samples, or fail with one of the package's errors.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	wav.Encode(&buf, []float32{0, 0.5, -0.5, 0.25}, 24000, wav.S16)
	f.Add(buf.Bytes())
	f.Add([]byte("fLaC\x00\x00\x00\x22"))
	f.Add([]byte("ID3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mono, src, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrNotAudio) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if src.SampleRate <= 0 || src.Channels < 1 {
			t.Fatalf("accepted %+v", src)
		}
		if limit := int(maxDecodedSeconds)*src.SampleRate + 1<<16 + len(b); len(mono) > limit {
			t.Fatalf("%d samples from %d bytes", len(mono), len(b))
		}
	})
}
