// Command cudacodecbench measures the GPU codec's streaming decode at the
// released shapes with random weights (codec.NewSynthetic; random weights do
// not speak) and prints one JSON object: CUDA-event times per push of 1 and
// of 8 frames through the captured graphs, the same without graphs, and the
// wall time of Stream.Push as the pipeline sees it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/codec"
	"talkbox/engine/cudacodec"
	"talkbox/engine/model"
)

func main() {
	pushes := flag.Int("pushes", 200, "timed pushes per configuration")
	warmup := flag.Int("warmup", 20, "untimed pushes first")
	profile := flag.Bool("profile", false, "only decode 4 single-frame pushes without graphs (for a kernel profiler)")
	flag.Parse()
	if *profile {
		*pushes, *warmup = 0, 0
	}
	if err := run(*pushes, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "cudacodecbench:", err)
		os.Exit(1)
	}
}

func run(pushes, warmup int) error {
	t0 := time.Now()
	d, err := codec.NewSynthetic(model.SynthCodecConfig(), 1)
	if err != nil {
		return err
	}
	synth := time.Since(t0)
	t0 = time.Now()
	c, err := cudacodec.New(d)
	if err != nil {
		return err
	}
	defer c.Close()
	upload := time.Since(t0)
	if pushes == 0 {
		os.Setenv("TALKBOX_CODEC_NO_GRAPH", "1")
		_, err := wallPush(c, 1, 3)
		return err
	}

	out := map[string]any{"source": "synthetic (released shapes, random weights)", "device": c.Device(),
		"library": cudacodec.LibraryPath(), "synth_ms": synth.Milliseconds(), "upload_ms": upload.Milliseconds()}
	for _, cfg := range []struct {
		name  string
		push  int
		graph bool
	}{{"graph_push1", 1, true}, {"graph_push8", 8, true}, {"eager_push1", 1, false}} {
		if !cfg.graph {
			os.Setenv("TALKBOX_CODEC_NO_GRAPH", "1")
		}
		n := pushes
		if cfg.push > 1 || !cfg.graph {
			n = max(50, pushes/4)
		}
		r, err := cudacodec.Bench(c, cfg.push, warmup, n, 11)
		os.Unsetenv("TALKBOX_CODEC_NO_GRAPH")
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.name, err)
		}
		out[cfg.name] = r
	}
	wall, err := wallPush(c, pushes, warmup)
	if err != nil {
		return err
	}
	out["wall_push1_median_ms"] = wall
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(b))
	return nil
}

// wallPush times Stream.Push of one frame with the host clock: the graph
// launch, the wait, and the copy into a new Go slice.
func wallPush(c *cudacodec.Codec, pushes, warmup int) (float64, error) {
	cs, err := c.NewStream()
	if err != nil {
		return 0, err
	}
	defer cs.Close()
	r := rand.New(rand.NewPCG(5, 5))
	var t []float64
	for i := 0; i < warmup+pushes; i++ {
		var fr backend.Codes
		for g := range fr {
			fr[g] = int32(r.IntN(2048))
		}
		start := time.Now()
		if _, err := cs.Push([]backend.Codes{fr}); err != nil {
			return 0, err
		}
		if i >= warmup {
			t = append(t, float64(time.Since(start).Microseconds())/1000)
		}
	}
	sort.Float64s(t)
	return t[len(t)/2], nil
}
