package main

import (
	"fmt"
	"math"
	"time"

	"talkbox/engine/model"
	"talkbox/engine/voice"
)

// cloneReport times what `voice add` runs once per voice and model: the
// speaker encoder (mel + ECAPA-TDNN) and the speech-tokenizer encoder, on one
// clip of reference audio at 24 kHz, on the CPU.
type cloneReport struct {
	ClipSeconds      float64 `json:"clip_seconds"`
	Runs             int     `json:"runs"` // measured runs (medians), after one warm-up
	LoadMS           float64 `json:"load_ms"`
	SpeakerEncoderMS float64 `json:"speaker_encoder_ms"` // mel + x-vector
	SpeechEncoderMS  float64 `json:"speech_encoder_ms"`  // audio -> 16 codes per 80 ms
	Frames           int     `json:"frames"`
	XVectorDim       int     `json:"xvector_dim"`
}

// benchClip is a voiced-speech stand-in: a 120-180 Hz gliding pulse train
// with formant-like harmonics under a syllable-rate envelope.
func benchClip(seconds float64) []float32 {
	n := int(seconds * voice.SampleRate)
	x := make([]float32, n)
	phase := 0.0
	for i := range x {
		t := float64(i) / voice.SampleRate
		f0 := 150 + 30*math.Sin(2*math.Pi*0.7*t)
		phase += 2 * math.Pi * f0 / voice.SampleRate
		var v float64
		for h := 1; h <= 20; h++ {
			fh := f0 * float64(h)
			g := math.Exp(-math.Pow((fh-700)/400, 2)) + 0.5*math.Exp(-math.Pow((fh-1800)/600, 2)) + 0.05
			v += g * math.Sin(float64(h)*phase)
		}
		env := 0.5 + 0.5*math.Sin(2*math.Pi*4*t)
		x[i] = float32(0.1 * env * v)
	}
	return x
}

func benchClone(m *model.Model, f benchFlags) (*cloneReport, error) {
	start := time.Now()
	enc, err := voice.NewEncoders(m)
	if err != nil {
		return nil, fmt.Errorf("clone bench: %w", err)
	}
	rep := &cloneReport{ClipSeconds: f.cloneSeconds, Runs: max(1, f.runs-1), LoadMS: ms(time.Since(start)), XVectorDim: enc.Speaker().Dim()}
	clip := benchClip(f.cloneSeconds)
	var spk, sp []time.Duration
	for r := 0; r <= rep.Runs; r++ {
		t0 := time.Now()
		if _, err := enc.Speaker().Embed(clip); err != nil {
			return nil, err
		}
		t1 := time.Now()
		codes, err := enc.Speech().Encode(clip)
		if err != nil {
			return nil, err
		}
		rep.Frames = len(codes)
		if r == 0 {
			continue // warm-up
		}
		spk, sp = append(spk, t1.Sub(t0)), append(sp, time.Since(t1))
	}
	rep.SpeakerEncoderMS, rep.SpeechEncoderMS = ms(median(spk)), ms(median(sp))
	return rep, nil
}
