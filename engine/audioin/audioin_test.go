package audioin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"talkbox/engine/golden"
	"talkbox/engine/wav"
	"talkbox/internal/regfile"
)

// resampleTol is the bar for the 24 kHz arrays. The golden data set measured
// libsoxr's SIMD engine (what Debian's libsoxr uses on x86_64) bit-identical
// to the official arrays and its scalar engine within 3.3e-7; 1e-6 covers
// both, and is 1.5e4 times below the error of the nearest wrong resampler
// (soxr VHQ, 1.5e-2), so a wrong setting cannot pass.
const resampleTol = 1e-6

// TestGoldenAudioResample decodes every file of the official loader case
// with our reader and resamples it: the decoded arrays must be identical,
// the 24 kHz arrays within resampleTol and of the official length.
func TestGoldenAudioResample(t *testing.T) {
	c := golden.OpenCase(t, "audio_resample")
	for n := 1; n <= 5; n++ {
		p := fmt.Sprintf("in%d", n)
		info, raw, err := c.File.Raw(p + "_file")
		if err != nil || info.DType != "U8" {
			t.Fatalf("%s_file: %v (%v)", p, err, info.DType)
		}
		mono, src, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want := c.F32(p + "_decoded")
		if len(mono) != len(want) {
			t.Fatalf("%s (%s): %d frames, official %d", p, src.Format, len(mono), len(want))
		}
		for i := range mono {
			if mono[i] != want[i] {
				t.Fatalf("%s (%s): decoded sample %d = %v, official %v", p, src.Format, i, mono[i], want[i])
			}
		}
		got, err := Resample(mono, src.SampleRate, SampleRate)
		if err != nil {
			t.Fatal(err)
		}
		want24 := c.F32(p + "_24k")
		if len(got) != len(want24) {
			t.Fatalf("%s: %d samples at 24 kHz, official %d", p, len(got), len(want24))
		}
		d := golden.MaxAbsDiff(got, want24)
		if src.SampleRate == SampleRate && d != 0 {
			t.Errorf("%s: 24 kHz input changed by %g", p, d)
		}
		if d > resampleTol {
			t.Errorf("%s (%s): 24 kHz max abs diff %.3g > %g", p, src.Format, d, resampleTol)
		}
		t.Logf("%s %s: decoded exact, 24 kHz (%d samples) max abs diff %.3g", p, src.Format, len(got), d)
	}
}

func sine(rate int, hz, amp, secs float64) []float32 {
	x := make([]float32, int(secs*float64(rate)))
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return x
}

// toneAt measures the amplitude of frequency hz in x (24 kHz) by projecting
// on sin and cos over the middle of the signal (edges hold filter ramps).
func toneAt(x []float32, hz float64) float64 {
	var s, c float64
	lo, hi := len(x)/4, 3*len(x)/4
	for i := lo; i < hi; i++ {
		a := 2 * math.Pi * hz * float64(i) / SampleRate
		s += float64(x[i]) * math.Sin(a)
		c += float64(x[i]) * math.Cos(a)
	}
	return 2 * math.Hypot(s, c) / float64(hi-lo)
}

