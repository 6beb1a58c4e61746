package cores

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestForCoversEachIndexOnce: every index is run exactly once, in chunks
// aligned as asked, whatever the sizes.
func TestForCoversEachIndexOnce(t *testing.T) {
	for _, n := range []int{1, 5, 16, 17, 100, 1000} {
		for _, workers := range []int{1, 2, 3, 8} {
			seen := make([]int32, n)
			For(n, 4, workers, func(lo, hi int) {
				if lo%4 != 0 {
					t.Errorf("n=%d: chunk starts at %d, not a multiple of 4", n, lo)
				}
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&seen[i], 1)
				}
			})
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("n=%d workers=%d: index %d ran %d times", n, workers, i, s)
				}
			}
		}
	}
	if b := settledBusy(); b != 0 {
		t.Errorf("busy = %d after the loops", b)
	}
}

// settledBusy is the busy count once helpers that finished their last chunk
// have left it (they do so just after the loop returns).
func settledBusy() int32 {
	for i := 0; i < 1000 && busy.Load() != 0; i++ {
		time.Sleep(time.Millisecond)
	}
	return busy.Load()
}

// TestLimitBoundsConcurrentWork: helpers join a loop only while fewer than
// Limit goroutines compute, so one loop never has more than Limit at once;
// a loop's caller always works on it, so with two loops side by side one
// caller may arrive while helpers fill the limit (Limit + 1 at most). Each
// loop still finishes. (The process has more Ps than Limit, so the bounds
// are not just the scheduler's.)
func TestLimitBoundsConcurrentWork(t *testing.T) {
	old := SetLimit(3)
	defer SetLimit(old)
	var running, peak atomic.Int32
	body := func(lo, hi int) {
		r := running.Add(1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		s := 0
		for i := 0; i < 200000; i++ {
			s += i ^ lo
		}
		_ = s
		running.Add(-1)
	}
	for rep := 0; rep < 20; rep++ {
		For(64, 1, 8, body)
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("one loop: %d goroutines computed at once, limit 3", p)
	}
	peak.Store(0)
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := 0; rep < 20; rep++ {
				For(64, 1, 8, body)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 4 {
		t.Errorf("two loops: %d goroutines computed at once, limit 3 plus one caller", p)
	}
	if Limit() != 3 {
		t.Errorf("Limit() = %d", Limit())
	}
}

// TestSchedulerHeadroom: the process has spare Ps beyond the cores the
// loops compute on, and Limit defaults to those cores.
func TestSchedulerHeadroom(t *testing.T) {
	if got, want := runtime.GOMAXPROCS(0), int(ncores)+schedulerHeadroom; got != want {
		t.Errorf("GOMAXPROCS = %d, want %d cores + %d", got, ncores, schedulerHeadroom)
	}
	old := SetLimit(0)
	defer SetLimit(old)
	if Limit() != int(ncores) || ncores < 1 {
		t.Errorf("Limit() = %d, cores %d", Limit(), ncores)
	}
}

// TestOccupyKeepsHelpersOff: while a stage occupies the only other core, a
// loop runs on its caller alone; after release, nothing is left counted.
func TestOccupyKeepsHelpersOff(t *testing.T) {
	old := SetLimit(2)
	defer SetLimit(old)
	release := Occupy()
	var running, peak atomic.Int32
	for rep := 0; rep < 20; rep++ {
		For(64, 1, 2, func(lo, hi int) {
			r := running.Add(1)
			if r > peak.Load() {
				peak.Store(r)
			}
			s := 0
			for i := 0; i < 20000; i++ {
				s += i ^ lo
			}
			_ = s
			running.Add(-1)
		})
	}
	release()
	release() // a second call is harmless
	if p := peak.Load(); p != 1 {
		t.Errorf("%d goroutines ran the loop while the other core was occupied", p)
	}
	if b := settledBusy(); b != 0 {
		t.Errorf("busy = %d after release", b)
	}
}
