package audio

import (
	"context"
	"math"
	"testing"
	"time"

	"talkbox/engine"
	"talkbox/engine/tempo"
)

func tone(n int, hz, amp float64) []float32 {
	pcm := make([]float32, n)
	for i := range pcm {
		pcm[i] = float32(amp * math.Sin(2*math.Pi*hz*float64(i)/SampleRate))
	}
	return pcm
}

// zeroCrossingHz is the dominant frequency of a clean tone.
func zeroCrossingHz(pcm []float32) float64 {
	z := 0
	for i := 1; i < len(pcm); i++ {
		if (pcm[i-1] < 0) != (pcm[i] < 0) {
			z++
		}
	}
	return float64(z) / 2 / (float64(len(pcm)) / SampleRate)
}

func needSonic(t *testing.T) {
	t.Helper()
	if tempo.MaxSpeed < MaxSpeed {
		t.Skip("built without libsonic: speed 1 only")
	}
}

// Volume: the callback after a change ramps from the old factor to the new
// one without a jump, the next ones are scaled exactly, 150% clips at full
// scale instead of wrapping or overshooting, and 0 is silence.
func TestRingVolumeGainAndClip(t *testing.T) {
	rg := newTestRing(t, 1<<14)
	rg.Release(rg.Begin())
	in := make([]float32, 1<<13)
	for i := range in {
		in[i] = 0.8
	}
	rg.Write(in)
	out := make([]float32, 100)
	rg.Fill(out)
	if out[0] != 0.8 || out[99] != 0.8 {
		t.Fatalf("volume 1 changed the samples: %v %v", out[0], out[99])
	}
	rg.SetVolume(0.5)
	rg.Fill(out) // the ramp
	for i := 1; i < len(out); i++ {
		if out[i] > out[i-1] || out[i-1]-out[i] > 0.8*0.5/100+1e-6 {
			t.Fatalf("ramp not smooth at %d: %v -> %v", i, out[i-1], out[i])
		}
	}
	if math.Abs(float64(out[99])-0.4) > 1e-6 {
		t.Fatalf("ramp ends at %v, want 0.4", out[99])
	}
	rg.Fill(out)
	for i, v := range out {
		if math.Abs(float64(v)-0.4) > 1e-6 {
			t.Fatalf("sample %d at volume 0.5 = %v, want 0.4", i, v)
		}
	}
	rg.SetVolume(1.5)
	rg.Fill(out)
	rg.Fill(out)
	for i, v := range out {
		if v != 1 {
			t.Fatalf("sample %d at volume 1.5 = %v, want clipped to 1", i, v)
		}
	}
	rg.SetVolume(9)
	if rg.Volume() != MaxVolume {
		t.Errorf("volume 9 kept as %v, want %v", rg.Volume(), MaxVolume)
	}
	rg.SetVolume(0)
	rg.Fill(out)
	rg.Fill(out)
	for i, v := range out {
		if v != 0 {
			t.Fatalf("sample %d at volume 0 = %v", i, v)
		}
	}
}

// Speed changed three times while one utterance plays: each stretch of the
// output takes the source at speed × its length (within the few pitch
// periods the time-stretch holds back), a 220 Hz tone stays at 220 Hz, and
// back at speed 1 the source continues sample for sample to its very last
// sample: nothing lost, nothing repeated.
func TestRingSpeedChangeMidStream(t *testing.T) {
	needSonic(t)
	rg := newTestRing(t, 1<<17)
	utt := rg.Begin()
	rg.Release(utt)
	src := tone(4*SampleRate, 220, 0.5)
	if n := rg.Write(src); n != len(src) {
		t.Fatalf("wrote %d", n)
	}
	rg.End()
	out := make([]float32, 480)
	play := func(callbacks int) []float32 {
		var got []float32
		for range callbacks {
			rg.Fill(out)
			got = append(got, out...)
		}
		return got
	}
	a := play(50)
	for i := range a {
		if a[i] != src[i] {
			t.Fatalf("speed 1: sample %d = %v, want %v", i, a[i], src[i])
		}
	}
	for _, phase := range []struct{ speed float64 }{{2}, {0.5}} {
		rg.SetSpeed(phase.speed)
		before := rg.r.Load()
		got := play(50)
		took := float64(rg.r.Load() - before)
		want := phase.speed * float64(len(got))
		if math.Abs(took-want) > 2000 {
			t.Errorf("speed %v: %d samples out took %.0f from the ring, want about %.0f", phase.speed, len(got), took, want)
		}
		if hz := zeroCrossingHz(got[2000:]); math.Abs(hz-220) > 5 {
			t.Errorf("speed %v: tone at %.1f Hz, want 220", phase.speed, hz)
		}
	}
	rg.SetSpeed(1)
	var rest []float32
	for rg.Playing(rg.Written()) {
		rg.Fill(out)
		rest = append(rest, out...)
		if len(rest) > len(src) {
			t.Fatal("never drained")
		}
	}
	// The last real sample is the source's last one; what follows is the
	// padding of the final callback.
	end := len(rest)
	for end > 0 && rest[end-1] == 0 {
		end--
	}
	const k = 6000
	if end < k {
		t.Fatalf("only %d samples after the last speed change", end)
	}
	for i := 1; i <= k; i++ {
		if rest[end-i] != src[len(src)-i] {
			t.Fatalf("back at speed 1: sample %d from the end = %v, want %v", i, rest[end-i], src[len(src)-i])
		}
	}
	if s := rg.Stats(); s.Underruns != 0 {
		t.Errorf("%d underruns", s.Underruns)
	}
}

