package audio

import (
	"testing"
)

// Pausing in the middle of an utterance, possibly mid-callback-sequence and
// with a write landing during the pause, then resuming: the samples the
// device receives outside the pause are the written sequence exactly, with
// none lost and none repeated, and every paused callback is silent.
func TestRingPauseResumeSampleExact(t *testing.T) {
	rg := newTestRing(t, 4096)
	utt := rg.Begin()
	rg.Release(utt)
	const total = 3000
	seq := make([]float32, total)
	for i := range seq {
		seq[i] = float32(i + 1) // never 0, so silence is told apart from audio
	}
	if n := rg.Write(seq[:2000]); n != 2000 {
		t.Fatalf("wrote %d", n)
	}
	var got []float32
	out := make([]float32, 77) // odd size: the pause falls inside no boundary
	for i := 0; i < 9; i++ {
		rg.Fill(out)
		got = append(got, out...)
	}
	rg.SetPaused(true)
	if !rg.Paused() {
		t.Fatal("Paused() = false after SetPaused(true)")
	}
	readAtPause := rg.r.Load()
	for i := 0; i < 25; i++ {
		if i == 10 {
			if n := rg.Write(seq[2000:]); n != total-2000 {
				t.Fatalf("wrote %d during the pause", n)
			}
		}
		rg.Fill(out)
		for k, v := range out {
			if v != 0 {
				t.Fatalf("paused callback %d sample %d = %v, want silence", i, k, v)
			}
		}
	}
	if r := rg.r.Load(); r != readAtPause {
		t.Fatalf("read counter moved while paused: %d -> %d", readAtPause, r)
	}
	rg.SetPaused(false)
	for len(got) < total {
		rg.Fill(out)
		got = append(got, out...)
	}
	for i := 0; i < total; i++ {
		if got[i] != seq[i] {
			t.Fatalf("sample %d = %v, want %v (lost or repeated around the pause)", i, got[i], seq[i])
		}
	}
	for i := total; i < len(got); i++ {
		if got[i] != 0 {
			t.Fatalf("sample %d after the end = %v, want silence", i, got[i])
		}
	}
	s := rg.Stats()
	if s.Played != total {
		t.Errorf("played = %d, want %d", s.Played, total)
	}
	if s.Underruns != 0 || s.Silent != 0 {
		t.Errorf("the pause counted as underruns: %d callbacks, %d samples", s.Underruns, s.Silent)
	}
}

// Stop ends a pause, and a flush while paused drops the audio, so the next
// utterance neither waits nor starts with the old one's samples.
func TestPlayerStopEndsPause(t *testing.T) {
	p, err := Open(Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Pause()
	if !p.Paused() || !p.Live().Paused {
		t.Fatal("Pause did not take effect")
	}
	p.Resume()
	if p.Paused() {
		t.Fatal("Resume did not take effect")
	}
	p.Pause()
	p.Stop()
	if p.Paused() {
		t.Fatal("Stop left the player paused")
	}
}
