// Command codecbench measures streaming decode speed of the speech-tokenizer
// decoder at the released shapes with random weights (or of a checkpoint's
// real decoder with --model) and prints one JSON object. It stands in until
// the bench verb reports codec figures through codec.BenchStreaming.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"talkbox/engine/codec"
	"talkbox/engine/model"
)

func main() {
	dir := flag.String("model", "", "checkpoint directory (default: random weights at the released shapes)")
	frames := flag.Int("frames", 20, "frames to decode, one push each (the first is a warm-up)")
	threads := flag.Int("threads", 0, "GOMAXPROCS (0 = all CPUs)")
	flag.Parse()
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	start := time.Now()
	var d *codec.Decoder
	var err error
	source := "synthetic (released shapes, random weights)"
	if *dir != "" {
		var m *model.Model
		if m, err = model.Load(*dir, model.Options{RequireCodec: true}); err == nil {
			d, err = codec.New(m)
			source = *dir
		}
	} else {
		d, err = codec.NewSynthetic(model.SynthCodecConfig(), 1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "codecbench:", err)
		os.Exit(1)
	}
	load := time.Since(start)
	res := codec.BenchStreaming(d, *frames, 7)
	out := struct {
		Source string  `json:"source"`
		LoadMS float64 `json:"load_ms"`
		codec.BenchResult
	}{source, float64(load.Milliseconds()), res}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(b))
}