// At a constant speed the whole utterance, including the last pitch
// periods the time-stretch holds back until End, reaches the device:
// source/speed samples within 1%; then Playing turns false.
func TestRingSpeedTailPlayed(t *testing.T) {
	needSonic(t)
	for _, speed := range []float64{2, 0.5, 1.25} {
		rg := newTestRing(t, 1<<17)
		rg.SetSpeed(speed)
		rg.Release(rg.Begin())
		src := tone(SampleRate, 180, 0.5)
		rg.Write(src)
		rg.End()
		out := make([]float32, 480)
		var got []float32
		for rg.Playing(rg.Written()) {
			rg.Fill(out)
			got = append(got, out...)
			if len(got) > 4*len(src) {
				t.Fatalf("speed %v: never drained", speed)
			}
		}
		played := rg.Stats().Played
		want := float64(len(src)) / speed
		if math.Abs(float64(played)-want) > 0.01*want {
			t.Errorf("speed %v: %d samples played, want about %.0f", speed, played, want)
		}
		if hz := zeroCrossingHz(got[:played]); math.Abs(hz-180) > 5 {
			t.Errorf("speed %v: tone at %.1f Hz, want 180", speed, hz)
		}
		rg.close()
	}
}

// A Stop in the middle of stretched playback drops what the time-stretch
// holds too: the next utterance (silence, at the same speed) gets none of
// the old tone.
func TestRingFlushClearsStretch(t *testing.T) {
	needSonic(t)
	rg := newTestRing(t, 1<<16)
	rg.SetSpeed(1.5)
	rg.Release(rg.Begin())
	rg.Write(tone(SampleRate/2, 300, 0.5))
	out := make([]float32, 480)
	for range 10 {
		rg.Fill(out)
	}
	rg.Flush()
	rg.Release(rg.Begin())
	rg.Write(make([]float32, SampleRate/4))
	rg.End()
	for rg.Playing(rg.Written()) {
		rg.Fill(out)
		for i, v := range out {
			if v != 0 {
				t.Fatalf("after a flush, sample %d = %v: old audio left in the time-stretch", i, v)
			}
		}
	}
}

// Switching from speed 2 back to 1 at any point: the input the time-stretch
// held back comes out (at speed 2), then the ring's audio sample for
// sample, so the utterance lasts exactly P/2 + (S-P) samples, where P is
// what the stretch had taken of the S samples.
func TestRingBackToSpeedOneKeepsHeldInput(t *testing.T) {
	needSonic(t)
	for _, callbacks := range []int{7, 10, 13, 21} {
		rg := newTestRing(t, 1<<17)
		rg.Release(rg.Begin())
		src := tone(2*SampleRate, 220, 0.5)
		rg.Write(src)
		rg.End()
		rg.SetSpeed(2)
		out := make([]float32, 480)
		for range callbacks {
			rg.Fill(out)
		}
		p := int(rg.r.Load())
		rg.SetSpeed(1)
		for n := 0; rg.Playing(rg.Written()); n++ {
			if n > 200 {
				t.Fatal("never drained")
			}
			rg.Fill(out)
		}
		played := int(rg.Stats().Played)
		if want := p/2 + len(src) - p; played < want-20 || played > want+20 {
			t.Errorf("after %d callbacks at speed 2: %d samples played, want %d (held input lost?)", callbacks, played, want)
		}
		rg.close()
	}
}

// Through the null device: a one-second stream at speed 2 plays in half a
// second of audio (Played), and at 0.5 in two; Play returns after the tail.
func TestPlayerSpeed(t *testing.T) {
	needSonic(t)
	p, err := Open(Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, speed := range []float64{2, 0.5} {
		p.SetSpeed(speed)
		if p.Speed() != speed {
			t.Fatalf("Speed() = %v after SetSpeed(%v)", p.Speed(), speed)
		}
		ch := make(chan engine.Chunk, 1)
		ch <- engine.Chunk{PCM: tone(SampleRate, 200, 0.3), Final: true}
		close(ch)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := p.Play(ctx, ch, PlayOptions{})
		cancel()
		if err != nil {
			t.Fatalf("speed %v: %v", speed, err)
		}
		want := time.Duration(float64(time.Second) / speed)
		if d := res.Played - want; d < -want/50 || d > want/50 {
			t.Errorf("speed %v: played %v, want about %v", speed, res.Played, want)
		}
	}
	p.SetSpeed(7)
	if p.Speed() != MaxSpeed {
		t.Errorf("speed 7 kept as %v, want %v", p.Speed(), MaxSpeed)
	}
}
