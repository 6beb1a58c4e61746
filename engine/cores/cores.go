// Package cores shares the machine's cores between the engine's parallel
// loops. In the streaming pipeline the LM's products and the codec's GEMMs
// run at the same time in two goroutines; if each split its work over every
// core, 2·N threads would fight over N cores (and a memory-bound LM step
// would wait on a descheduled band). Instead a loop's caller always works on
// its own loop, and extra goroutines join only while fewer than Limit
// goroutines are computing in For loops process-wide: alone, a loop gets
// every core; side by side, the LM and the codec get one core each (or half
// the cores each) without any static split.
package cores

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var (
	busy  atomic.Int32 // goroutines inside For loops, callers and helpers
	limit atomic.Int32 // 0 = GOMAXPROCS
)

// Limit is the number of goroutines that may compute in For loops at once.
func Limit() int {
	if l := limit.Load(); l > 0 {
		return int(l)
	}
	return runtime.GOMAXPROCS(0)
}

// SetLimit overrides Limit (n <= 0 restores GOMAXPROCS) and returns the old
// override, for benchmarks of thread scaling.
func SetLimit(n int) int {
	if n < 0 {
		n = 0
	}
	return int(limit.Swap(int32(n)))
}

// tryJoin takes a core for a helper if one is free.
func tryJoin() bool {
	l := int32(Limit())
	for {
		b := busy.Load()
		if b >= l {
			return false
		}
		if busy.CompareAndSwap(b, b+1) {
			return true
		}
	}
}

// For runs fn over [0, n) split into chunks of whole multiples of align
// (the last may be shorter), with at most maxWorkers goroutines including
// the caller's. Chunks are handed out one by one, so helpers that join late
// take what is left; a chunk never runs twice. fn must be safe to call from
// several goroutines on disjoint ranges.
func For(n, align, maxWorkers int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	align = max(1, align)
	maxWorkers = min(maxWorkers, (n+align-1)/align)
	if maxWorkers <= 1 {
		busy.Add(1)
		fn(0, n)
		busy.Add(-1)
		return
	}
	// Two chunks per worker balance a helper that starts late.
	chunk := ((n+2*maxWorkers-1)/(2*maxWorkers) + align - 1) / align * align
	chunks := int32((n + chunk - 1) / chunk)
	var next atomic.Int32
	work := func() {
		for {
			i := next.Add(1) - 1
			if i >= chunks {
				return
			}
			lo := int(i) * chunk
			fn(lo, min(lo+chunk, n))
		}
	}
	busy.Add(1)
	var wg sync.WaitGroup
	for h := 1; h < maxWorkers && next.Load() < chunks-1 && tryJoin(); h++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer busy.Add(-1)
			work()
		}()
	}
	work()
	busy.Add(-1)
	wg.Wait()
}
