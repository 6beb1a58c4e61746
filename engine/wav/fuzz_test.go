package wav

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode: any bytes decode without panic to at most one sample per two
// input bytes, or fail with ErrFormat.
func FuzzDecode(f *testing.F) {
	for _, fm := range []Format{S16, F32} {
		var buf bytes.Buffer
		Encode(&buf, []float32{0, 0.5, -1, 1}, 24000, fm)
		f.Add(buf.Bytes())
	}
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVEdata\xff\xff\xff\xff\x01\x02"))
	f.Add([]byte("RIFF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pcm, info, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		if len(pcm) > len(b)/2 {
			t.Fatalf("%d samples from %d bytes", len(pcm), len(b))
		}
		if info.Channels < 1 {
			t.Fatalf("accepted %d channels", info.Channels)
		}
	})
}
