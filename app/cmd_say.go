package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"talkbox/app/export"
	"talkbox/app/hub"
	"talkbox/engine"
	"talkbox/engine/audioenc"
	"talkbox/engine/backend"
	"talkbox/engine/codesfile"
	"talkbox/engine/cpu"
	"talkbox/engine/model"
	"talkbox/engine/sample"
	"talkbox/engine/wav"
	"talkbox/internal/atomicfile"
)

func init() {
	register(verb{name: "say", summary: "synthesise text (an argument, --file or stdin) to WAV, FLAC or Ogg Opus", run: runSay})
}

// stdin is what `say -` and `--file -` read; tests replace it.
var stdin io.Reader = os.Stdin

func runSay(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("say", stderr)
	modelFlag := fs.String("model", "", "model folder or installed name (default: the installed model)")
	voice := fs.String("voice", "", "preset voice (CustomVoice), e.g. ryan, or a cloned voice (Base; see talkbox voice)")
	lang := fs.String("lang", "auto", "language: auto or a name such as english")
	instruct := fs.String("instruct", "", "style (CustomVoice 1.7B) or voice description (VoiceDesign)")
	streamingText := fs.String("streaming-text", "", "prompt layout: true (text enters one token per frame) or false; default: the model's")
	greedy := fs.Bool("greedy", false, "argmax decoding instead of sampling")
	seed := fs.Uint64("seed", 0, "random seed (same seed, same audio)")
	frames := intFlag(fs, "frames", 0, 0, maxFrames, "until EOS", "generate exactly N frames per sentence, ignoring EOS (tests, benchmarks)")
	codesOut := fs.String("codes-out", "", "write the generated codes as JSON to this file")
	file := fs.String("file", "", "read the text from this file (- for standard input)")
	out := fs.String("out", "", "write the audio here: .wav, .flac, .ogg/.opus or .pcm (- for standard output, with --format)")
	formatName := fs.String("format", "", "audio format: "+strings.Join(audioenc.Formats(), ", ")+" (default: from --out's extension)")
	wavFormat := fs.String("wav-format", "s16", "WAV sample format: s16 or f32")
	backendName := fs.String("backend", engine.BackendAuto, "auto, cpu or cuda")
	threads := intFlag(fs, "threads", 0, 0, maxThreads, "all", "CPU threads (0 = all)")
	precision := fs.String("precision", "", "CPU weights: f32 (the reference) or int8 (default: "+string(cpu.DefaultPrecision)+")")
	officialRegex := fs.Bool("official-regex", false, "tokenize with the official loader's split regex")
	chunkFrames := intFlag(fs, "chunk-frames", 4, 1, 1024, "", "frames per PCM chunk after the first")
	whole := fs.Bool("whole", false, "send the text as one request instead of sentence by sentence (at most "+fmt.Sprint(engine.MaxTextRunes)+" characters; comparisons with the official implementation)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	text, err := sayText(*file, rest)
	if err != nil {
		return err
	}
	if *out == "" && *codesOut == "" {
		return usageErrorf("nothing to write: give --out FILE (.wav, .flac, .ogg) and/or --codes-out FILE.json")
	}
	if _, err := cpu.ParsePrecision(*precision); err != nil {
		return usageErrorf("--precision: %v", err)
	}
	job := export.Job{Path: *out}
	if *out != "" {
		if job.Format, err = sayFormat(*out, *formatName); err != nil {
			return err
		}
		wf, err := wav.ParseFormat(*wavFormat)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if wf != wav.S16 {
			if job.Format != audioenc.WAV {
				return usageErrorf("--wav-format %s applies to WAV output only", *wavFormat)
			}
			job.NewEncoder = func(w io.Writer, rate int) (audioenc.Encoder, error) { return wav.NewWriter(w, rate, wf) }
		}
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
	// Warnings only on stderr: why the GPU is not used (the engine says it
	// at info level) goes on the summary line's next line instead.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := engine.Open(ctx, dir, engine.Options{Backend: *backendName, Threads: *threads, Precision: *precision,
		OfficialRegex: *officialRegex, Logger: logger, WeightCache: engine.DefaultWeightCache()})
	if err != nil {
		return err
	}
	defer e.Close()
	if err := useClone(e, &req, stderr); err != nil {
		return err
	}
	if req.Voice == "" {
		if vs := e.Voices(); len(vs) > 0 {
			req.Voice = vs[0].Name // the model's first voice, as the window picks
		}
	}
	if strings.TrimSpace(req.Instruct) != "" && !e.SupportsInstruct() {
		return usageErrorf("--instruct: %s ignores it; %s take an instruct", e.ModelName(), model.InstructModels)
	}

	// The codes file is opened before any synthesis, so a bad path fails at
	// once; like the audio (export.Render) it goes through atomicfile, so a
	// failed or cancelled run leaves the user's files as they were.
	var codesW *atomicfile.File
	if *codesOut != "" {
		if codesW, err = atomicfile.Create(*codesOut, 0o644); err != nil {
			return err
		}
		defer codesW.Abort()
	}
	var codes []backend.Codes
	job.Engine, job.Request, job.SampleRate = e, req, e.SampleRate()
	job.Whole = *whole
	job.OnChunk = func(c engine.Chunk) { codes = append(codes, c.Codes...) }
	// The audio file is written atomically by export: a failed or cancelled
	// run never leaves a truncated file where the user expects one.
	res, err := export.Render(ctx, job)
	if err != nil {
		return err
	}
	if codesW != nil {
		if err := codesfile.Write(codesW, codes); err != nil {
			return err
		}
		if err := codesW.Commit(); err != nil {
			return err
		}
	}
	report := stdout
	if *out == atomicfile.Stdout || *codesOut == atomicfile.Stdout {
		report = stderr // standard output carries the data
	}
	printSayStats(report, res)
	if n := e.GPUNote(); n != "" {
		fmt.Fprintf(report, "GPU not used: %s\n", n)
	}
	return nil
}

