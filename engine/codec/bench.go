package codec

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/cores"
	"talkbox/engine/model"
)

// BenchResult is what BenchStreaming measures; it marshals to the JSON the
// bench verb prints.
type BenchResult struct {
	Frames       int     `json:"frames"`
	Threads      int     `json:"threads"`
	FirstFrameMS float64 `json:"first_frame_ms"` // includes scratch warm-up
	MedianMS     float64 `json:"median_frame_ms"`
	MeanMS       float64 `json:"mean_frame_ms"` // frames after the first
	RTF          float64 `json:"rtf"`           // median / 80 ms of audio per frame
	// StageMS is the mean time per frame of each stage (frames after the
	// first), in pipeline order in StageOrder.
	StageMS    map[string]float64 `json:"stage_ms"`
	StageOrder []string           `json:"stage_order"`
}

// BenchStreaming decodes frames random frames one push at a time on a fresh
// stream and times every push and every stage.
func BenchStreaming(d *Decoder, frames int, seed uint64) BenchResult {
	r := rand.New(rand.NewPCG(seed, 1))
	s := d.newStream()
	stage := map[string]time.Duration{}
	var order []string
	seen := map[string]bool{}
	var last time.Time
	s.trace = func(name string, _ []float32, _, _ int) {
		now := time.Now()
		if !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
		stage[name] += now.Sub(last)
		last = now
	}
	var per []float64
	res := BenchResult{Frames: frames, Threads: cores.Limit(), StageMS: map[string]float64{}}
	for f := 0; f < frames; f++ {
		var c backend.Codes
		for g := range c {
			c[g] = int32(r.IntN(d.cfg.CodebookSize))
		}
		start := time.Now()
		last = start
		s.forward([]backend.Codes{c})
		el := time.Since(start)
		if f == 0 {
			res.FirstFrameMS = ms(el)
			clear(stage) // keep the order, drop the warm-up times
			continue
		}
		per = append(per, ms(el))
	}
	if len(per) == 0 {
		return res
	}
	sort.Float64s(per)
	res.MedianMS = per[len(per)/2]
	for _, p := range per {
		res.MeanMS += p / float64(len(per))
	}
	res.RTF = res.MedianMS / (1000 * float64(d.spf) / float64(d.sampleRate))
	for _, name := range order {
		res.StageMS[name] = round3(ms(stage[name]) / float64(len(per)))
	}
	res.StageOrder = order
	res.FirstFrameMS, res.MedianMS, res.MeanMS, res.RTF = round3(res.FirstFrameMS), round3(res.MedianMS), round3(res.MeanMS), round3(res.RTF)
	return res
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
func round3(x float64) float64   { return math.Round(x*1000) / 1000 }

// NewSynthetic builds a decoder of the given config with random weights
// (no file), for speed measurements at the released shapes without the
// weights. Scales follow the golden checkpoints' recipe (weights N-like with
// variance 1/fan_in, residual-unit convs halved, norms near 1, SnakeBeta
// log-parameters near 0) so activations stay finite and representative.
// Random weights do not speak.
func NewSynthetic(cfg *model.CodecConfig, seed uint64) (*Decoder, error) {
	var mu sync.Mutex
	idx := uint64(0)
	src := func(name string, shape ...int) ([]float32, error) {
		mu.Lock()
		idx++
		r := rand.New(rand.NewPCG(seed, idx))
		mu.Unlock()
		v := make([]float32, prod(shape))
		center, spread := synthScale(name, shape)
		for i := range v {
			v[i] = float32(center + spread*(2*r.Float64()-1))
		}
		return v, nil
	}
	return newDecoder(cfg, src)
}

// synthScale gives the centre and half-width of a uniform distribution.
func synthScale(name string, shape []int) (center, half float64) {
	switch {
	case strings.HasSuffix(name, "cluster_usage"):
		return 1, 0.5
	case strings.HasSuffix(name, ".alpha"), strings.HasSuffix(name, ".beta"):
		return 0, 0.17
	case strings.HasSuffix(name, "norm.weight"):
		return 1, 0.17
	case strings.HasSuffix(name, "scale.scale"), strings.HasSuffix(name, "gamma"):
		return 0.1, 0.035
	case strings.HasSuffix(name, "bias"):
		return 0, 0.087
	case strings.HasSuffix(name, "embedding_sum"):
		return 0, math.Sqrt(3)
	}
	fanIn := prod(shape[1:])
	if strings.Contains(name, "conv.weight") && len(shape) == 3 && !strings.Contains(name, "block.1.") &&
		!strings.Contains(name, "pre_conv") && !strings.Contains(name, "dwconv") {
		fanIn = shape[1] * shape[2]
	}
	h := math.Sqrt(3 / float64(fanIn))
	if strings.Contains(name, ".conv1.") || strings.Contains(name, ".conv2.") {
		h *= 0.5
	}
	return 0, h
}
