package codec

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// waveTol is this package's bar for waveforms against the official outputs
// (the manifest's waveform class allows 1e-3).
const waveTol = 1e-4

var decoders sync.Map // checkpoint dir -> *Decoder

// goldenDecoder loads (once per test binary) the decoder of a checkpoint dir.
func goldenDecoder(t testing.TB, dir string) *Decoder {
	t.Helper()
	if d, ok := decoders.Load(dir); ok {
		return d.(*Decoder)
	}
	m, err := model.Load(dir, model.Options{RequireCodec: true})
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	d, err := New(m)
	if err != nil {
		t.Fatalf("codec %s: %v", dir, err)
	}
	decoders.Store(dir, d)
	return d
}

// caseCodes reads an int64 [T,16] tensor as frames.
func caseCodes(t testing.TB, c *golden.Case, name string) []backend.Codes {
	t.Helper()
	sh := c.Shape(name)
	if len(sh) != 2 || sh[1] != backend.NumGroups {
		t.Fatalf("%s/%s: shape %v, want [T,16]", c.Name, name, sh)
	}
	raw := c.I64(name)
	frames := make([]backend.Codes, sh[0])
	for i := range frames {
		for g := 0; g < backend.NumGroups; g++ {
			frames[i][g] = int32(raw[i*backend.NumGroups+g])
		}
	}
	return frames
}

// TestGoldenWaveforms decodes the codes of every case that has a waveform in
// official mode and compares with the official wav. Voice-clone (ICL) cases
// decode concat(ref_code, codes), must match wav_decoded_with_ref, and after
// the official cut must match wav.
func TestGoldenWaveforms(t *testing.T) {
	golden.Require(t)
	for _, name := range golden.CaseNames(t) {
		c := golden.OpenCase(t, name)
		pairs := c.WavePairs()
		if len(pairs) == 0 || name == "speech_tokenizer_long_decode" { // the long case has its own tests
			continue
		}
		t.Run(name, func(t *testing.T) {
			d := goldenDecoder(t, c.Checkpoint)
			for _, p := range pairs {
				codes := caseCodes(t, c, p.Codes)
				want := c.F32(p.Wav)
				if !c.Has("ref_code") {
					got, err := d.DecodeOfficial(codes)
					if err != nil {
						t.Fatal(err)
					}
					diff := golden.AssertClose(t, p.Wav, got, want, waveTol)
					t.Logf("%s: %d frames, max abs diff %.3g", p.Wav, len(codes), diff)
					if c.Has("wav_decoded_with_ref") { // x-vector only: no reference codes
						golden.AssertClose(t, "wav_decoded_with_ref", got, c.F32("wav_decoded_with_ref"), waveTol)
					}
					continue
				}
				ref := caseCodes(t, c, "ref_code")
				all := append(append([]backend.Codes(nil), ref...), codes...)
				full, err := d.DecodeOfficial(all)
				if err != nil {
					t.Fatal(err)
				}
				dref := golden.AssertClose(t, "wav_decoded_with_ref", full, c.F32("wav_decoded_with_ref"), waveTol)
				cut := ReferenceCut(len(ref), len(all), len(full))
				if wantCut := len(full) - len(want); cut != wantCut {
					t.Fatalf("reference cut %d samples, the golden wav implies %d", cut, wantCut)
				}
				diff := golden.AssertClose(t, "wav", full[cut:], want, waveTol)
				t.Logf("ICL: %d ref + %d frames, cut %d; with_ref diff %.3g, wav diff %.3g", len(ref), len(codes), cut, dref, diff)
			}
		})
	}
}

// TestReferenceCutRounding checks the float64 rule on the example of
// docs/design/qwen3-tts-lm.md §8 (ref 1 of 49 frames gives 1919, not 1920) and
// on the golden lengths.
func TestReferenceCutRounding(t *testing.T) {
	if got := ReferenceCut(1, 49, 49*1920); got != 1919 {
		t.Errorf("ReferenceCut(1, 49) = %d, want 1919", got)
	}
	if got := ReferenceCut(38, 54, 54*1920); got != 72960 {
		t.Errorf("ReferenceCut(38, 54) = %d, want 72960", got)
	}
}