// sayText is the text to speak: --file's contents, standard input for a
// lone "-" argument, else the arguments joined by spaces.
func sayText(file string, args []string) (string, error) {
	var b []byte
	var err error
	switch {
	case file != "" && len(args) > 0:
		return "", usageErrorf("give the text either with --file or as arguments, not both")
	case file == "-" || (file == "" && len(args) == 1 && args[0] == "-"):
		if b, err = readText(stdin, "standard input"); err != nil {
			return "", err
		}
	case file != "":
		// Not only regular files: <(command) is a pipe. The size bound
		// keeps /dev/zero or an endless pipe from growing without limit.
		f, err := os.Open(file)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if b, err = readText(f, file); err != nil {
			return "", err
		}
	default:
		b = []byte(strings.Join(args, " "))
	}
	text := string(b)
	if strings.TrimSpace(text) == "" {
		return "", usageErrorf("no text given: talkbox say [flags] TEXT, --file FILE, or - to read standard input")
	}
	return text, nil
}

// maxTextBytes bounds the text say reads from a file or standard input:
// hours of speech, far beyond any real script.
const maxTextBytes = 16 << 20

// readText reads all of r, up to maxTextBytes; name says where from.
func readText(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTextBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > maxTextBytes {
		return nil, fmt.Errorf("%s: more than %d MB of text; split it into several files", name, maxTextBytes>>20)
	}
	return b, nil
}

// sayFormat is --format when given, else the format --out's extension names.
func sayFormat(out, name string) (audioenc.Format, error) {
	if name != "" {
		f, err := audioenc.ParseFormat(name)
		if err != nil {
			return 0, usageErrorf("--format: %v", err)
		}
		return f, nil
	}
	if out == atomicfile.Stdout || filepath.Ext(out) == "" {
		return audioenc.WAV, nil // as before formats: /dev/null, a FIFO, "-"
	}
	f, err := audioenc.FormatFromPath(out)
	if err != nil {
		return 0, usageErrorf("--out: %v (or give --format)", err)
	}
	return f, nil
}

// printSayStats sums the sentences' figures. RTF is synthesis wall time over
// audio time: nothing waits on playback here.
func printSayStats(w io.Writer, res export.Result) {
	var frames int
	var lm, codec float64
	stopReason, device := "", ""
	for _, st := range res.Stats {
		frames += st.Frames
		lm += ms(st.LMPerFrame) * float64(st.Frames)
		codec += ms(st.CodecPerFrame) * float64(st.Frames)
		stopReason, device = string(st.Stop), st.Device
	}
	if frames > 0 {
		lm, codec = lm/float64(frames), codec/float64(frames)
	}
	ttfc := 0.0
	if len(res.Stats) > 0 {
		ttfc = ms(res.Stats[0].TTFC)
	}
	fmt.Fprintf(w, "%d frames in %d sentence(s) (%.2f s of audio, last stop: %s) on %s: TTFC %.1f ms, LM %.1f ms/frame, codec %.1f ms/frame, RTF %.3f\n",
		frames, res.Sentences, res.Audio.Seconds(), stopReason, device, ttfc, lm, codec, res.RTF)
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
