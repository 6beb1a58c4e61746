package wav

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestS16HeaderAndValues(t *testing.T) {
	in := []float32{0, 0.5, -0.5, 1, -1, 1.5, -2, float32(math.NaN()), 1.0 / 32767, 0.49 / 32767}
	path := filepath.Join(t.TempDir(), "a.wav")
	if err := WriteFile(path, in, 24000, S16); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) != 44+2*len(in) {
		t.Fatalf("file is %d bytes, want %d", len(b), 44+2*len(in))
	}
	checks := []struct {
		what      string
		got, want uint32
	}{
		{"RIFF size", le.Uint32(b[4:]), uint32(36 + 2*len(in))},
		{"fmt size", le.Uint32(b[16:]), 16},
		{"format tag", uint32(le.Uint16(b[20:])), 1},
		{"channels", uint32(le.Uint16(b[22:])), 1},
		{"rate", le.Uint32(b[24:]), 24000},
		{"byte rate", le.Uint32(b[28:]), 48000},
		{"block align", uint32(le.Uint16(b[32:])), 2},
		{"bits", uint32(le.Uint16(b[34:])), 16},
		{"data size", le.Uint32(b[40:]), uint32(2 * len(in))},
	}
	if string(b[0:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("chunk ids wrong: %q", b[:40])
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}
	want := []int16{0, 16384, -16384, 32767, -32767, 32767, -32767, 0, 1, 0}
	for i, w := range want {
		if got := int16(le.Uint16(b[44+2*i:])); got != w {
			t.Errorf("sample %d (%v) = %d, want %d", i, in[i], got, w)
		}
	}
	s, info, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info != (Info{Format: S16, SampleRate: 24000, Channels: 1, Bits: 16, Frames: len(in)}) || len(s) != len(in) {
		t.Fatalf("read back %+v, %d samples", info, len(s))
	}
	if math.Abs(float64(s[1])-0.5) > 1.0/32768 { // 16384/32768
		t.Errorf("0.5 read back as %v", s[1])
	}
}

func TestF32RoundTripExact(t *testing.T) {
	in := []float32{0, 0.25, -0.999, 1.5, -3, 1e-7}
	var buf bytes.Buffer
	if err := Encode(&buf, in, 24000, F32); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	if le.Uint16(b[20:]) != 3 || le.Uint16(b[34:]) != 32 || le.Uint32(b[28:]) != 96000 {
		t.Errorf("float fmt: tag %d bits %d byte rate %d", le.Uint16(b[20:]), le.Uint16(b[34:]), le.Uint32(b[28:]))
	}
	if string(b[38:42]) != "fact" || le.Uint32(b[46:]) != uint32(len(in)) {
		t.Errorf("fact chunk %q with %d frames", b[38:42], le.Uint32(b[46:]))
	}
	if le.Uint32(b[4:]) != uint32(len(b)-8) || le.Uint32(b[54:]) != uint32(4*len(in)) {
		t.Errorf("sizes: RIFF %d (file %d), data %d", le.Uint32(b[4:]), len(b), le.Uint32(b[54:]))
	}
	s, info, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != F32 || len(s) != len(in) {
		t.Fatalf("read back %+v, %d samples", info, len(s))
	}
	for i := range in {
		if s[i] != in[i] { // float samples are stored unclipped and bit-exact
			t.Errorf("sample %d: %v, want %v", i, s[i], in[i])
		}
	}
}

