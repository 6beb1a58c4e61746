package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"talkbox/app/hub"
	"talkbox/engine"
	"talkbox/engine/backend"
	"talkbox/engine/codesfile"
	"talkbox/engine/sample"
	"talkbox/engine/wav"
	"talkbox/internal/atomicfile"
)

func init() {
	register(verb{name: "say", summary: "synthesise text to a WAV file (and/or a codes file)", run: runSay})
}

func runSay(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("say", stderr)
	modelFlag := fs.String("model", "", "model folder or installed name (default: the installed model)")
	voice := fs.String("voice", "", "preset voice (CustomVoice), e.g. ryan")
	lang := fs.String("lang", "auto", "language: auto or a name such as english")
	instruct := fs.String("instruct", "", "style (CustomVoice 1.7B) or voice description (VoiceDesign)")
	streamingText := fs.String("streaming-text", "", "prompt layout: true (text enters one token per frame) or false; default: the model's")
	greedy := fs.Bool("greedy", false, "argmax decoding instead of sampling")
	seed := fs.Uint64("seed", 0, "random seed (same seed, same audio)")
	frames := intFlag(fs, "frames", 0, 0, maxFrames, "until EOS", "generate exactly N frames, ignoring EOS (tests, benchmarks)")
	codesOut := fs.String("codes-out", "", "write the generated codes as JSON to this file")
	out := fs.String("out", "", "write the audio to this WAV file")
	wavFormat := fs.String("wav-format", "s16", "WAV sample format: s16 or f32")
	backendName := fs.String("backend", engine.BackendAuto, "auto, cpu or cuda")
	threads := intFlag(fs, "threads", 0, 0, maxThreads, "all", "CPU threads (0 = all)")
	officialRegex := fs.Bool("official-regex", false, "tokenize with the official loader's split regex")
	chunkFrames := intFlag(fs, "chunk-frames", 4, 1, 1024, "", "frames per PCM chunk after the first")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	text := strings.Join(rest, " ")
	if strings.TrimSpace(text) == "" {
		return usageErrorf("no text given: talkbox say --model DIR --voice NAME [flags] TEXT")
	}
	if *out == "" && *codesOut == "" {
		return usageErrorf("nothing to write: give --out FILE.wav and/or --codes-out FILE.json")
	}
	format, err := wav.ParseFormat(*wavFormat)
	if err != nil {
		return usageErrorf("%v", err)
	}
	req := engine.Request{Text: text, Voice: *voice, Language: *lang, Instruct: *instruct, Seed: *seed,
		ExactFrames: *frames, ChunkFrames: *chunkFrames}
	if *streamingText != "" {
		v, err := parseBool(*streamingText)
		if err != nil {
			return usageErrorf("--streaming-text: %v", err)
		}
		req.StreamingText = &v
	}
	if *greedy {
		g := sample.Greedy()
		req.Talker, req.Predictor = &g, &g
	}
	// Signals are caught from here on, so a stop during loading or synthesis
	// still runs the deferred clean-up below.
	ctx, stop := signalContext(context.Background())
	defer stop()
	dir, err := hub.Resolve(*modelFlag)
	if err != nil {
		return err
	}
	e, err := engine.Open(dir, engine.Options{Backend: *backendName, Threads: *threads, OfficialRegex: *officialRegex})
	if err != nil {
		return err
	}
	defer e.Close()

	// The outputs are opened before any synthesis, so a bad path (a
	// directory, a missing folder) fails at once; both go through atomicfile,
	// so a failed or cancelled run leaves the user's files as they were.
	var w *wav.Writer
	if *out != "" {
		if w, err = wav.Create(*out, e.SampleRate(), format); err != nil {
			return err
		}
		defer w.Abort()
	}
	var codesW *atomicfile.File
	if *codesOut != "" {
		if codesW, err = atomicfile.Create(*codesOut, 0o644); err != nil {
			return err
		}
		defer codesW.Abort()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks, err := e.Synthesize(ctx, req)
	if err != nil {
		return err
	}
	var write func([]float32) error
	if w != nil {
		write = w.Write
	}
	codes, final, writeErr := consume(chunks, write, cancel)
	if writeErr != nil {
		if final.Stats != nil {
			return fmt.Errorf("%w; synthesis stopped after %d%s frames", writeErr, final.Stats.Frames, planned(req))
		}
		return writeErr
	}
	if final.Err != nil {
		return final.Err
	}
	if w != nil {
		if err := w.Close(); err != nil {
			return err
		}
	}
	if codesW != nil {
		if err := codesfile.Write(codesW, codes); err != nil {
			return err
		}
		if err := codesW.Commit(); err != nil {
			return err
		}
	}
	st := final.Stats
	if *out == atomicfile.Stdout || *codesOut == atomicfile.Stdout {
		stdout = stderr // standard output carries the data
	}
	fmt.Fprintf(stdout, "%d frames (%.2f s of audio, stop: %s) on %s: TTFC %.1f ms, LM %.1f ms/frame, codec %.1f ms/frame, RTF %.3f\n",
		st.Frames, st.AudioSeconds, st.Stop, st.Device, ms(st.TTFC), ms(st.LMPerFrame), ms(st.CodecPerFrame), st.RTF)
	return nil
}

// consume reads an utterance's chunks to the end, collecting the codes and
// handing the PCM to write (when not nil). The first write error cancels the
// synthesis at once (a full disk must not wait for the last frame); the rest
// of the stream is still drained so the engine finishes cleanly.
func consume(chunks <-chan engine.Chunk, write func([]float32) error, cancel func()) ([]backend.Codes, engine.Chunk, error) {
	var codes []backend.Codes
	var final engine.Chunk
	var writeErr error
	for c := range chunks {
		if c.Final {
			final = c
			continue
		}
		codes = append(codes, c.Codes...)
		if write != nil && writeErr == nil {
			if writeErr = write(c.PCM); writeErr != nil {
				cancel()
			}
		}
	}
	return codes, final, writeErr
}

// planned says how many frames the request asked for, for messages.
func planned(req engine.Request) string {
	if req.ExactFrames > 0 {
		return " of " + strconv.Itoa(req.ExactFrames)
	}
	return ""
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true or false, got %q", s)
}
