package cudacodec

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"talkbox/engine/backend"
)

// fakeDecoder stands in for a pool: each stream's sample for a frame is its
// slot·1e6 + its frame count so far·1e3 + the frame's first code, so a
// sample shows whose frame it is, in which order it was decoded and from
// which codes. spf 2: both samples the same.
type fakeDecoder struct {
	mu       sync.Mutex
	frames   map[int32]int
	launches [][]int32 // slots of each launch
	sizes    []int     // T of each launch
	fail     error
}

func (f *fakeDecoder) launch(slots []int32, codes []backend.Codes, T int, out []float32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.launches = append(f.launches, append([]int32(nil), slots...))
	f.sizes = append(f.sizes, T)
	if f.fail != nil {
		return f.fail
	}
	for i, sl := range slots {
		for t := 0; t < T; t++ {
			v := float32(sl)*1e6 + float32(f.frames[sl])*1e3 + float32(codes[i*T+t][0])
			out[(i*T+t)*2], out[(i*T+t)*2+1] = v, v
			f.frames[sl]++
		}
	}
	return nil
}

func codesFrom(first, n int) []backend.Codes {
	c := make([]backend.Codes, n)
	for i := range c {
		c[i][0] = int32(first + i)
	}
	return c
}

// checkOut: out holds slot's frames from frame `from` on, codes from `first`.
func checkOut(t *testing.T, out []float32, slot, from, first int) {
	t.Helper()
	for i := 0; i < len(out)/2; i++ {
		want := float32(slot)*1e6 + float32(from+i)*1e3 + float32(first+i)
		if out[2*i] != want || out[2*i+1] != want {
			t.Fatalf("slot %d sample of frame %d: %v, want %v", slot, i, out[2*i], want)
		}
	}
}

// gatedLaunch wraps f's launch: each launch first reports on entered, then
// waits for the gate.
func gatedLaunch(f *fakeDecoder, entered chan<- int, gate <-chan struct{}) launchFunc {
	calls := 0
	return func(slots []int32, codes []backend.Codes, T int, out []float32) error {
		calls++
		entered <- calls
		<-gate
		return f.launch(slots, codes, T, out)
	}
}

func queued(m *merger) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

// TestMergerJoinsConcurrentPushes: pushes that arrive while a launch runs go
// out together in the next one, and each gets its own frames back.
func TestMergerJoinsConcurrentPushes(t *testing.T) {
	entered := make(chan int, 8)
	gate := make(chan struct{})
	f := &fakeDecoder{frames: map[int32]int{}}
	m := newMerger(2, gatedLaunch(f, entered, gate), 0)
	var wg sync.WaitGroup
	outs := make([][]float32, 4)
	errs := make([]error, 4)
	push := func(s, n int) {
		defer wg.Done()
		outs[s] = make([]float32, 2*n)
		errs[s] = m.push(s, codesFrom(10*s, n), outs[s])
	}
	wg.Add(1)
	go push(0, 1)
	<-entered // slot 0's launch runs (held at the gate)
	wg.Add(3)
	for s := 1; s < 4; s++ {
		go push(s, 3)
	}
	for queued(m) < 3 { // all three wait behind the running launch
		runtime.Gosched()
	}
	close(gate)
	wg.Wait()
	for s := 0; s < 4; s++ {
		if errs[s] != nil {
			t.Fatalf("slot %d: %v", s, errs[s])
		}
	}
	checkOut(t, outs[0], 0, 0, 0)
	for s := 1; s < 4; s++ {
		checkOut(t, outs[s], s, 0, 10*s)
	}
	if len(f.launches) != 2 || len(f.launches[1]) != 3 || f.sizes[1] != 3 {
		t.Errorf("launches %v of sizes %v, want [0] then the three others in one launch of 3 frames", f.launches, f.sizes)
	}
}

// TestMergerPassesTheLead: a push returns once its own frames are decoded;
// a push still waiting leads the next launch.
func TestMergerPassesTheLead(t *testing.T) {
	entered := make(chan int, 8)
	gate := make(chan struct{})
	f := &fakeDecoder{frames: map[int32]int{}}
	m := newMerger(2, gatedLaunch(f, entered, gate), 0)
	first := make(chan error, 1)
	go func() { first <- m.push(0, codesFrom(0, 1), make([]float32, 2)) }()
	<-entered
	second := make(chan error, 1)
	go func() { second <- m.push(1, codesFrom(5, 3), make([]float32, 6)) }()
	for queued(m) < 1 {
		runtime.Gosched()
	}
	gate <- struct{}{} // launch 1 ([0]) finishes
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Slot 0's push returned while slot 1's launch has not finished: slot
	// 1's goroutine leads it.
	if n := <-entered; n != 2 {
		t.Fatalf("launch %d entered, want 2", n)
	}
	gate <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.launches) != "[[0] [1]]" {
		t.Errorf("launches %v, want [[0] [1]]", f.launches)
	}
}

