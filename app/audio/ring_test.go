package audio

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func newTestRing(t *testing.T, capacity int) *Ring {
	t.Helper()
	rg, err := NewRing(capacity)
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

func TestNewRingRoundsToPowerOfTwo(t *testing.T) {
	rg := newTestRing(t, 1000)
	if rg.Cap() != 1024 {
		t.Fatalf("cap = %d, want 1024", rg.Cap())
	}
	for _, bad := range []int{0, -5, 1<<30 + 1} {
		if _, err := NewRing(bad); err == nil {
			t.Errorf("NewRing(%d): want an error", bad)
		}
	}
}

// A producer goroutine writes a numbered sequence in odd-sized pieces through
// a small ring (many wrap-arounds) while the consumer reads it in
// callback-sized blocks; every sample must arrive once, in order.
func TestRingConcurrentOrderAndWrap(t *testing.T) {
	rg := newTestRing(t, 256)
	utt := rg.Begin()
	rg.Release(utt)
	const total = 200_000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := 0
		piece := make([]float32, 0, 97)
		for next < total {
			piece = piece[:0]
			for i := 0; i < 1+next%97 && next+i < total; i++ {
				piece = append(piece, float32(next+i))
			}
			for len(piece) > 0 {
				n := rg.Write(piece)
				piece = piece[n:]
				next += n
				if len(piece) > 0 {
					runtime.Gosched()
				}
			}
		}
	}()
	out := make([]float32, 61)
	want := 0
	deadline := time.Now().Add(20 * time.Second)
	for want < total {
		if time.Now().After(deadline) {
			t.Fatalf("consumer stalled at sample %d", want)
		}
		before := rg.r.Load()
		rg.Fill(out)
		n := int(rg.r.Load() - before)
		for i := 0; i < n; i++ {
			if out[i] != float32(want) {
				t.Fatalf("sample %d = %v, want %d", want, out[i], want)
			}
			want++
		}
		for i := n; i < len(out); i++ {
			if out[i] != 0 {
				t.Fatalf("padding at %d = %v, want silence", i, out[i])
			}
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()
	if got := rg.Stats().Played; got != total {
		t.Fatalf("played = %d, want %d", got, total)
	}
}

func TestRingWriteStopsWhenFull(t *testing.T) {
	rg := newTestRing(t, 8)
	if n := rg.Write(make([]float32, 20)); n != 8 {
		t.Fatalf("wrote %d into an 8-sample ring, want 8", n)
	}
	if n := rg.Write([]float32{1}); n != 0 {
		t.Fatalf("wrote %d into a full ring, want 0", n)
	}
}

// Underruns count padded callbacks between two played samples only: not
// before the first sample, not at the end of the stream.
func TestRingUnderrunCounting(t *testing.T) {
	rg := newTestRing(t, 1024)
	out := make([]float32, 10)
	utt := rg.Begin()
	rg.Release(utt)

	rg.Fill(out) // nothing written yet: waiting for the first sample is not an underrun
	rg.Write(ones(15))
	rg.Fill(out) // 10 real
	rg.Fill(out) // 5 real + 5 silent: pending
	rg.Fill(out) // 10 silent: pending
	if s := rg.Stats(); s.Underruns != 0 {
		t.Fatalf("underruns counted before audio resumed: %+v", s)
	}
	rg.Write(ones(10))
	rg.Fill(out) // audio resumes: the two padded callbacks were a gap
	s := rg.Stats()
	if s.Underruns != 2 || s.Silent != 15 || s.Played != 25 {
		t.Fatalf("after a gap: %+v, want 2 underruns, 15 silent, 25 played", s)
	}
	if s.FirstSound == 0 {
		t.Fatal("first sound not stamped")
	}
	rg.Fill(out) // end of stream: trailing silence never counts
	rg.Fill(out)
	if s := rg.Stats(); s.Underruns != 2 || s.Silent != 15 {
		t.Fatalf("trailing silence counted: %+v", s)
	}

	// A new utterance resets the figures on the consumer's next callback.
	utt = rg.Begin()
	rg.Release(utt)
	rg.Fill(out)
	if s := rg.Stats(); s.Utterance != utt || s.Underruns != 0 || s.Played != 0 || s.FirstSound != 0 {
		t.Fatalf("figures not reset for utterance %d: %+v", utt, s)
	}
}

func TestRingHoldUntilRelease(t *testing.T) {
	rg := newTestRing(t, 1024)
	out := make([]float32, 10)
	utt := rg.Begin()
	rg.Write(ones(30))
	rg.Fill(out)
	if s := rg.Stats(); s.Played != 0 || out[0] != 0 {
		t.Fatalf("played while held: %+v", s)
	}
	rg.Release(utt)
	rg.Fill(out)
	if s := rg.Stats(); s.Played != 10 || out[0] != 1 {
		t.Fatalf("not playing after release: %+v", s)
	}
}

// Flush drops everything written before it, on the consumer's next callback,
// while audio written after it still plays.
func TestRingFlush(t *testing.T) {
	rg := newTestRing(t, 1024)
	out := make([]float32, 10)
	rg.Release(rg.Begin())
	rg.Write(ones(500))
	rg.Fill(out)
	rg.Flush()
	if rg.Buffered() != 0 {
		t.Fatalf("buffered after flush = %d, want 0", rg.Buffered())
	}
	rg.Write([]float32{7, 8})
	rg.Fill(out)
	if out[0] != 7 || out[1] != 8 || out[2] != 0 {
		t.Fatalf("after flush got %v, want 7 8 then silence", out[:3])
	}
	if s := rg.Stats(); s.Underruns != 0 {
		t.Fatalf("flush counted as underrun: %+v", s)
	}

	// A flush from another goroutine while the consumer runs.
	rg.Write(ones(500))
	done := make(chan struct{})
	go func() { rg.Flush(); close(done) }()
	<-done
	rg.Fill(out)
	if out[0] != 0 || rg.Buffered() != 0 {
		t.Fatalf("concurrent flush not applied: out[0]=%v buffered=%d", out[0], rg.Buffered())
	}
}

func ones(n int) []float32 {
	p := make([]float32, n)
	for i := range p {
		p[i] = 1
	}
	return p
}
