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
// stream around one graph launch (codes upload, decode, samples download).
type BenchResult struct {
	Device      string  `json:"device"`
	FramesPush  int     `json:"frames_per_push"`
	Pushes      int     `json:"pushes_timed"`
	Warmup      int     `json:"warmup_pushes"`
	FirstMS     float64 `json:"first_push_ms"` // includes the graph capture
	MedianMS    float64 `json:"median_push_ms"`
	P10MS       float64 `json:"p10_push_ms"`
	P90MS       float64 `json:"p90_push_ms"`
	MedianFrame float64 `json:"median_ms_per_frame"`
	RTF         float64 `json:"rtf"` // median time per frame / audio time per frame
}

// Bench decodes warmup+pushes pushes of framesPerPush random frames on a
// fresh stream and returns the event-timed statistics of the last pushes.
func Bench(c *Codec, framesPerPush, warmup, pushes int, seed uint64) (BenchResult, error) {
	if framesPerPush < 1 || pushes < 1 || warmup < 0 {
		return BenchResult{}, fmt.Errorf("cudacodec: bench: frames per push %d, pushes %d, warmup %d", framesPerPush, pushes, warmup)
	}
	s, err := c.newStream()
	if err != nil {
		return BenchResult{}, err
	}
	defer s.Close()
	iters := warmup + pushes
	r := rand.New(rand.NewPCG(seed, 3))
	codes := make([]backend.Codes, iters*framesPerPush)
	for i := range codes {
		for g := range codes[i] {
			codes[i][g] = int32(r.IntN(c.codebook))
		}
	}
	ms := make([]float32, iters)
	var e C.nl_err
	if C.nl_tbc_bench(s.s, (*C.int32_t)(unsafe.Pointer(&codes[0][0])), C.int(framesPerPush), C.int(iters),
		(*C.float)(unsafe.Pointer(&ms[0])), &e) != 0 {
		return BenchResult{}, fmt.Errorf("cudacodec: bench: %s", message(&e))
	}
	t := make([]float64, 0, pushes)
	for _, v := range ms[warmup:] {
		t = append(t, float64(v))
	}
	sort.Float64s(t)
	res := BenchResult{Device: c.device, FramesPush: framesPerPush, Pushes: pushes, Warmup: warmup,
		FirstMS: round4(float64(ms[0])), MedianMS: round4(t[len(t)/2]), P10MS: round4(t[len(t)/10]),
		P90MS: round4(t[len(t)*9/10])}
	res.MedianFrame = round4(res.MedianMS / float64(framesPerPush))
	res.RTF = round4(res.MedianFrame / (1000 * float64(c.spf) / float64(c.rate)))
	return res, nil
}

func round4(x float64) float64 { return float64(int64(x*1e4+0.5)) / 1e4 }