// TestGoldenChunkedSmall decodes with the golden small-chunk settings
// (meta.chunked_small), which exercise many chunk seams in 16 frames.
func TestGoldenChunkedSmall(t *testing.T) {
	golden.Require(t)
	for _, name := range golden.CaseNames(t) {
		c := golden.OpenCase(t, name)
		if !c.Has("wav_chunked_small") {
			continue
		}
		cs, ok := c.Meta["chunked_small"].(map[string]any)
		if !ok {
			t.Fatalf("%s: wav_chunked_small without meta.chunked_small", name)
		}
		chunk, ctx := int(cs["chunk_size"].(float64)), int(cs["left_context_size"].(float64))
		d := goldenDecoder(t, c.Checkpoint)
		got, err := d.DecodeChunked(caseCodes(t, c, "codes"), chunk, ctx)
		if err != nil {
			t.Fatal(err)
		}
		diff := golden.AssertClose(t, name+" wav_chunked_small", got, c.F32("wav_chunked_small"), waveTol)
		t.Logf("%s: chunk %d, context %d: max abs diff %.3g", name, chunk, ctx, diff)
	}
}

// TestGoldenStages compares every decoder stage of one unchunked pass with
// the official intermediates of cv_en_ryan_nonstream. The golden tensors are
// channel-first [C,T] except dec_pre_transformer_out, which is [T,C].
func TestGoldenStages(t *testing.T) {
	c := golden.OpenCase(t, "cv_en_ryan_nonstream")
	d := goldenDecoder(t, c.Checkpoint)
	codes := caseCodes(t, c, "codes")
	got := map[string][]float32{}
	s := d.newStream()
	s.trace = func(stage string, rows []float32, T, C int) {
		if stage == "pre_transformer" {
			got[stage] = append([]float32(nil), rows...)
			return
		}
		cf := make([]float32, T*C) // time-major -> channel-first
		for t := 0; t < T; t++ {
			for ch := 0; ch < C; ch++ {
				cf[ch*T+t] = rows[t*C+ch]
			}
		}
		got[stage] = cf
	}
	wav, err := s.Push(codes)
	if err != nil {
		t.Fatal(err)
	}
	stages := []string{"quantizer", "pre_conv", "pre_transformer", "upsample0", "upsample1"}
	for i := 0; i <= len(d.blocks)+2; i++ {
		stages = append(stages, fmt.Sprintf("decoder%d", i))
	}
	for _, st := range stages {
		want := c.F32("dec_" + st + "_out")
		diff := golden.AssertClose(t, st, got[st], want, golden.ActivationTol(want, 1e-4))
		t.Logf("%-16s %v max|golden| %.3g, max abs diff %.3g", st, c.Shape("dec_"+st+"_out"), golden.MaxAbs(want), diff)
	}
	golden.AssertClose(t, "dec_forward_wav", wav, c.F32("dec_forward_wav"), waveTol)
}

// TestGoldenLongDecode decodes the 330-frame case, which crosses the
// 300-frame chunk boundary, in official mode.
func TestGoldenLongDecode(t *testing.T) {
	c := golden.OpenCase(t, "speech_tokenizer_long_decode")
	d := goldenDecoder(t, c.Checkpoint)
	got, err := d.DecodeOfficial(caseCodes(t, c, "codes"))
	if err != nil {
		t.Fatal(err)
	}
	diff := golden.AssertClose(t, "wav", got, c.F32("wav"), waveTol)
	t.Logf("330 frames, official: max abs diff %.3g", diff)
}

// TestStreamingVsOfficialAfterChunk measures what the doc comment of Stream
// states: a continuous stream equals the official decode up to frame 300
// and then differs, because the official second chunk only sees 25 frames.
func TestStreamingVsOfficialAfterChunk(t *testing.T) {
	c := golden.OpenCase(t, "speech_tokenizer_long_decode")
	d := goldenDecoder(t, c.Checkpoint)
	codes := caseCodes(t, c, "codes")
	st := d.newStream()
	var got []float32
	for i := 0; i < len(codes); i += 30 {
		w, err := st.Push(codes[i:min(i+30, len(codes))])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, w...)
	}
	want := c.F32("wav")
	seam := OfficialChunkSize * d.spf
	before := golden.MaxAbsDiff(got[:seam], want[:seam])
	after := golden.MaxAbsDiff(got[seam:], want[seam:])
	t.Logf("streaming vs official: frames 0..299 max abs diff %.3g, frames 300..329 %.4g (meta unchunked_vs_chunked %v)",
		before, after, c.Meta["unchunked_vs_chunked_max_abs_diff"])
	if before > waveTol {
		t.Errorf("before the seam the stream should equal the official decode, diff %.3g", before)
	}
	ref, _ := c.Meta["unchunked_vs_chunked_max_abs_diff"].(float64)
	if math.Abs(after-ref) > 1e-3 {
		t.Errorf("after the seam: diff %.4g, the official single pass differs by %.4g", after, ref)
	}
}
