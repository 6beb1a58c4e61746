// Package cpu is the reference CPU engine: the Qwen3-TTS talker, the code
// predictor and the streaming frame loop in float32, with OpenBLAS for the
// matrix products (pure Go with -tags noblas). It implements backend.LM and is
// what the CUDA engine is checked against.
package cpu

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/cores"
	"talkbox/engine/linalg"
	"talkbox/engine/model"
	"talkbox/engine/qkernels"
	"talkbox/engine/sample"
)

// numPredicted is the number of code groups the code predictor produces (1..15).
const numPredicted = backend.NumGroups - 1

// Options configure the CPU engine.
type Options struct {
	Threads int // matrix-product threads; 0 = every core engine/cores computes on
	// MaxPositions bounds the KV cache (prefill + frames); 0 means
	// backend.Positions' default. The cache grows as it is used.
	MaxPositions int
	// Precision of the weight matrices; "" = DefaultPrecision (int8).
	Precision Precision
	// CacheDir, when set, keeps the Int8 matrices in a file there between
	// runs (engine/qcache), so a later load skips quantizing; "" = no cache.
	CacheDir string
	// pureGo forces the Go kernels (tests compare them with OpenBLAS).
	pureGo bool
}

// LM is the CPU language model. Generate calls are serialised.
type LM struct {
	mu      sync.Mutex
	k       prods
	threads int
	prec    Precision

	spec backend.Spec // limits, group-0 rules and the default frame cap

	talker     *stack
	codecEmb   *linalg.Matrix // talker codec embedding C, [vocab, H]
	codecHead  *weight        // [vocab, H]
	cp         *stack
	cpEmb      [numPredicted]*linalg.Matrix // E_{g+1}, [cpVocab, H]
	lmHead     [numPredicted]*weight        // [cpVocab, cpHidden]
	cpProj     *weight                      // small_to_mtp_projection; nil = identity (0.6B)
	cpProjBias []float32

	talkerCache, cpCache *kvCache
	cache                CacheInfo
	talkerWS, cpWS       workspace
	sampler              sample.Sampler
	history              *sample.History
	steps                StepTimes
}

// StepTimes are the timings of the last Generate call, for the bench verb.
type StepTimes struct {
	Talker    []time.Duration // each talker decode step (one position through the talker + codec head)
	Predictor []time.Duration // each frame's code predictor pass (15 groups)
}

// New converts the LM weights of m to float32 (once) and returns the engine.
// m stays owned by the caller; the LM keeps no reference to its mapping.
func New(m *model.Model, opt Options) (*LM, error) {
	if m == nil || m.Config == nil || m.LM == nil {
		return nil, errors.New("cpu: no model loaded")
	}
	spec, err := backend.NewSpec(m, opt.MaxPositions)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	threads := opt.Threads
	if threads <= 0 {
		threads = cores.Limit()
	}
	prec, err := ParsePrecision(string(opt.Precision))
	if err != nil {
		return nil, err
	}
	lm := &LM{threads: threads, spec: spec, prec: prec}
	lm.k.threads = threads
	if opt.pureGo {
		lm.k.f = linalg.NewGo(threads)
	} else {
		lm.k.f = linalg.New(threads)
	}
	if prec == Int8 {
		if lm.k.q, err = qkernels.New(qkernels.Best(), threads); err != nil {
			return nil, err
		}
	}
	if err := lm.loadWeights(m, opt.CacheDir); err != nil {
		return nil, err
	}
	lm.talkerCache = newKVCache(len(lm.talker.layers))
	lm.cpCache = newKVCache(len(lm.cp.layers))
	lm.history = sample.NewHistory(spec.Vocab)
	return lm, nil
}

// Device describes where the engine runs.
func (lm *LM) Device() string {
	return fmt.Sprintf("CPU (%d threads, %s)", lm.threads, lm.k.name())
}

// WeightCache says what the int8 weight cache did when the LM loaded.
func (lm *LM) WeightCache() CacheInfo { return lm.cache }

// Spec is the checkpoint's limits and rules the LM runs with.
func (lm *LM) Spec() backend.Spec { return lm.spec }

// Close releases the weights.
func (lm *LM) Close() error {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.talker, lm.cp, lm.codecEmb, lm.codecHead, lm.cpProj = nil, nil, nil, nil, nil
	lm.cpEmb, lm.lmHead = [numPredicted]*linalg.Matrix{}, [numPredicted]*weight{}
	return nil
}

// LastStepTimes returns the step timings of the last Generate call.
func (lm *LM) LastStepTimes() StepTimes {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	return StepTimes{Talker: append([]time.Duration(nil), lm.steps.Talker...), Predictor: append([]time.Duration(nil), lm.steps.Predictor...)}
}

// ErrBadPrompt and ErrBadOptions are wrapped by validation errors (the
// backend contract's, shared with the CUDA engine).
var (
	ErrBadPrompt  = backend.ErrBadPrompt
	ErrBadOptions = backend.ErrBadOptions
)
