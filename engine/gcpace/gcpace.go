// Package gcpace bounds how much garbage the Go heap may gather between
// collections once a model is loaded.
//
// Go collects when the heap has grown by GOGC percent (default 100) of what
// the last collection found live. On the CPU backend the live heap is mostly
// model weights (int8 LM matrices, the codec's packed float32 weights: about
// a gigabyte for the 0.6B model, none of it holding pointers), so the default
// lets that much garbage pile up before anything is reused. Every codec push
// then writes its temporaries into pages fresh from the kernel: in the
// end-to-end CPU run on the 2-core dev VM, zeroing those pages on first touch
// was 18% of all CPU time and the codec ran at 265 ms a frame beside the LM
// instead of 181 ms (docs/dev/cpu-int8.md). Collections over a heap of
// pointer-free weights are cheap (nothing in them is scanned), so the
// allowance is set to a fixed size instead of a fraction of the weights.
package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Allowance is the garbage the heap may gather between collections: room
// for a long utterance's temporaries, far below a model's weights.
const Allowance = 256 << 20

// Percent is the GOGC percentage that gives allowance bytes of growth over
// a live heap of live bytes, within [minPercent, 100]: never above Go's
// default, which already suits a small heap.
func Percent(live, allowance uint64) int {
	const minPercent = 10
	if live == 0 {
		return 100
	}
	p := allowance * 100 / live
	return int(min(max(p, minPercent), 100))
}

// Fit sets the collector's percentage for the heap as it is now (engine.Open
// calls it once the model is loaded) and returns the percentage it set, or
// -1 when GOGC is set in the environment, which wins.
func Fit() int { return fit(Allowance) }

func fit(allowance uint64) int {
	if os.Getenv("GOGC") != "" {
		return -1
	}
	runtime.GC() // measure the heap as loaded, not as of the last cycle
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var live uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	p := Percent(live, allowance)
	debug.SetGCPercent(p)
	return p
}