// TestResampleTones: a tone inside the band keeps its frequency and level
// from every common rate, one above 12 kHz is removed, and the length
// follows ceil(n·24000/rate).
func TestResampleTones(t *testing.T) {
	for _, rate := range []int{8000, 16000, 22050, 32000, 44100, 48000, 96000} {
		x := sine(rate, 1000, 0.5, 1.0)
		y, err := Resample(x, rate, SampleRate)
		if err != nil {
			t.Fatal(err)
		}
		if want := int(math.Ceil(float64(len(x)) * (24000 / float64(rate)))); len(y) != want {
			t.Errorf("%d Hz: %d samples, want %d", rate, len(y), want)
		}
		if a := toneAt(y, 1000); math.Abs(a-0.5) > 1e-3 {
			t.Errorf("%d Hz: 1 kHz tone at amplitude %.5f, want 0.5", rate, a)
		}
		if a := toneAt(y, 1234); a > 1e-3 {
			t.Errorf("%d Hz: energy at 1234 Hz %.5f (aliasing or distortion)", rate, a)
		}
		if rate > 2*14000 {
			z, _ := Resample(sine(rate, 14000, 0.5, 1.0), rate, SampleRate)
			// 14 kHz would fold to 10 kHz at 24 kHz.
			if a := toneAt(z, 10000); a > 1e-3 {
				t.Errorf("%d Hz: a 14 kHz tone aliased to 10 kHz at %.5f", rate, a)
			}
		}
	}
	// librosa's length rule is ceil(n * (24000/rate)) in float64: one
	// second at 22.05 kHz gives 24000.000000000004, so 24001 samples.
	if n := OutputLength(22050, 22050, 24000); n != 24001 {
		t.Errorf("OutputLength(22050 at 22.05 kHz) = %d, librosa gives 24001", n)
	}
	x := sine(24000, 440, 0.3, 1.2)
	y, _ := Resample(x, 24000, 24000)
	if golden.MaxAbsDiff(x, y) != 0 {
		t.Error("24 kHz input was changed")
	}
}

// pcmWAV builds a WAV file with the given format tag, bits and channels
// holding frames of the same value v in every channel.
func pcmWAV(tag uint16, bits, ch, rate int, frames []float64, extensible bool) []byte {
	le := binary.LittleEndian
	bps := bits / 8
	var data []byte
	for _, v := range frames {
		for c := 0; c < ch; c++ {
			switch {
			case tag == 3 && bits == 32:
				data = le.AppendUint32(data, math.Float32bits(float32(v)))
			case tag == 3:
				data = le.AppendUint64(data, math.Float64bits(v))
			case bits == 8:
				data = append(data, byte(int(math.Round(v*128))+128))
			default:
				q := int64(math.Round(v * math.Ldexp(1, bits-1)))
				for k := 0; k < bps; k++ {
					data = append(data, byte(q>>(8*k)))
				}
			}
		}
	}
	var f []byte
	f = le.AppendUint16(f, map[bool]uint16{true: 0xFFFE, false: tag}[extensible])
	f = le.AppendUint16(f, uint16(ch))
	f = le.AppendUint32(f, uint32(rate))
	f = le.AppendUint32(f, uint32(rate*ch*bps))
	f = le.AppendUint16(f, uint16(ch*bps))
	f = le.AppendUint16(f, uint16(bits))
	if extensible {
		f = le.AppendUint16(f, 22)
		f = le.AppendUint16(f, uint16(bits))
		f = le.AppendUint32(f, 3)
		f = le.AppendUint16(f, tag)
		f = append(f, "\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"...)
	}
	var b []byte
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, uint32(4+8+len(f)+8+len(data)))
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, uint32(len(f)))
	b = append(b, f...)
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// TestWAVFormats decodes every sample format the reader supports.
func TestWAVFormats(t *testing.T) {
	vals := []float64{0, 0.5, -0.5, 0.25, -1}
	for _, tc := range []struct {
		tag        uint16
		bits       int
		extensible bool
	}{{1, 8, false}, {1, 16, false}, {1, 24, false}, {1, 32, false}, {3, 32, false}, {3, 64, false}, {1, 24, true}, {3, 32, true}} {
		for _, ch := range []int{1, 2} {
			b := pcmWAV(tc.tag, tc.bits, ch, 16000, vals, tc.extensible)
			mono, src, err := Decode(b)
			if err != nil {
				t.Fatalf("tag %d %d-bit ext %v: %v", tc.tag, tc.bits, tc.extensible, err)
			}
			if src.Channels != ch || src.SampleRate != 16000 || len(mono) != len(vals) {
				t.Fatalf("%s: %+v, %d frames", src.Format, src, len(mono))
			}
			for i, v := range vals {
				if float64(mono[i]) != v {
					t.Errorf("%s: frame %d = %v, want %v", src.Format, i, mono[i], v)
				}
			}
		}
	}
}

