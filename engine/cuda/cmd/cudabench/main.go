// Command cudabench times the CUDA engine on a synthetic checkpoint of the
// real shapes (random weights: speed only, it does not speak) and prints JSON:
// talker step, code-predictor step, whole frame and prefill, as medians of
// CUDA-event timings after warm-up, plus an optional long stability run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/cuda"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

type stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ms"`
	P10    float64 `json:"p10_ms"`
	P90    float64 `json:"p90_ms"`
	Min    float64 `json:"min_ms"`
}

func summarise(ms []float32, skip int) stat {
	v := append([]float32(nil), ms[min(skip, len(ms)-1):]...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	q := func(f float64) float64 { return float64(v[int(f*float64(len(v)-1))]) }
	return stat{N: len(v), Median: q(0.5), P10: q(0.1), P90: q(0.9), Min: float64(v[0])}
}

func main() {
	dir := flag.String("model", "", "checkpoint directory; written as a synthetic one when it has no config.json")
	size := flag.String("size", "0.6b", "synthetic checkpoint size")
	iters := flag.Int("iters", 200, "timed launches per measurement (the first 20 are warm-up)")
	promptRows := flag.Int("prompt", 40, "prefill rows")
	stability := flag.Int("stability", 0, "frames of one long sampled utterance to run (0: skip)")
	flag.Parse()
	if err := run(*dir, *size, *iters, *promptRows, *stability); err != nil {
		fmt.Fprintln(os.Stderr, "cudabench:", err)
		os.Exit(1)
	}
}

func run(dir, size string, iters, promptRows, stability int) error {
	if dir == "" {
		return fmt.Errorf("-model DIR is required")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t0 := time.Now()
		if err := model.WriteSynthetic(dir, model.SynthOptions{Size: size, Seed: 1}); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote synthetic %s checkpoint in %.1fs\n", size, time.Since(t0).Seconds())
	}
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	t0 := time.Now()
	lm, err := cuda.NewLM(m, cuda.Options{MaxPositions: promptRows + max(stability, iters) + 64})
	if err != nil {
		return err
	}
	defer lm.Close()
	load := time.Since(t0)
	grid, threads, smem, tpp := lm.Geometry()
	H := m.Config.Talker.HiddenSize
	p := cuda.SyntheticPrompt(H, promptRows, 8, 42)
	st := sample.Params{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 1, RepetitionPenalty: 1.05}
	sp := sample.Params{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 1, RepetitionPenalty: 1}
	res := map[string]any{"device": lm.Device(), "library": cuda.LibraryPath(), "model": m.Config.SizeName(),
		"grid": grid, "threads": threads, "smem_bytes": smem, "prefill_tokens_per_pass": tpp,
		"load_and_warmup_s": load.Seconds(), "prompt_rows": promptRows}
	for _, b := range []struct {
		name string
		kind cuda.BenchKind
		n    int
	}{
		{"talker_step", cuda.BenchTalkerStep, iters},
		{"predictor_step", cuda.BenchPredictorStep, iters},
		{"frame", cuda.BenchFrame, iters},
		{"prefill", cuda.BenchPrefill, min(iters, 100)},
	} {
		ms, err := lm.Bench(p, st, sp, b.kind, b.n+20)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		res[b.name] = summarise(ms, 20)
	}
	// Greedy frames too (the parity path).
	if ms, err := lm.Bench(p, sample.Greedy(), sample.Greedy(), cuda.BenchFrame, iters+20); err == nil {
		res["frame_greedy"] = summarise(ms, 20)
	} else {
		return err
	}
	if stability > 0 {
		out := make(chan backend.Frame, 256)
		bad := 0
		done := make(chan int)
		go func() {
			n := 0
			for f := range out {
				n++
				for g, c := range f.Codes {
					if c < 0 || c >= 2048 || (g == 0 && c == int32(m.Config.Talker.CodecEosID)) {
						bad++
					}
				}
			}
			done <- n
		}()
		t1 := time.Now()
		r, err := lm.Generate(context.Background(), p, backend.GenerateOptions{Talker: st, Predictor: sp, ExactFrames: stability, Seed: 5}, out)
		close(out)
		n := <-done
		if err != nil {
			return fmt.Errorf("stability: %w", err)
		}
		wall := time.Since(t1)
		res["stability"] = map[string]any{"frames": n, "stop": r.Stop, "bad_codes": bad, "wall_s": wall.Seconds(),
			"mean_frame_ms": wall.Seconds() * 1000 / float64(n)}
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	return nil
}
