package speaker

import (
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/model"
)

func TestGoldenMelFilterbank(t *testing.T) {
	c := golden.OpenCase(t, "speaker_encoder_and_speech_encode")
	want := c.F32("mel_filterbank")
	d := golden.AssertClose(t, "mel_filterbank", MelFilterbank(), want, 1e-7)
	t.Logf("mel_filterbank [128x513]: max abs diff %.3g (max %.3g)", d, golden.MaxAbs(want))
}

func TestGoldenMel(t *testing.T) {
	c := golden.OpenCase(t, "speaker_encoder_and_speech_encode")
	mel, T := Mel(c.F32("ref_audio"), MelFilterbank())
	want := c.F32("mel")
	if sh := c.Shape("mel"); T != sh[0] {
		t.Fatalf("mel frames %d, official %d", T, sh[0])
	}
	d := golden.AssertClose(t, "mel", mel, want, golden.ActivationTol(want, 1e-4))
	t.Logf("mel [%d x 128]: max abs diff %.3g (max |mel| %.3g, rel %.3g)", T, d, golden.MaxAbs(want), d/golden.MaxAbs(want))
}

func TestGoldenXVector(t *testing.T) {
	c := golden.OpenCase(t, "speaker_encoder_and_speech_encode")
	m, err := model.Load(golden.Checkpoint(t, "qwen3-tts-tiny-base"), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	x, err := e.Embed(c.F32("ref_audio"))
	if err != nil {
		t.Fatal(err)
	}
	want := c.F32("spk_embedding")
	d := golden.AssertClose(t, "x-vector", x, want, golden.ActivationTol(want, 1e-4))
	t.Logf("x-vector [%d]: max abs diff %.3g (max |x| %.3g, rel %.3g)", len(x), d, golden.MaxAbs(want), d/golden.MaxAbs(want))
}
