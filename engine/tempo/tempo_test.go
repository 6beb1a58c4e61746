package tempo

import (
	"math"
	"testing"
)

// toneInput is 2 s of a 220 Hz tone at half scale; it skips the test in a
// build without libsonic.
func toneInput(t *testing.T, rate int) []float32 {
	t.Helper()
	if MaxSpeed == 1 {
		t.Skip("built without libsonic")
	}
	in := make([]float32, 2*rate)
	for i := range in {
		in[i] = float32(0.5 * math.Sin(2*math.Pi*220*float64(i)/float64(rate)))
	}
	return in
}

// TestSpeedKeepsPitch: speed 2 halves the duration (streamed in 80 ms
// chunks) and keeps a 220 Hz tone at 220 Hz; speed 0.5 doubles it.
func TestSpeedKeepsPitch(t *testing.T) {
	const rate = 24000
	in := toneInput(t, rate)
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

// The calls a device callback uses: input written in small blocks, output
// read into the caller's buffer, the speed changed half way, End for the
// tail. The output lasts the first half at speed 2 plus the second at 0.5,
// within 2%, and Discard leaves nothing behind.
func TestWriteReadIntoSpeedChange(t *testing.T) {
	const rate = 24000
	in := toneInput(t, rate)
	s, err := New(rate, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := make([]float32, 480)
	got := 0
	read := func() {
		for s.Available() > 0 {
			got += s.ReadInto(out)
		}
	}
	for i := 0; i < len(in); i += 480 { // 480 divides rate: the change lands at half way
		if i == rate {
			if err := s.SetSpeed(0.5); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Write(in[i:min(i+480, len(in))]); err != nil {
			t.Fatal(err)
		}
		read()
	}
	if err := s.End(); err != nil {
		t.Fatal(err)
	}
	read()
	want := float64(rate)/2 + float64(rate)/0.5
	if math.Abs(float64(got)-want) > 0.02*want {
		t.Errorf("%d samples out, want about %.0f", got, want)
	}
	if err := s.SetSpeed(9); err == nil {
		t.Error("SetSpeed(9) accepted")
	}
	if err := s.Write(in[:5000]); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(); err != nil {
		t.Fatal(err)
	}
	if err := s.End(); err != nil {
		t.Fatal(err)
	}
	if n := s.Available(); n != 0 {
		t.Errorf("%d samples left after Discard", n)
	}
	if s.Speed() != 0.5 {
		t.Errorf("Discard changed the speed to %v", s.Speed())
	}
}
