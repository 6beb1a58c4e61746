package tempo

import (
	"math"
	"testing"
)

// TestSpeedKeepsPitch: speed 2 halves the duration (streamed in 80 ms
// chunks) and keeps a 220 Hz tone at 220 Hz; speed 0.5 doubles it.
func TestSpeedKeepsPitch(t *testing.T) {
	if MaxSpeed == 1 {
		t.Skip("built without libsonic")
	}
	const rate = 24000
	in := make([]float32, 2*rate)
	for i := range in {
		in[i] = float32(0.5 * math.Sin(2*math.Pi*220*float64(i)/rate))
	}
	for _, speed := range []float64{2, 0.5, 1.3} {
		s, err := New(rate, speed)
		if err != nil {
			t.Fatal(err)
		}
		var out []float32
		firstOut := -1
		for i := 0; i < len(in); i += 1920 {
			got, err := s.Process(in[i:min(i+1920, len(in))])
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > 0 && firstOut < 0 {
				firstOut = i
			}
			out = append(out, got...)
		}
		rest, err := s.Flush()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rest...)
		s.Close()
		want := float64(len(in)) / speed
		if math.Abs(float64(len(out))-want) > 0.02*want {
			t.Errorf("speed %v: %d samples, want about %.0f", speed, len(out), want)
		}
		if firstOut < 0 || firstOut > 2*1920 {
			t.Errorf("speed %v: first output after %d input samples: not streaming", speed, firstOut)
		}
		// Zero crossings per second: 2 × 220 for a 220 Hz tone.
		z := 0
		for i := 1; i < len(out); i++ {
			if (out[i-1] < 0) != (out[i] < 0) {
				z++
			}
		}
		if hz := float64(z) / 2 / (float64(len(out)) / rate); math.Abs(hz-220) > 5 {
			t.Errorf("speed %v: tone at %.1f Hz, want 220", speed, hz)
		}
	}
	for _, bad := range []float64{0, 0.1, 5, math.NaN()} {
		if _, err := New(rate, bad); err == nil {
			t.Errorf("speed %v accepted", bad)
		}
	}
}
