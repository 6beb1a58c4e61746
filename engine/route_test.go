package engine

import (
	"sync"
	"testing"
	"time"
)

func newLMRoute(soloWait time.Duration) *lmRoute {
	r := &lmRoute{}
	r.init(soloWait)
	return r
}

// TestLMRouteLoneUtterance: an utterance alone takes the single-stream LM
// once the wait is over, and holds it.
func TestLMRouteLoneUtterance(t *testing.T) {
	const wait = 20 * time.Millisecond
	r := newLMRoute(wait)
	r.begin()
	start := time.Now()
	if !r.takeSingle() {
		t.Fatal("a lone utterance went to the batch")
	}
	if d := time.Since(start); d < wait {
		t.Errorf("took the single-stream LM after %v, before the %v wait", d, wait)
	}
	if r.single.TryLock() {
		t.Fatal("the single-stream LM is not held")
	}
	r.single.Unlock()
	r.end()
}

// TestLMRouteBurst: utterances that start together all go to the batch, the
// first included, without waiting out the window; one that starts while
// another is in flight goes to the batch at once, though the single-stream
// LM is free.
func TestLMRouteBurst(t *testing.T) {
	r := newLMRoute(time.Minute)
	r.begin()
	first := make(chan bool, 1)
	go func() { first <- r.takeSingle() }()
	time.Sleep(5 * time.Millisecond) // the first is waiting for company
	r.begin()
	if r.takeSingle() {
		t.Error("the second utterance took the single-stream LM")
	}
	select {
	case single := <-first:
		if single {
			t.Error("the first utterance kept the single-stream LM with a second in flight")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first utterance still waits after the second started")
	}
	if !r.single.TryLock() {
		t.Fatal("the single-stream LM stayed held")
	}
	r.single.Unlock()
	// Both in flight (in the batch): a third goes to the batch at once.
	r.begin()
	start := time.Now()
	if r.takeSingle() || time.Since(start) > time.Second {
		t.Error("an utterance beside two in flight did not go straight to the batch")
	}
	r.end()
	r.end()
	r.end()
}

// TestLMRouteConcurrent: many utterances starting at once leave the
// single-stream LM to at most one of them (race detector: the counts).
func TestLMRouteConcurrent(t *testing.T) {
	r := newLMRoute(time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	singles := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.begin()
			defer r.end()
			if r.takeSingle() {
				mu.Lock()
				singles++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				r.single.Unlock()
			}
		}()
	}
	wg.Wait()
	if singles > 1 {
		t.Errorf("%d utterances on the single-stream LM", singles)
	}
	if r.inflight.Load() != 0 {
		t.Errorf("%d still counted in flight", r.inflight.Load())
	}
}