// TestMergerUnequalPushes: a launch runs the shortest remainder (at most
// maxPushFrames), and the longer pushes go on in later launches.
func TestMergerUnequalPushes(t *testing.T) {
	f := &fakeDecoder{frames: map[int32]int{}}
	m := newMerger(2, f.launch, 0)
	lens := []int{2, 11, 5}
	reqs := make([]*pushReq, 3)
	var out [3][]float32
	for s, n := range lens {
		out[s] = make([]float32, 2*n)
		reqs[s] = &pushReq{slot: s, frames: codesFrom(50*s, n), out: out[s], done: make(chan error, 1),
			lead: make(chan struct{}, 1)}
	}
	// All three waiting before anyone leads; the longest leads, so it runs
	// every launch.
	m.queue = append(m.queue, reqs...)
	m.leading = true
	m.lead(reqs[1])
	for s, r := range reqs {
		if err := <-r.done; err != nil {
			t.Fatalf("slot %d: %v", s, err)
		}
		checkOut(t, out[s], s, 0, 50*s)
	}
	if fmt.Sprint(f.sizes) != "[2 3 6]" || fmt.Sprint(f.launches) != "[[0 1 2] [1 2] [1]]" {
		t.Errorf("launches %v of sizes %v, want [[0 1 2] [1 2] [1]] of [2 3 6]", f.launches, f.sizes)
	}
	if m.leading {
		t.Error("the lead is still held with nothing waiting")
	}
}

// TestMergerError: a failed launch fails every push in it, later pushes run,
// and a stopped merger refuses pushes.
func TestMergerError(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeDecoder{frames: map[int32]int{}, fail: boom}
	m := newMerger(2, f.launch, 0)
	if err := m.push(1, codesFrom(0, 2), make([]float32, 4)); !errors.Is(err, boom) {
		t.Fatalf("push in a failed launch: %v, want boom", err)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	out := make([]float32, 4)
	if err := m.push(1, codesFrom(7, 2), out); err != nil {
		t.Fatalf("push after a failed launch: %v", err)
	}
	checkOut(t, out, 1, 0, 7)
	m.stop()
	if err := m.push(1, codesFrom(0, 1), make([]float32, 2)); !errors.Is(err, errStopped) {
		t.Fatalf("push after stop: %v, want errStopped", err)
	}
}

// TestMergerGathersOpenStreams: with three streams open, a push waits for
// the other two and all three go out in one launch, though they arrive one
// by one; the gather window is far longer than the test, so a launch made
// without the others would show as three launches.
func TestMergerGathersOpenStreams(t *testing.T) {
	f := &fakeDecoder{frames: map[int32]int{}}
	m := newMerger(2, f.launch, time.Minute)
	for range 3 {
		m.join()
	}
	var wg sync.WaitGroup
	outs := make([][]float32, 3)
	for s := range 3 {
		outs[s] = make([]float32, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.push(s, codesFrom(10*s, 1), outs[s]); err != nil {
				t.Errorf("slot %d: %v", s, err)
			}
		}()
		time.Sleep(5 * time.Millisecond) // the pushes arrive apart
	}
	wg.Wait()
	for s := range 3 {
		checkOut(t, outs[s], s, 0, 10*s)
	}
	if len(f.launches) != 1 || len(f.launches[0]) != 3 {
		t.Errorf("launches %v, want one launch of the three streams", f.launches)
	}
}

// TestMergerGatherEnds: a launch waits no longer than the window for an open
// stream that does not push, and not at all when its stream is the only one
// open or the others leave.
func TestMergerGatherEnds(t *testing.T) {
	f := &fakeDecoder{frames: map[int32]int{}}
	const window = 30 * time.Millisecond
	m := newMerger(2, f.launch, window)
	m.join()
	start := time.Now()
	if err := m.push(0, codesFrom(0, 1), make([]float32, 2)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= window {
		t.Errorf("a lone open stream's push took %v, want no wait (window %v)", d, window)
	}
	m.join() // a second stream holds a slot but never pushes
	start = time.Now()
	if err := m.push(0, codesFrom(1, 1), make([]float32, 2)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < window || d > 20*window {
		t.Errorf("push beside an idle open stream took %v, want the window (%v)", d, window)
	}
	// The idle stream leaves mid-wait: the launch goes at once.
	m2 := newMerger(2, f.launch, time.Minute)
	m2.join()
	m2.join()
	done := make(chan error, 1)
	go func() { done <- m2.push(0, codesFrom(0, 1), make([]float32, 2)) }()
	time.Sleep(5 * time.Millisecond)
	m2.leave()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("push still waiting after the other stream left")
	}
}