// speechLike is 2 s of a harmonic tone with an envelope at rate.
func speechLike(rate int, secs float64) []float64 {
	x := make([]float64, int(secs*float64(rate)))
	for i := range x {
		tt := float64(i) / float64(rate)
		x[i] = 0.3 * math.Sin(2*math.Pi*3*tt) * (math.Sin(2*math.Pi*150*tt) + 0.5*math.Sin(2*math.Pi*300*tt))
	}
	return x
}

// TestBadInput: every unusable input gets its own clear error, long input is
// trimmed with a notice, clipping gets a warning.
func TestBadInput(t *testing.T) {
	good := pcmWAV(1, 16, 1, 16000, speechLike(16000, 2), false)
	if c, err := Load(good); err != nil || len(c.Samples) != 48000 || len(c.Notices) != 0 {
		t.Fatalf("good clip: %v (%d notices)", err, len(c.Notices))
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"text", []byte("Hello, this is not a recording at all."), ErrNotAudio},
		{"png", []byte("\x89PNG\r\n\x1a\n0000000000"), ErrNotAudio},
		{"zero bytes", nil, ErrEmpty},
		{"truncated wav", good[:len(good)/2], ErrTruncated},
		{"header only", good[:44], ErrTruncated},
		{"riff garbage", []byte("RIFF\x10\x00\x00\x00WAVEjunk\x04\x00\x00\x00abcd"), ErrNotAudio},
		{"0.5 s", pcmWAV(1, 16, 1, 16000, speechLike(16000, 0.5), false), ErrTooShort},
		{"silence", pcmWAV(1, 16, 1, 16000, make([]float64, 32000), false), ErrSilent},
		{"fLaC garbage", []byte("fLaC\x00\x00\x00\x22garbage"), ErrNotAudio},
	}
	for _, tc := range cases {
		_, err := Load(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	// The header-only file: fix its data size to 0 so it is a valid empty WAV.
	empty := bytes.Clone(good[:44])
	binary.LittleEndian.PutUint32(empty[40:], 0)
	if _, err := Load(empty); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty data chunk: %v", err)
	}

	long := pcmWAV(1, 16, 1, 8000, speechLike(8000, 42.5), false)
	c, err := Load(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Samples) != 30*SampleRate || len(c.Notices) != 1 || !strings.Contains(c.Notices[0], "first 30 s") {
		t.Errorf("42.5 s clip: %d samples, notices %q", len(c.Samples), c.Notices)
	}
	hot := speechLike(16000, 2)
	for i := range hot {
		hot[i] = math.Max(-1, math.Min(1, 6*hot[i]))
	}
	c, err = Load(pcmWAV(3, 32, 1, 16000, hot, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Notices) != 1 || !strings.Contains(c.Notices[0], "clips") {
		t.Errorf("clipped clip: notices %q", c.Notices)
	}
	if _, err := Resample([]float32{1}, 0, 24000); err == nil {
		t.Error("rate 0 accepted")
	}
}

// TestWriterRoundTrip: a file written by engine/wav loads back.
func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	x := sine(24000, 220, 0.4, 1.5)
	if err := wav.Encode(&buf, x, 24000, wav.F32); err != nil {
		t.Fatal(err)
	}
	c, err := Load(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if golden.MaxAbsDiff(c.Samples, x) != 0 {
		t.Error("24 kHz float WAV did not load back unchanged")
	}
}

// A FIFO or device given as the reference audio is refused at once; before,
// LoadFile blocked on a FIFO and read /dev/zero until memory ran out.
func TestLoadFileRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ref.wav")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := LoadFile(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: LoadFile blocked", p)
		}
	}
}
