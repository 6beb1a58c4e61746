package cudacodec

/*
#include "loader.h"
*/
import "C"

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"unsafe"

	"talkbox/engine/backend"
)

// BenchResult is what Bench measures; it marshals to the JSON the bench
// command prints. Times are per push, from CUDA events recorded on the
// pool's stream around one graph launch (codes upload, decode, samples
// download); a push decodes FramesPush frames for each of Streams streams.
type BenchResult struct {
	Device      string  `json:"device"`
	Streams     int     `json:"streams"`
	FramesPush  int     `json:"frames_per_push"`
	Pushes      int     `json:"pushes_timed"`
	Warmup      int     `json:"warmup_pushes"`
	FirstMS     float64 `json:"first_push_ms"`
	MedianMS    float64 `json:"median_push_ms"`
	P10MS       float64 `json:"p10_push_ms"`
	P90MS       float64 `json:"p90_push_ms"`
	MedianFrame float64 `json:"median_ms_per_frame"` // median push / (streams · frames per push)
	RTF         float64 `json:"rtf"`                 // per stream: median push / audio time of its frames
	AudioPerSec float64 `json:"audio_s_per_s"`       // seconds of audio all streams get per second of GPU time
}

// Bench decodes warmup+pushes pushes of framesPerPush random frames for
// each of `streams` streams of a fresh pool (its graphs captured first) and
// returns the event-timed statistics of the last pushes.
func Bench(c *Codec, streams, framesPerPush, warmup, pushes int, seed uint64) (BenchResult, error) {
	if streams < 1 || framesPerPush < 1 || framesPerPush > maxPushFrames || pushes < 1 || warmup < 0 {
		return BenchResult{}, fmt.Errorf("cudacodec: bench: streams %d, frames per push %d (1..%d), pushes %d, warmup %d",
			streams, framesPerPush, maxPushFrames, pushes, warmup)
	}
	c.mu.Lock()
	if c.m == nil || c.closing {
		c.mu.Unlock()
		return BenchResult{}, ErrClosed
	}
	p, err := c.newPool(streams)
	c.mu.Unlock()
	if err != nil {
		return BenchResult{}, err
	}
	defer p.destroy()
	if err := p.warm(); err != nil {
		return BenchResult{}, err
	}
	iters := warmup + pushes
	r := rand.New(rand.NewPCG(seed, 3))
	codes := make([]backend.Codes, iters*streams*framesPerPush)
	for i := range codes {
		for g := range codes[i] {
			codes[i][g] = int32(r.IntN(c.codebook))
		}
	}
	ms := make([]float32, iters)
	var e C.nl_err
	if C.nl_tbc_pool_bench(p.p, C.int(streams), (*C.int32_t)(unsafe.Pointer(&codes[0][0])), C.int(framesPerPush),
		C.int(iters), (*C.float)(unsafe.Pointer(&ms[0])), &e) != 0 {
		return BenchResult{}, fmt.Errorf("cudacodec: bench: %s", message(&e))
	}
	t := make([]float64, 0, pushes)
	for _, v := range ms[warmup:] {
		t = append(t, float64(v))
	}
	sort.Float64s(t)
	res := BenchResult{Device: c.device, Streams: streams, FramesPush: framesPerPush, Pushes: pushes, Warmup: warmup,
		FirstMS: round4(float64(ms[0])), MedianMS: round4(t[len(t)/2]), P10MS: round4(t[len(t)/10]),
		P90MS: round4(t[len(t)*9/10])}
	audioMS := float64(framesPerPush) * 1000 * float64(c.spf) / float64(c.rate)
	res.MedianFrame = round4(res.MedianMS / float64(framesPerPush*streams))
	res.RTF = round4(res.MedianMS / audioMS)
	res.AudioPerSec = round4(float64(streams) * audioMS / res.MedianMS)
	return res, nil
}

func round4(x float64) float64 { return float64(int64(x*1e4+0.5)) / 1e4 }
