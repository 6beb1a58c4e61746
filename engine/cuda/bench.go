package cuda

/*
#include "loader.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"talkbox/engine/backend"
	"talkbox/engine/sample"
)

// BenchKind selects what Bench times.
type BenchKind int

const (
	BenchTalkerStep    BenchKind = C.TB_BENCH_TALKER_STEP    // one talker step (28 layers, head, sampling)
	BenchPredictorStep BenchKind = C.TB_BENCH_PREDICTOR_STEP // one code-predictor step (5 layers, head, sampling)
	BenchFrame         BenchKind = C.TB_BENCH_FRAME          // 15 predictor steps + embedding + talker step
	BenchPrefill       BenchKind = C.TB_BENCH_PREFILL        // the batched prefill of the prompt
)

// Bench prefills p with the given samplers, then times iters launches of one
// kind with CUDA events and returns milliseconds per launch. Frames advance
// the position; the other kinds repeat at the position after the prefill.
func (lm *LM) Bench(p backend.Prompt, talker, predictor sample.Params, kind BenchKind, iters int) ([]float32, error) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.e == nil {
		return nil, errors.New("cuda: Bench on a closed LM")
	}
	if iters <= 0 {
		return nil, fmt.Errorf("cuda: bench needs iters > 0, got %d", iters)
	}
	if err := lm.spec.Validate(p, backend.GenerateOptions{Talker: talker, Predictor: predictor}); err != nil {
		return nil, err
	}
	var ce C.nl_err
	ts, ps := cSampler(talker), cSampler(predictor)
	if C.nl_tb_set_sampling(lm.e, &ts, &ps, 1, 1, &ce) != 0 {
		return nil, failed("sampling", &ce)
	}
	if _, err := lm.prefill(p); err != nil {
		return nil, err
	}
	ms := make([]float32, iters)
	if C.nl_tb_bench(lm.e, C.int(kind), C.int(iters), (*C.float)(unsafe.Pointer(&ms[0])), &ce) != 0 {
		return nil, failed("bench", &ce)
	}
	return ms, nil
}

// SyntheticPrompt makes a deterministic prompt of finite rows for benchmarks
// (random weights: it means nothing, it only has the right shape).
func SyntheticPrompt(hidden, rows, trailing int, seed uint64) backend.Prompt {
	return syntheticPrompt(hidden, rows, trailing, seed)
}
