package cudacodec

/*
#include "loader.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"talkbox/engine/backend"
)

// maxPushFrames is the most frames a pool's graphs decode in one launch
// (talkbox_codec.h); a longer push takes several.
const maxPushFrames = 8

// pool is one tbc_pool: the state of Codec.slots streams, and the goroutine
// that merges their pushes into launches.
type pool struct {
	c    *Codec
	p    *C.tbc_pool
	free []int // slots no stream holds (Codec.mu)
	// mu serialises the native calls on p: the merger's launches and resets.
	mu     sync.Mutex
	merger *merger
}

// newPool allocates a pool of n slots and starts its merger.
func (c *Codec) newPool(n int) (*pool, error) {
	var e C.nl_err
	tp := C.nl_tbc_pool_create(c.m, C.int(n), &e)
	if tp == nil {
		return nil, fmt.Errorf("cudacodec: state for %d streams on %s: %s", n, c.device, message(&e))
	}
	p := &pool{c: c, p: tp}
	for i := n - 1; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	p.merger = newMerger(c.spf, p.launch, gatherWait)
	return p, nil
}

// warm captures the graph of every push size the pool can run, so that no
// launch in a stream captures one.
func (p *pool) warm() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e C.nl_err
	for t := 1; t <= maxPushFrames; t++ {
		if C.nl_tbc_pool_warm(p.p, C.int(t), &e) != 0 {
			return fmt.Errorf("cudacodec: capturing the decoder's graphs: %s", message(&e))
		}
	}
	return nil
}

// launch is the merger's one native call: frames [n][T] of codes for the
// streams in slots, samples into out [n][T·spf].
func (p *pool) launch(slots []int32, codes []backend.Codes, T int, out []float32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e C.nl_err
	// backend.Codes is [16]int32, so the frames are one contiguous int32 array.
	if C.nl_tbc_pool_push(p.p, (*C.int32_t)(unsafe.Pointer(&slots[0])), C.int(len(slots)),
		(*C.int32_t)(unsafe.Pointer(&codes[0][0])), C.int(T), (*C.float)(unsafe.Pointer(&out[0])), &e) != 0 {
		return fmt.Errorf("%s", message(&e))
	}
	return nil
}

func (p *pool) reset(slot int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e C.nl_err
	if C.nl_tbc_pool_reset(p.p, C.int(slot), &e) != 0 {
		return fmt.Errorf("cudacodec: reset: %s", message(&e))
	}
	return nil
}

// destroy stops the merger and frees the pool (no stream may use it).
func (p *pool) destroy() {
	p.merger.stop()
	p.mu.Lock()
	C.nl_tbc_pool_destroy(p.p)
	p.p = nil
	p.mu.Unlock()
}
