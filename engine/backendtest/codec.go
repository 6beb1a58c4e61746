package backendtest

import (
	"errors"
	"math/rand/v2"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
)

// OfficialChunkFrames is the frame count up to which the official decode is
// one pass, so a stream must equal it (engine/codec.OfficialChunkSize).
const OfficialChunkFrames = 300

// CodecSuite is one codec backend under test.
type CodecSuite struct {
	// Open returns the backend's codec for a golden checkpoint directory
	// (the suite leaves it open).
	Open func(t *testing.T, dir string) backend.Codec
	// Checkpoints are the golden checkpoints whose cases the golden test decodes.
	Checkpoints []string
	// WaveTol bounds |stream - official| on the golden waveforms.
	WaveTol float64
	// SplitTol bounds |pushes of any sizes - one push| on the same codec.
	SplitTol float64
	// BadCode is the error a code outside the codebook wraps.
	BadCode error
	// MinCases is how many golden code sequences must be compared.
	MinCases int
}

// Decode pushes frames through a new stream of c, pushSize at a time.
func Decode(t *testing.T, c backend.Codec, frames []backend.Codes, pushSize int) []float32 {
	t.Helper()
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []float32
	for i := 0; i < len(frames); i += pushSize {
		w, err := s.Push(frames[i:min(i+pushSize, len(frames))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w...)
	}
	if len(out) != len(frames)*c.SamplesPerFrame() {
		t.Fatalf("%d samples for %d frames", len(out), len(frames))
	}
	return out
}

// RandomCodes are n seeded frames of codes below size.
func RandomCodes(seed uint64, n, size int) []backend.Codes {
	r := rand.New(rand.NewPCG(seed, 99))
	out := make([]backend.Codes, n)
	for i := range out {
		for g := range out[i] {
			out[i][g] = int32(r.IntN(size))
		}
	}
	return out
}

// TestGoldenWaveforms decodes every golden case's codes (ICL cases:
// ref_code, then codes) in one push and compares the first 300 frames' audio
// with the official waveform.
func (s CodecSuite) TestGoldenWaveforms(t *testing.T) {
	golden.Require(t)
	compared := 0
	for _, name := range golden.CaseNames(t, s.Checkpoints...) {
		c := golden.OpenCase(t, name)
		pairs := c.WavePairs()
		if len(pairs) == 0 {
			continue
		}
		codec := s.Open(t, c.Checkpoint)
		for _, p := range pairs {
			frames := Codes(c.I64(p.Codes))
			wantName := p.Wav
			if c.Has("ref_code") {
				frames = append(Codes(c.I64("ref_code")), frames...)
				wantName = "wav_decoded_with_ref"
			}
			got := Decode(t, codec, frames, len(frames))
			want := c.F32(wantName)
			n := min(len(want), len(got), OfficialChunkFrames*codec.SamplesPerFrame())
			d := golden.AssertClose(t, name+"/"+wantName, got[:n], want[:n], s.WaveTol)
			t.Logf("%s/%s: %d frames, max abs %.3g vs the official (first %d samples)", name, p.Codes, len(frames), d, n)
			compared++
		}
	}
	if compared < s.MinCases {
		t.Errorf("only %d golden code sequences compared, want at least %d", compared, s.MinCases)
	}
}

// tiny is the checkpoint the stream tests decode with.
const tiny = "qwen3-tts-tiny-customvoice"

// TestStreamLengths pushes the same 100 frames (past the decoder's 72-frame
// attention window) frame by frame and in seeded random sizes, empty pushes
// included: every split equals one push.
func (s CodecSuite) TestStreamLengths(t *testing.T) {
	codec := s.Open(t, golden.Checkpoint(t, tiny))
	frames := RandomCodes(2024, 100, 2048)
	want := Decode(t, codec, frames, len(frames))
	r := rand.New(rand.NewPCG(2024, 7))
	for trial := 0; trial < 4; trial++ {
		cs, err := codec.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		var got []float32
		var sizes []int
		for i := 0; i < len(frames); {
			n := min(r.IntN(12), len(frames)-i)
			if trial == 0 {
				n = 1 // the real-time case
			}
			w, err := cs.Push(frames[i : i+n])
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != n*codec.SamplesPerFrame() {
				t.Fatalf("push of %d frames gave %d samples", n, len(w))
			}
			got = append(got, w...)
			sizes = append(sizes, n)
			i += n
		}
		cs.Close()
		if d := golden.MaxAbsDiff(got, want); d > s.SplitTol {
			t.Errorf("pushes %v: max abs %.3g vs one push (tol %g)", sizes, d, s.SplitTol)
		} else {
			t.Logf("trial %d: %d pushes, max abs %.3g vs one push", trial, len(sizes), d)
		}
	}
}

// TestBadCodes: a push holding a code outside the codebook fails with
// BadCode and leaves the stream as it was; Close is final.
func (s CodecSuite) TestBadCodes(t *testing.T) {
	codec := s.Open(t, golden.Checkpoint(t, tiny))
	frames := RandomCodes(9, 40, 2048)
	want := Decode(t, codec, frames, len(frames))
	cs, err := codec.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	var got []float32
	for i := 0; i < len(frames); i += 8 {
		if i == 16 {
			for _, bad := range []int32{-1, 2048, 2150, 1 << 30} {
				b := append([]backend.Codes(nil), frames[i:i+2]...)
				b[1][7] = bad
				if _, err := cs.Push(b); !errors.Is(err, s.BadCode) {
					t.Errorf("code %d: %v, want %v", bad, err, s.BadCode)
				}
			}
		}
		w, err := cs.Push(frames[i:min(i+8, len(frames))])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, w...)
	}
	if d := golden.MaxAbsDiff(got, want); d > s.SplitTol {
		t.Errorf("after refused pushes: max abs %.3g vs a clean decode", d)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Push(frames[:1]); err == nil {
		t.Error("push after Close: no error")
	}
}

// TestReset: a stream that can be reset (the engine keeps one between
// utterances) decodes like a new one afterwards.
func (s CodecSuite) TestReset(t *testing.T) {
	codec := s.Open(t, golden.Checkpoint(t, tiny))
	cs, err := codec.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rs, ok := cs.(interface{ Reset() error })
	if !ok {
		t.Skipf("%T cannot be reset", cs)
	}
	frames := RandomCodes(5, 30, 2048)
	want := Decode(t, codec, frames[:10], 10)
	if _, err := cs.Push(frames); err != nil {
		t.Fatal(err)
	}
	if err := rs.Reset(); err != nil {
		t.Fatal(err)
	}
	got, err := cs.Push(frames[:10])
	if err != nil {
		t.Fatal(err)
	}
	if d := golden.MaxAbsDiff(got, want); d > s.SplitTol {
		t.Errorf("after Reset: max abs %.3g vs a new stream", d)
	}
}

// TestTwoStreams: streams of one codec held at once, pushed in turns, each
// decode as if alone.
func (s CodecSuite) TestTwoStreams(t *testing.T) {
	codec := s.Open(t, golden.Checkpoint(t, tiny))
	a, b := RandomCodes(1, 24, 2048), RandomCodes(2, 24, 2048)
	wantA, wantB := Decode(t, codec, a, len(a)), Decode(t, codec, b, len(b))
	sa, err := codec.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := codec.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var gotA, gotB []float32
	for i := 0; i < len(a); i += 3 {
		wa, err := sa.Push(a[i : i+3])
		if err != nil {
			t.Fatal(err)
		}
		wb, err := sb.Push(b[i : i+3])
		if err != nil {
			t.Fatal(err)
		}
		gotA, gotB = append(gotA, wa...), append(gotB, wb...)
	}
	if da, db := golden.MaxAbsDiff(gotA, wantA), golden.MaxAbsDiff(gotB, wantB); da > s.SplitTol || db > s.SplitTol {
		t.Errorf("interleaved streams: max abs %.3g and %.3g vs alone", da, db)
	}
}

// Run runs every test of the suite.
func (s CodecSuite) Run(t *testing.T) {
	t.Run("GoldenWaveforms", s.TestGoldenWaveforms)
	t.Run("StreamLengths", s.TestStreamLengths)
	t.Run("BadCodes", s.TestBadCodes)
	t.Run("Reset", s.TestReset)
	t.Run("TwoStreams", s.TestTwoStreams)
}