// TestStreamingWriterMatchesOneShot: several Writes then Close give the same
// bytes as Encode, i.e. Close fixed the header sizes.
func TestStreamingWriterMatchesOneShot(t *testing.T) {
	for _, f := range []Format{S16, F32} {
		in := make([]float32, 5000)
		for i := range in {
			in[i] = float32(math.Sin(float64(i) / 10))
		}
		path := filepath.Join(t.TempDir(), "s.wav")
		w, err := Create(path, 24000, f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(in); i += 1920 {
			if err := w.Write(in[i:min(i+1920, len(in))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(in[:1]); err == nil {
			t.Error("write after close accepted")
		}
		got, _ := os.ReadFile(path)
		var want bytes.Buffer
		if err := Encode(&want, in, 24000, f); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%v: streamed file differs from the one-shot encoding", f)
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, _, err := Decode([]byte("RIFF\x00\x00")); !errors.Is(err, ErrFormat) {
		t.Errorf("truncated: %v", err)
	}
	var buf bytes.Buffer
	Encode(&buf, []float32{0.1}, 24000, S16)
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[40:], 1000) // data chunk claims more than the file has
	if _, _, err := Decode(b); !errors.Is(err, ErrFormat) {
		t.Errorf("overlong data chunk: %v", err)
	}
	if _, err := ParseFormat("s24"); err == nil {
		t.Error("format s24 accepted")
	}
	if err := Encode(&buf, nil, 0, S16); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := Create(filepath.Join(t.TempDir(), "no", "such", "dir.wav"), 24000, S16); err == nil {
		t.Error("create in a missing directory succeeded")
	}
}

// A failed or cancelled write leaves the user's file as it was (the old
// writer truncated it at Create and left a header-only file on Ctrl-C).
func TestAbortKeepsExistingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keep.wav")
	if err := WriteFile(path, []float32{0.5, -0.5}, 24000, S16); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	w, err := Create(path, 24000, S16)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(make([]float32, 1000)); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatalf("file changed by an aborted write: %d -> %d bytes", len(before), len(after))
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("temporary file left: %d entries", len(es))
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after Abort: %v", err)
	}
}

// A WAV streamed to a pipe cannot have its sizes fixed afterwards, so the
// header says "as long as the stream" and the samples follow it.
func TestStreamHeaderOnPipe(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		buf.ReadFrom(r)
		done <- buf.Bytes()
	}()
	w, err := NewWriter(pw, 24000, S16)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]float32{1, -1, 0})
	if err := w.Close(); err != nil {
		t.Fatalf("Close on a pipe: %v", err)
	}
	pw.Close()
	b := <-done
	if len(b) != 44+6 {
		t.Fatalf("%d bytes", len(b))
	}
	if got := binary.LittleEndian.Uint32(b[40:]); got != uint32(maxSamples(S16)*2) {
		t.Errorf("streamed data size %d", got)
	}
	if got := int16(binary.LittleEndian.Uint16(b[44:])); got != 32767 {
		t.Errorf("first sample %d", got)
	}
}

func TestCreateRefusesDirectory(t *testing.T) {
	if _, err := Create(t.TempDir(), 24000, S16); err == nil {
		t.Fatal("directory accepted")
	}
}

// TestDecodeStreamed: a WAV written to a stream that cannot seek (a
// bytes.Buffer; an HTTP response in use) keeps its "until the end" sizes,
// and Decode reads the data to the end of the bytes, dropping a torn last
// sample. 0xFFFFFFFF, what other streaming writers put, reads the same way.
func TestDecodeStreamed(t *testing.T) {
	in := []float32{0.5, -0.25, 0.125, 1}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, 24000, S16)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range in {
		if err := w.Write([]float32{x}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for _, size := range []uint32{binary.LittleEndian.Uint32(b[40:]), math.MaxUint32} {
		binary.LittleEndian.PutUint32(b[40:], size)
		got, info, err := Decode(append(b[:len(b):len(b)], 0x7f))
		if err != nil {
			t.Fatalf("data size %#x: %v", size, err)
		}
		if info.SampleRate != 24000 || len(got) != len(in) {
			t.Fatalf("data size %#x: %+v, %d samples, want %d", size, info, len(got), len(in))
		}
		for i := range in {
			if got[i] != float32(ToS16(in[i]))/32768 { // Decode scales 16-bit PCM by 1/32768
				t.Errorf("sample %d = %v", i, got[i])
			}
		}
	}
}
