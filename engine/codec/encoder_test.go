package codec

import (
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// TestGoldenEncode runs the speech-tokenizer encoder on the golden reference
// audio: the quantizer input within the activation tolerance, the codes exact.
func TestGoldenEncode(t *testing.T) {
	c := golden.OpenCase(t, "speaker_encoder_and_speech_encode")
	m, err := model.Load(golden.Checkpoint(t, "qwen3-tts-tiny-base"), model.Options{RequireCodec: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := NewEncoder(m)
	if err != nil {
		t.Fatal(err)
	}
	audio := c.F32("ref_audio")
	if in := c.F32("encode_input_values"); golden.MaxAbsDiff(in, audio) != 0 {
		t.Fatal("encode_input_values differ from ref_audio: the feature extractor is not the identity here")
	}
	lat, T := e.Latent(audio)
	want := c.F32("encode_quantizer_input") // [C, T] channel-first
	sh := c.Shape("encode_quantizer_input")
	if T != sh[1] || len(lat) != sh[0]*sh[1] {
		t.Fatalf("quantizer input %d rows, official %v", T, sh)
	}
	tm := make([]float32, len(want))
	for ch := 0; ch < sh[0]; ch++ {
		for tt := 0; tt < sh[1]; tt++ {
			tm[tt*sh[0]+ch] = want[ch*sh[1]+tt]
		}
	}
	d := golden.AssertClose(t, "quantizer input", lat, tm, golden.ActivationTol(tm, 1e-4))
	codes, err := e.Encode(audio)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes := c.I64("encode_codes")
	if len(codes)*16 != len(wantCodes) {
		t.Fatalf("%d frames, official %d", len(codes), len(wantCodes)/16)
	}
	bad := 0
	for f := range codes {
		for g := 0; g < 16; g++ {
			if int64(codes[f][g]) != wantCodes[f*16+g] {
				if bad < 5 {
					t.Errorf("frame %d group %d: code %d, official %d", f, g, codes[f][g], wantCodes[f*16+g])
				}
				bad++
			}
		}
	}
	t.Logf("quantizer input [%d x %d]: max abs diff %.3g (max %.3g); codes %d x 16: %d differ", sh[0], T, d, golden.MaxAbs(tm), len(codes), bad)
}
