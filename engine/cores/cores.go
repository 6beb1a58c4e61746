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
	"time"
)

var (
	busy  atomic.Int32 // goroutines inside For loops, callers and helpers
	limit atomic.Int32 // 0 = ncores
	// ncores is the number of cores the loops compute on: GOMAXPROCS as
	// the process starts (the machine's CPUs, or fewer where GOMAXPROCS or
	// the container's CPU quota says so).
	ncores int32
)

// schedulerHeadroom is how many Go Ps the process gets beyond the cores the
// loops compute on. The loops' bodies are long cgo calls; with every P in one
// (the LM's caller and helpers, the codec), the Go runtime takes the Ps back
// from the calls and hands them to other threads, so a helper coming back
// from C finds no P and waits for one: on the dev VM, a 40-row product
// over the code predictor's weights on two cores took 70-105 ms with a
// helper joining each loop 165-620 us late, against 48-55 ms (a C thread
// pool: 52) with a spare P.
const schedulerHeadroom = 2

func init() {
	ncores = int32(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(int(ncores) + schedulerHeadroom)
}

// Limit is the number of goroutines that may compute in For loops at once:
// the cores they run on.
func Limit() int {
	if l := limit.Load(); l > 0 {
		return int(l)
	}
	return int(ncores)
}

// SetLimit overrides Limit (n <= 0 restores the core count) and returns the old
// override, for benchmarks of thread scaling.
func SetLimit(n int) int {
	if n < 0 {
		n = 0
	}
	return int(limit.Swap(int32(n)))
}

// Occupy counts the calling goroutine as computing until release is called,
// for a stage whose work is not all in For loops (the codec's push beside the
// LM): while it holds a core, helpers do not spin or join loops on it.
func Occupy() (release func()) {
	busy.Add(1)
	return sync.OnceFunc(func() { busy.Add(-1) })
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
//
// The helpers are long-lived goroutines that spin for a while after each
// loop before they sleep: a decode step is a few hundred loops of 20-300 us
// each, and waking a sleeping thread for every one (and sleeping the caller
// on a WaitGroup) cost more than the second core gave (an int8 LM frame took
// longer on two threads than on one). They sleep at once when every core is
// computing (For callers, helpers and Occupy stages), so a spinner never
// takes a core from the stages' own threads. Spinners (and a caller waiting
// for a helper's last chunk) do not yield to the Go scheduler: other
// goroutines run on the spare Ps (schedulerHeadroom), and yielding every
// few microseconds cost an LM frame ~11k OS context switches a second
// (dev VM, two cores: 145k -> 38k over a 40-frame run, frame 106-114 ->
// 78-96 ms). A helper leaves the busy count just after its last chunk, so
// Limit may be exceeded by a finishing helper for an instant; it is a pacing
// rule, not a lock.
func For(n, align, maxWorkers int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	align = max(1, align)
	maxWorkers = min(maxWorkers, (n+align-1)/align, maxHelpers+1)
	if maxWorkers <= 1 {
		busy.Add(1)
		fn(0, n)
		busy.Add(-1)
		return
	}
	// Several chunks per worker balance a helper that starts late or is
	// descheduled mid-loop.
	chunk := ((n+chunksPerWorker*maxWorkers-1)/(chunksPerWorker*maxWorkers) + align - 1) / align * align
	j := &job{fn: fn, n: n, chunk: chunk, chunks: int32((n + chunk - 1) / chunk)}
	j.seats.Store(int32(maxWorkers - 1))
	busy.Add(1)
	publishJob(j, maxWorkers-1)
	j.work()
	busy.Add(-1)
	// Chunks a helper has taken may still be running.
	for j.done.Load() < j.chunks {
	}
}

// chunksPerWorker is how many pieces a loop is cut into per worker: with
// polling helpers a piece costs an atomic add and a cgo call, and a helper
// whose vCPU the host stalls holds up less. Dev VM, int8 LM frame on two
// threads, interleaved rounds: 2 pieces 118-155 ms, 4 pieces 98-122, 8
// pieces 87-107; end to end the same for 4 and 8.
const chunksPerWorker = 8

// maxHelpers bounds the pool (and so any loop's width).
const maxHelpers = 63

// spinFor is how long an idle helper polls for the next loop before it
// sleeps: longer than the gaps between a decode step's loops, short enough
// that an idle engine sleeps at once to a person's eye.
const spinFor = 200 * time.Microsecond

// job is one For loop.
type job struct {
	fn         func(lo, hi int)
	n, chunk   int
	chunks     int32
	next, done atomic.Int32
	seats      atomic.Int32 // helpers that may still join
}

func (j *job) work() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.chunks {
			return
		}
		lo := int(i) * j.chunk
		j.fn(lo, min(lo+j.chunk, j.n))
		j.done.Add(1)
	}
}

// join runs part of j if a seat and a core are free.
func (j *job) join() {
	if j.next.Load() >= j.chunks || j.seats.Add(-1) < 0 {
		return
	}
	if !tryJoin() {
		return
	}
	j.work()
	busy.Add(-1)
}

// pool is the process's helper goroutines. current is the newest loop;
// helpers take seats in whichever loop is newest when they look (an older
// loop's caller finishes its chunks itself).
var pool = struct {
	mu      sync.Mutex
	helpers atomic.Int32
	current atomic.Pointer[job]
	asleep  atomic.Int32 // helpers asleep or about to sleep
	wake    chan struct{}
}{wake: make(chan struct{}, maxHelpers)}

// publishJob offers j to the helpers, starting up to want of them on first
// use and waking sleeping ones.
func publishJob(j *job, want int) {
	pool.current.Store(j)
	if int(pool.helpers.Load()) < want {
		pool.mu.Lock()
		for int(pool.helpers.Load()) < want {
			pool.helpers.Add(1)
			go helper()
		}
		pool.mu.Unlock()
	}
	if busy.Load() >= int32(Limit()) {
		return // no core free for a helper: do not wake one just to sleep again
	}
	for w := min(int(pool.asleep.Load()), want); w > 0; w-- {
		select {
		case pool.wake <- struct{}{}:
		default:
			return
		}
	}
}

// helper joins each new loop, polling between them for spinFor and then
// sleeping until a loop wakes it.
func helper() {
	var last *job
	for {
		idleSince := time.Now()
		for spins := 1; ; spins++ {
			if j := pool.current.Load(); j != last && j != nil {
				last = j
				j.join()
				idleSince = time.Now()
				continue
			}
			if busy.Load() >= int32(Limit()) {
				break // every core computes: a runnable spinner would only take one from them
			}
			if spins%64 == 0 {
				if time.Since(idleSince) > spinFor {
					break
				}
			}
		}
		// Announce sleep, then look once more: a loop published between the
		// last look and the announcement would otherwise wait for nobody.
		pool.asleep.Add(1)
		if j := pool.current.Load(); j != last && j != nil {
			pool.asleep.Add(-1)
			continue
		}
		<-pool.wake
		pool.asleep.Add(-1)
	}
}
