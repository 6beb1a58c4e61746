package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"talkbox/app/hub"
	"talkbox/engine/backend"
	"talkbox/engine/codec"
	"talkbox/engine/codesfile"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
	"talkbox/engine/wav"
	"talkbox/internal/atomicfile"
)

func init() {
	register(verb{name: "decode", summary: "decode a JSON file of codec frames to a WAV file (speech-tokenizer decoder)", run: runDecode})
}

func runDecode(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("decode", stderr)
	dir := fs.String("model", "", "model folder (with speech_tokenizer/) or installed name, or a speech-tokenizer folder")
	codesPath := fs.String("codes", "", `JSON file {"codes": [[16 ints], ...]}`)
	out := fs.String("out", "", "output WAV file")
	mode := fs.String("mode", "official", "official (chunked, equals the reference) or streaming (frame by frame, one continuous state)")
	format := fs.String("wav-format", "s16", "sample format: s16 or f32")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *codesPath == "" || *out == "" {
		return usageErrorf("--model, --codes FILE.json and --out FILE.wav are required")
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *mode != "official" && *mode != "streaming" {
		return usageErrorf("--mode %q: want official or streaming", *mode)
	}
	wf, err := wav.ParseFormat(*format)
	if err != nil {
		return usageErrorf("--wav-format: %v", err)
	}
	frames, err := codesfile.ReadFile(*codesPath)
	if err != nil {
		return err
	}
	modelDir, err := hub.Resolve(*dir)
	if err != nil {
		return err
	}
	dec, closeModel, err := openDecoder(modelDir)
	if err != nil {
		return err
	}
	defer closeModel()
	if err := dec.CheckCodes(frames); err != nil {
		return fmt.Errorf("%s: %w", *codesPath, err)
	}

	start := time.Now()
	// Through atomicfile: a failure or a signal leaves the user's file as it
	// was, never a header-only WAV over it.
	w, err := wav.Create(*out, dec.SampleRate(), wf)
	if err != nil {
		return err
	}
	defer w.Abort()
	ctx, stop := signalContext(context.Background())
	defer stop()
	if err := decodeInto(ctx, w, dec, frames, *mode); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %s left as it was", *out)
	}
	if err := w.Close(); err != nil {
		return err
	}
	if *out == atomicfile.Stdout {
		stdout = stderr // standard output carries the audio
	}
	fmt.Fprintf(stdout, "wrote %s: %d frames, %d samples at %d Hz (%s, %s mode) in %.0f ms\n",
		*out, len(frames), w.Samples(), dec.SampleRate(), wf, *mode, float64(time.Since(start).Microseconds())/1e3)
	return nil
}

// decodeInto writes the decoded audio: official mode in one call, streaming
// mode frame by frame as a live synthesis would.
func decodeInto(ctx context.Context, w *wav.Writer, dec *codec.Decoder, frames []backend.Codes, mode string) error {
	if mode == "official" {
		pcm, err := dec.DecodeOfficial(frames)
		if err != nil {
			return err
		}
		return w.Write(pcm)
	}
	s, err := dec.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	for i := range frames {
		if ctx.Err() != nil {
			return nil // the caller reports the interruption
		}
		pcm, err := s.Push(frames[i : i+1])
		if err != nil {
			return err
		}
		if err := w.Write(pcm); err != nil {
			return err
		}
	}
	return nil
}

// openDecoder accepts a full checkpoint (its speech_tokenizer/ is used) or a
// standalone speech-tokenizer directory such as Qwen3-TTS-Tokenizer-12Hz.
func openDecoder(dir string) (*codec.Decoder, func(), error) {
	if cfg, err := model.ReadCodecConfig(dir); err == nil {
		f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			return nil, nil, err
		}
		d, err := codec.NewFromFile(cfg, f)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return d, func() { f.Close() }, nil
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, model.ErrBadConfig) {
		return nil, nil, err
	}
	m, err := model.Load(dir, model.Options{RequireCodec: true})
	if err != nil {
		return nil, nil, err
	}
	d, err := codec.New(m)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return d, func() { m.Close() }, nil
}
