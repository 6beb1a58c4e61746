package audioenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"talkbox/engine/wav"
)

const rate = 24000

// TestMain quiets github.com/mewkiz/flac's decoder, which logs a note through
// the standard logger for every frame at a rate its own tests lack (24 kHz).
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// tone is a 440 Hz sine at amplitude 0.5 with a little noise, long enough
// for several FLAC blocks and Opus frames and not a multiple of either.
func tone(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(0.5*math.Sin(2*math.Pi*440*float64(i)/rate) + 0.01*(r.Float64()-0.5))
	}
	return s
}

// encode writes in in uneven chunks (as the engine streams them) and checks
// that bytes appear before Close, i.e. the encoder streams.
func encode(t *testing.T, w io.Writer, f Format, in []float32) (before int) {
	t.Helper()
	enc, err := New(w, f, rate)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := 0, 0; i < len(in); i += n {
		n = min([]int{1920, 3840, 7, 1000}[i%4], len(in)-i)
		if err := enc.Write(in[i : i+n]); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := w.(interface{ Len() int }); ok {
		before = c.Len()
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Write(in[:1]); !errors.Is(err, ErrClosed) {
		t.Errorf("%v: write after close: %v", f, err)
	}
	return before
}

// TestLosslessRoundTrip: WAV, PCM and FLAC give back exactly the 16-bit
// values of wav.ToS16, with the right length and rate, streamed to a writer
// that cannot seek and to a file (headers fixed up).
func TestLosslessRoundTrip(t *testing.T) {
	in := tone(rate*2 + 333)
	for _, f := range []Format{WAV, PCM, FLAC} {
		var buf bytes.Buffer
		if before := encode(t, &buf, f, in); before < len(in) { // FLAC: whole blocks went out before Close
			t.Errorf("%v: only %d bytes before Close", f, before)
		}
		path := filepath.Join(t.TempDir(), "x"+f.Ext())
		file, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		encode(t, file, f, in)
		file.Close()
		fileBytes, _ := os.ReadFile(path)
		for what, b := range map[string][]byte{"stream": buf.Bytes(), "file": fileBytes} {
			d, err := Decode(b, f)
			if err != nil {
				t.Fatalf("%v %s: %v", f, what, err)
			}
			wantRate := rate
			if f == PCM {
				wantRate = 0
			}
			if d.SampleRate != wantRate || len(d.Exact16) != len(in) {
				t.Fatalf("%v %s: rate %d, %d samples; want %d, %d", f, what, d.SampleRate, len(d.Exact16), wantRate, len(in))
			}
			for i, x := range in {
				if d.Exact16[i] != wav.ToS16(x) {
					t.Fatalf("%v %s: sample %d = %d, want %d", f, what, i, d.Exact16[i], wav.ToS16(x))
				}
			}
		}
	}
}

// TestFLACHeaderFixedOnSeekableOutput: on a file STREAMINFO gets the total
// sample count (so players show the duration); on a stream it says unknown (0).
func TestFLACHeaderFixedOnSeekableOutput(t *testing.T) {
	in := tone(5000)
	path := filepath.Join(t.TempDir(), "a.flac")
	file, _ := os.Create(path)
	file.Write([]byte("xx")) // the stream need not start at offset 0
	encode(t, file, FLAC, in)
	file.Write([]byte("yy")) // Close left the file positioned at the end
	file.Close()
	b, _ := os.ReadFile(path)
	if string(b[len(b)-2:]) != "yy" {
		t.Fatal("FLAC Close did not leave the file at its end")
	}
	total := func(b []byte) uint64 { // STREAMINFO: 36 bits of total samples at byte 8+13
		return binary.BigEndian.Uint64(b[4+4+10:]) & (1<<36 - 1)
	}
	if got := total(b[2:]); got != uint64(len(in)) {
		t.Errorf("file STREAMINFO total = %d, want %d", got, len(in))
	}
	var buf bytes.Buffer
	encode(t, &buf, FLAC, in)
	if got := total(buf.Bytes()); got != 0 {
		t.Errorf("stream STREAMINFO total = %d, want 0 (unknown)", got)
	}
}

// TestOpusRoundTrip: libopusfile reads back exactly the number of samples
// written (at 48 kHz, twice the 24 kHz input), the header keeps 24 kHz, the
// tone is at 440 Hz and the waveform matches the input within an SNR bound.
func TestOpusRoundTrip(t *testing.T) {
	needOpus(t)
	in := tone(rate*2 + 333)
	var buf bytes.Buffer
	before := encode(t, &buf, Opus, in)
	if before < 2000 {
		t.Errorf("only %d bytes before Close: not streaming", before)
	}
	d, err := Decode(buf.Bytes(), Opus)
	if err != nil {
		t.Fatal(err)
	}
	if d.SampleRate != 48000 || d.SourceRate != rate || len(d.PCM) != 2*len(in) {
		t.Fatalf("rate %d (source %d), %d samples; want 48000 (24000), %d", d.SampleRate, d.SourceRate, len(d.PCM), 2*len(in))
	}
	// Compare at 24 kHz by taking every other decoded sample; skip the first
	// 20 ms, where the codec settles.
	var sig, noise float64
	for i := rate / 50; i < len(in); i++ {
		e := float64(d.PCM[2*i]) - float64(in[i])
		sig += float64(in[i]) * float64(in[i])
		noise += e * e
	}
	snr := 10 * math.Log10(sig/noise)
	if snr < 15 {
		t.Errorf("SNR %.1f dB, want >= 15", snr)
	}
	if f := peakHz(d.PCM, 48000); math.Abs(f-440) > 5 {
		t.Errorf("decoded tone at %.1f Hz, want 440", f)
	}
	t.Logf("opus: %d bytes for %.2f s, SNR %.1f dB", buf.Len(), float64(len(in))/rate, snr)
}

// needOpus skips a test in a noopus build.
func needOpus(t *testing.T) {
	t.Helper()
	if _, err := New(io.Discard, Opus, rate); errors.Is(err, ErrNoOpus) {
		t.Skip(err)
	}
}

func TestOpusRates(t *testing.T) {
	needOpus(t)
	if _, err := New(io.Discard, Opus, 22050); err == nil {
		t.Error("Opus at 22050 Hz accepted")
	}
	var buf bytes.Buffer
	enc, err := New(&buf, Opus, 16000)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(tone(1000))
	enc.Close()
	d, err := Decode(buf.Bytes(), Opus)
	if err != nil || d.SourceRate != 16000 || len(d.PCM) != 3000 {
		t.Errorf("16 kHz: %v, source rate %d, %d samples at 48 kHz (want 3000)", err, d.SourceRate, len(d.PCM))
	}
}

// peakHz finds the strongest frequency in 300..600 Hz by a 1 Hz scan of the
// Goertzel power.
func peakHz(s []float32, sr int) float64 {
	best, bestP := 0.0, -1.0
	for f := 300.0; f <= 600; f++ {
		w := 2 * math.Pi * f / float64(sr)
		c := 2 * math.Cos(w)
		var s1, s2 float64
		for _, x := range s {
			s0 := float64(x) + c*s1 - s2
			s2, s1 = s1, s0
		}
		if p := s1*s1 + s2*s2 - c*s1*s2; p > bestP {
			best, bestP = f, p
		}
	}
	return best
}

func TestEmptyStreams(t *testing.T) {
	for _, f := range []Format{WAV, PCM, FLAC, Opus} {
		var buf bytes.Buffer
		enc, err := New(&buf, f, rate)
		if errors.Is(err, ErrNoOpus) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		d, err := Decode(buf.Bytes(), f)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		if len(d.PCM) != 0 {
			t.Errorf("%v: %d samples from an empty stream", f, len(d.PCM))
		}
	}
}

func TestFormats(t *testing.T) {
	for _, name := range Formats() {
		f, err := ParseFormat(name)
		if err != nil || f.String() != name {
			t.Errorf("%q: %v %v", name, f, err)
		}
		g, err := FormatFromPath("/tmp/x" + f.Ext())
		if err != nil || g != f || f.ContentType() == "" {
			t.Errorf("%v: ext %q gave %v %v", f, f.Ext(), g, err)
		}
	}
	if f, err := ParseFormat(" FLAC "); err != nil || f != FLAC {
		t.Errorf("case/space: %v %v", f, err)
	}
	if f, err := FormatFromPath("a/B.OGG"); err != nil || f != Opus {
		t.Errorf(".OGG: %v %v", f, err)
	}
	for _, bad := range []string{"mp3", "", "aac"} {
		if _, err := ParseFormat(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := FormatFromPath("x.mp3"); err == nil {
		t.Error(".mp3 accepted")
	}
	if _, err := New(io.Discard, WAV, 0); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := New(io.Discard, Format(99), rate); err == nil {
		t.Error("unknown format accepted")
	}
	if _, err := Decode([]byte("garbage"), Opus); err == nil { // also in a noopus build
		t.Error("garbage decoded as Opus")
	}
	if _, err := Decode([]byte("garbage"), FLAC); err == nil {
		t.Error("garbage decoded as FLAC")
	}
}

// failWriter fails after n bytes: encoders report the error and keep it.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n < len(p) {
		return 0, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteErrorsSurface(t *testing.T) {
	in := tone(rate)
	for _, f := range []Format{WAV, PCM, FLAC, Opus} {
		enc, err := New(&failWriter{n: 1000}, f, rate)
		if errors.Is(err, ErrNoOpus) {
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		var werr error
		for i := 0; i < len(in) && werr == nil; i += 1920 {
			werr = enc.Write(in[i:min(i+1920, len(in))])
		}
		cerr := enc.Close()
		if werr == nil && cerr == nil {
			t.Errorf("%v: a failing writer went unnoticed", f)
		}
	}
}
