package audio

import (
	"math"
	"testing"

	"talkbox/engine/tempo"
)

// Consumed counts the current utterance's samples read from the ring from
// its first one, at any speed: at 2x it runs at twice Played, and a new
// utterance starts it from zero again.
func TestRingConsumedIsStreamPosition(t *testing.T) {
	rg := newTestRing(t, 1<<16)
	out := make([]float32, 480)
	rg.Release(rg.Begin())
	rg.Write(tone(SampleRate/2, 220, 0.5))
	for range 10 {
		rg.Fill(out)
	}
	if s := rg.Stats(); s.Consumed != 4800 || s.Played != 4800 {
		t.Fatalf("speed 1: consumed %d, played %d, want 4800 each", s.Consumed, s.Played)
	}

	utt := rg.Begin() // the next utterance: the rest of the first is dropped
	rg.Release(utt)
	rg.Write(tone(2*SampleRate, 220, 0.5))
	rg.Fill(out)
	if s := rg.Stats(); s.Utterance != utt || s.Consumed != 480 {
		t.Fatalf("new utterance: consumed %d (utterance %d of %d), want 480 from its own start", s.Consumed, s.Utterance, utt)
	}
	if tempo.MaxSpeed < 2 {
		return // built without libsonic: speed 1 only
	}
	rg.SetSpeed(2)
	for range 40 {
		rg.Fill(out)
	}
	s := rg.Stats()
	if want := 480 + 2*float64(s.Played-480); math.Abs(float64(s.Consumed)-want) > 2000 {
		t.Fatalf("speed 2: consumed %d after %d played, want about %.0f", s.Consumed, s.Played, want)
	}
}
