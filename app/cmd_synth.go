package main

import (
	"fmt"
	"io"
	"time"

	"talkbox/engine/model"
)

func init() {
	register(verb{name: "synth", summary: "write a synthetic checkpoint (real shapes, random weights) for benchmarks", run: runSynth})
}

func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("synth", stderr)
	size := fs.String("size", "0.6b", "model size: 0.6b or 1.7b")
	typ := fs.String("type", model.TypeCustomVoice, "model type: custom_voice, voice_design or base")
	out := fs.String("out", "", "output directory (required)")
	seed := fs.Uint64("seed", 1, "random seed")
	codec := fs.Bool("codec", true, "also write speech_tokenizer/ with the real decoder shapes")
	tok := fs.String("tokenizer-from", "", "copy vocab.json, merges.txt and tokenizer_config.json from this checkpoint")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageErrorf("--out DIR is required")
	}
	start := time.Now()
	err := model.WriteSynthetic(*out, model.SynthOptions{Size: *size, Type: *typ, Seed: *seed, Codec: *codec, TokenizerFrom: *tok})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote synthetic %s %s checkpoint to %s in %.1fs (random weights: benchmarks only, it does not speak)\n",
		*size, *typ, *out, time.Since(start).Seconds())
	return nil
}
