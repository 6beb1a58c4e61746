// Package engine runs the Talkbox pipeline: text -> tokens -> prefill rows ->
// frames (16 codes) -> PCM chunks. It picks a backend for the language model
// (cpu or cuda) and owns nothing of the UI.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"talkbox/engine/backend"
	"talkbox/engine/codec"
	"talkbox/engine/cpu"
	"talkbox/engine/cuda"
	"talkbox/engine/cudacodec"
	"talkbox/engine/gcpace"
	"talkbox/engine/model"
	"talkbox/engine/prompt"
	"talkbox/engine/sample"
	"talkbox/engine/text"
	"talkbox/engine/voice"
	"talkbox/internal/errtext"
)

// Backend names for Options.Backend.
const (
	BackendAuto = "auto"
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
)

// Options configure Open.
type Options struct {
	Backend string // auto (default), cpu or cuda
	Threads int    // CPU threads; 0 = all
	// Precision of the CPU engine's weights: "f32" (the exact reference) or
	// "int8"; "" is cpu.DefaultPrecision. The GPU engine ignores it.
	Precision     string
	OfficialRegex bool // tokenize with the official loader's split regex
	Logger        *slog.Logger
	// Streams > 1 lets that many utterances run at once on the GPU, decoding
	// together in one batch (cuda.Batcher, continuous batching); one that
	// runs alone takes the single-stream engine (lmRoute). Ignored on the
	// CPU.
	Streams int
	// WeightCache is a folder where the CPU engine keeps its int8 matrices
	// between runs (engine/qcache; DefaultWeightCache is the usual one);
	// "" quantizes at every load.
	WeightCache string
}

// Voice is one preset speaker of a CustomVoice model.
type Voice struct {
	Name        string
	Description string // empty: the UI describes voices itself
	Dialect     string // e.g. "sichuan_dialect"; empty for standard speech
}

// Engine is an opened model ready to synthesise. Synthesize calls are
// serialised: a new call waits for the previous utterance to finish, so
// callers that want to interrupt cancel the old context first.
type Engine struct {
	model   *model.Model
	tok     *text.Tokenizer
	prompts *prompt.Builder
	lm      backend.LM
	codec   backend.Codec
	// gpuCodec is set when codec runs on the GPU; it holds device memory.
	gpuCodec *cudacodec.Codec
	// idleCodecs are decoder streams kept between utterances when they can
	// be reset: a new GPU stream captures its CUDA graphs again (~16 ms of
	// the first chunk on an H100). At most one per utterance that may run at
	// once (maxIdle; 0 means 1).
	codecMu    sync.Mutex
	idleCodecs []backend.CodecStream
	maxIdle    int
	log        *slog.Logger
	// route decides between the single-stream LM and the batch; its
	// single is held by the utterance on the single-stream LM.
	route lmRoute
	// batch runs the utterances route gives it (Streams > 1 on the GPU);
	// nil otherwise.
	batch *cuda.Batcher
	// gpuNote says why the GPU is not used when the automatic choice fell
	// back to the CPU ("" when it runs on the GPU or the CPU was asked for).
	gpuNote string

	// The Base model's voice-clone encoders, opened on first use.
	cloneOnce sync.Once
	clone     *voice.Encoders
	cloneErr  error
}

// Open loads the checkpoint in dir (configs, weights, tokenizer, codec) and
// starts the chosen backend. Cancelling ctx stops it between those steps
// and during the GPU warm-up; the error then wraps ctx.Err().
func Open(ctx context.Context, dir string, o Options) (*Engine, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	m, err := model.Load(dir, model.Options{RequireCodec: true})
	if err != nil {
		return nil, err
	}
	e := &Engine{model: m, log: log}
	e.route.init(soloWait)
	fail := func(err error) (*Engine, error) {
		e.Close()
		return nil, err
	}
	// stopped reports a cancelled ctx as Open's error.
	stopped := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("opening %s: %w", dir, err)
		}
		return nil
	}
	if e.tok, err = text.Open(dir, text.Options{OfficialRegex: o.OfficialRegex}); err != nil {
		return fail(err)
	}
	if e.prompts, err = prompt.New(m); err != nil {
		return fail(err)
	}
	dec, err := codec.New(m)
	if err != nil {
		return fail(err)
	}
	e.codec = dec
	if err := stopped(); err != nil {
		return fail(err)
	}
	if e.lm, e.gpuNote, err = openLM(m, o, log); err != nil {
		return fail(err)
	}
	if err := stopped(); err != nil {
		return fail(err)
	}
	// With the LM on the GPU, decode there too (its own CUDA stream, so the
	// codec of frame k overlaps the LM of frame k+1); the CPU codec remains
	// the fallback when the codec library is missing.
	if gpuLM, onGPU := e.lm.(*cuda.LM); onGPU {
		// The prompt's text projection (two 2048-wide products, ~7 ms on
		// the CPU) on the GPU too, on a stream of its own: Build may run
		// while the LM generates the previous utterance. New computed
		// P(tts_bos/eos/pad) on the CPU already; that stays.
		if gpuLM.CanProjectText() {
			e.prompts.SetTextProjector(gpuLM)
		}
		if gpu, err := openGPUCodec(dec, codecSlots(o.Streams), log); err == nil {
			e.codec, e.gpuCodec = gpu, gpu
			grid, _, _, _ := gpuLM.Geometry()
			if err := gpuLM.ReserveSMs(codecSMs(grid)); err != nil {
				log.Info("could not reserve SMs for the codec", "reason", err)
			}
		} else {
			log.Info("GPU codec unavailable, decoding on the CPU", "reason", err)
		}
		if !e.warmUp(ctx) && ctx.Err() == nil {
			// The pipeline could not run (no request fits this model without
			// the caller's input): warm the LM alone.
			if err := gpuLM.Warmup(); err != nil {
				log.Info("LM warm-up failed", "reason", err)
			}
		}
		if o.Streams > 1 {
			if e.batch, err = cuda.NewBatcher(gpuLM, o.Streams, 0); err != nil {
				log.Info("batched decoding unavailable: utterances take turns", "reason", err)
				e.batch = nil
			} else if err := e.batch.Warmup(); err != nil {
				return fail(fmt.Errorf("batch warm-up: %w", err))
			}
			e.maxIdle = o.Streams
		}
		if err := stopped(); err != nil {
			return fail(err)
		}
	}
	gcpace.Fit()
	return e, nil
}

// openGPUCodec puts the decoder on the GPU with one pool slot per utterance
// that may run at once (the single-stream LM's and the batch's), so their
// pushes share launches. When the GPU lacks the memory for that pool it
// starts with one slot: later streams then open pools as they need them
// (each failing on its own, with CUDA's message) instead of the whole codec
// falling back to the CPU.
func openGPUCodec(dec *codec.Decoder, slots int, log *slog.Logger) (*cudacodec.Codec, error) {
	gpu, err := cudacodec.New(dec, slots)
	if err == nil || slots == 1 || errors.Is(err, cudacodec.ErrUnavailable) {
		return gpu, err
	}
	log.Info("GPU codec: no room for a pool of all streams, starting with one", "streams", slots, "reason", err)
	return cudacodec.New(dec, 1)
}

// codecSlots is the GPU codec pool's size for Options.Streams: the batch's
// streams and the single-stream LM's utterance.
func codecSlots(streams int) int {
	if streams > 1 {
		return streams + 1
	}
	return 1
}

// codecSMs is how many of the GPU's SMs the LM's persistent kernel leaves to
// the GPU codec, so the codec of frame k runs beside the LM work of frame k+1
// instead of in the gaps between LM launches. A quarter: on an H100 (132 SMs)
// reserving 0/8/16/24/32 gave TTFC p50 58.8/29.2/25.5/23.7/23.2 ms and RTF
// 0.067/0.062/0.058/0.056/0.055 for a 10 s utterance (docs/dev/LATENCY.md).
// The library raises it to where its launches can switch grids (132 SMs:
// 44), and the LM leaves them only for the frames a push runs beside
// (codecWindow). TALKBOX_CODEC_SMS overrides it for tuning.
func codecSMs(sms int) int {
	if v, err := strconv.Atoi(os.Getenv("TALKBOX_CODEC_SMS")); err == nil && v >= 0 {
		return v
	}
	return sms / 4
}

// warmUp runs every path a request can take once (both text layouts, greedy
// and sampling, the codec's first frame and its graphs), so the first request
// is as fast as the tenth. Only for the GPU: there it costs milliseconds,
// while on the CPU it would cost seconds of start-up for little gain. It
// reports whether the requests could run.
func (e *Engine) warmUp(ctx context.Context) bool {
	start := time.Now()
	voice := ""
	if vs := e.Voices(); len(vs) > 0 {
		voice = vs[0].Name
	}
	greedy := sample.Greedy()
	for _, streaming := range []bool{false, true} {
		for _, sampled := range []bool{false, true} {
			req := Request{Text: "Warm up.", Voice: voice, StreamingText: &streaming, ExactFrames: 2, ChunkFrames: 1}
			if !sampled {
				req.Talker, req.Predictor = &greedy, &greedy
			}
			ch, err := e.Synthesize(ctx, req)
			if err != nil {
				e.log.Info("warm-up skipped", "reason", err)
				return false
			}
			for c := range ch {
				if c.Final && c.Err != nil {
					e.log.Info("warm-up failed", "reason", c.Err)
				}
			}
		}
	}
	e.log.Debug("warm-up done", "took", time.Since(start))
	return true
}

// openLM picks the language-model backend. auto prefers the GPU and falls
// back to the CPU, logging why; cuda insists and says why it cannot run.
// The GPU LM skips its own warm-up: Open's warmUp runs every path once.
func openLM(m *model.Model, o Options, log *slog.Logger) (lm backend.LM, gpuNote string, err error) {
	gpu := cuda.Options{SkipWarmup: true}
	switch strings.ToLower(o.Backend) {
	case "", BackendAuto:
		lm, err := cuda.New(m, gpu)
		if err == nil {
			return lm, "", nil
		}
		log.Info("GPU backend unavailable, using the CPU", "reason", err)
		lm, cerr := openCPU(m, o, log)
		return lm, GPUReason(err), cerr
	case BackendCPU:
		lm, err := openCPU(m, o, log)
		return lm, "", err
	case BackendCUDA:
		lm, err := cuda.New(m, gpu)
		if errors.Is(err, cuda.ErrUnavailable) {
			return nil, "", fmt.Errorf("%w: %w", ErrNoGPU, err)
		}
		return lm, "", err
	}
	return nil, "", fmt.Errorf("unknown backend %q (want auto, cpu or cuda)", o.Backend)
}

// EnvWeightCache names the environment variable that moves the int8 weight
// cache to another folder, or turns it off with "off".
const EnvWeightCache = "TALKBOX_WEIGHT_CACHE"

// DefaultWeightCache is the folder the commands and the window keep the
// int8 weight cache in: $TALKBOX_WEIGHT_CACHE, else talkbox/int8 in the
// user's cache folder (XDG_CACHE_HOME or ~/.cache); "" (no cache) when it is
// "off" or there is no cache folder.
func DefaultWeightCache() string {
	if d := os.Getenv(EnvWeightCache); d != "" {
		if d == "off" {
			return ""
		}
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "talkbox", "int8")
}

// openCPU opens the CPU LM and logs what its int8 weight cache did.
func openCPU(m *model.Model, o Options, log *slog.Logger) (*cpu.LM, error) {
	lm, err := cpu.New(m, cpu.Options{Threads: o.Threads, Precision: cpu.Precision(o.Precision), CacheDir: o.WeightCache})
	if err != nil {
		return nil, err
	}
	if ci := lm.WeightCache(); ci.Err != nil {
		log.Warn("int8 weight cache", "file", ci.Path, "err", ci.Err)
	} else if ci.Path != "" {
		log.Debug("int8 weight cache", "file", ci.Path, "hit", ci.Hit)
	}
	return lm, nil
}

// GPUReason says in a few words why the GPU backend could not start, for
// the window's device line; the full error goes to the log.
func GPUReason(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "not found (looked at"):
		return "no GPU library (build it with make native)"
	case strings.Contains(lower, "no cuda device is visible"):
		return "no NVIDIA driver or GPU found"
	case strings.Contains(lower, "out of memory"):
		return "not enough GPU memory for this model"
	case strings.Contains(lower, "abi version"):
		return "the GPU library is out of date (rebuild with make native)"
	case strings.Contains(lower, "libcuda") || strings.Contains(lower, "libcudart"):
		return "the NVIDIA driver libraries could not be loaded"
	}
	return errtext.Cut(msg, 120)
}

// GPUNote says why the GPU is not used, when Open fell back to the CPU on
// its own; "" otherwise.
func (e *Engine) GPUNote() string { return e.gpuNote }

// Close releases the backend and unmaps the weights.
func (e *Engine) Close() error {
	var errs []error
	if e.batch != nil {
		errs = append(errs, e.batch.Close())
	}
	e.route.single.Lock()
	e.codecMu.Lock()
	for _, cs := range e.idleCodecs {
		errs = append(errs, cs.Close())
	}
	e.idleCodecs = nil
	e.codecMu.Unlock()
	e.route.single.Unlock()
	if e.gpuCodec != nil {
		errs = append(errs, e.gpuCodec.Close())
	}
	if e.lm != nil {
		errs = append(errs, e.lm.Close())
	}
	if e.tok != nil {
		errs = append(errs, e.tok.Close())
	}
	if e.model != nil {
		errs = append(errs, e.model.Close())
	}
	return errors.Join(errs...)
}

// Model exposes the loaded checkpoint (configs) read-only.
func (e *Engine) Model() *model.Model { return e.model }

// Device names where the language model runs.
func (e *Engine) Device() string { return e.lm.Device() }

// ModelName is "Qwen3-TTS 0.6B CustomVoice (dir name)".
func (e *Engine) ModelName() string {
	c := e.model.Config
	kind := map[string]string{model.TypeBase: "Base", model.TypeCustomVoice: "CustomVoice", model.TypeVoiceDesign: "VoiceDesign"}[c.TTSModelType]
	return fmt.Sprintf("Qwen3-TTS %s %s (%s)", c.SizeName(), kind, filepath.Base(e.model.Dir))
}

// Voices lists the preset speakers (none for VoiceDesign and Base).
func (e *Engine) Voices() []Voice {
	var out []Voice
	for _, s := range e.model.Config.Speakers() {
		out = append(out, Voice{Name: s.Name, Dialect: s.Dialect})
	}
	return out
}

// Languages lists the selectable languages, "auto" first.
func (e *Engine) Languages() []string { return e.model.Config.Languages() }

// SupportsInstruct reports whether instruct text reaches this model.
func (e *Engine) SupportsInstruct() bool { return e.model.Config.SupportsInstruct() }

// SampleRate of the PCM chunks.
func (e *Engine) SampleRate() int { return e.codec.SampleRate() }

// Synthesize starts one utterance and returns its chunk stream. The first
// chunk holds the first frame's audio; the last has Final set with Stats (and
// Err on failure), then the channel closes. Consumers read until it closes.
func (e *Engine) Synthesize(ctx context.Context, req Request) (<-chan Chunk, error) {
	start := time.Now()
	// In flight from here, not from the end of prepare: a burst's requests
	// count as company for lmRoute while their prompts are prepared, so
	// the first prompt ready does not take the single-stream LM because
	// the others' preparation outlasted soloWait.
	e.route.begin()
	p, opt, ctxCodes, err := e.prepare(req)
	if err != nil {
		e.route.end()
		return nil, err
	}
	chunkFrames := max(req.ChunkFrames, 0)
	out := make(chan Chunk, 4)
	s := &stream{lm: e.lm, codec: e.codec, prompt: p, opt: opt, chunkFrames: chunkFrames, start: start,
		prepare: time.Since(start), device: e.lm.Device(), openCodec: e.takeCodecStream, releaseCodec: e.keepCodecStream,
		contextCodes: ctxCodes}
	_, lmOnCPU := e.lm.(*cpu.LM)
	s.sharedCores = lmOnCPU && e.gpuCodec == nil
	go func() {
		defer e.route.end()
		// The single-stream LM holds one KV cache: one utterance at a time
		// there. With a batch, lmRoute decides.
		if e.batch != nil && !e.route.takeSingle() {
			s.lm = e.batch.LM()
			s.device = s.lm.Device()
			s.run(ctx, out)
			return
		}
		if e.batch == nil {
			e.route.single.Lock()
		}
		defer e.route.single.Unlock()
		s.run(ctx, out)
	}()
	return out, nil
}

// resettableStream is a codec stream that can return to frame 0.
type resettableStream interface {
	backend.CodecStream
	Reset() error
}

// takeCodecStream returns a kept stream, reset, or a new one.
func (e *Engine) takeCodecStream() (backend.CodecStream, error) {
	e.codecMu.Lock()
	var cs backend.CodecStream
	if n := len(e.idleCodecs); n > 0 {
		cs = e.idleCodecs[n-1]
		e.idleCodecs = e.idleCodecs[:n-1]
	}
	e.codecMu.Unlock()
	if cs != nil {
		if rs, ok := cs.(resettableStream); ok && rs.Reset() == nil {
			return cs, nil
		}
		cs.Close()
	}
	return e.codec.NewStream()
}

// keepCodecStream keeps a resettable stream for a later utterance and
// closes any other.
func (e *Engine) keepCodecStream(cs backend.CodecStream) {
	if _, ok := cs.(resettableStream); ok {
		e.codecMu.Lock()
		if len(e.idleCodecs) < max(1, e.maxIdle) {
			e.idleCodecs = append(e.idleCodecs, cs)
			cs = nil
		}
		e.codecMu.Unlock()
	}
	if cs != nil {
		cs.Close()
	}
}

// CloneEncoders returns the Base model's voice-clone encoders (speaker
// encoder and speech-tokenizer encoder), opening them on first use.
func (e *Engine) CloneEncoders() (*voice.Encoders, error) {
	e.cloneOnce.Do(func() { e.clone, e.cloneErr = voice.NewEncoders(e.model) })
	return e.clone, e.cloneErr
}

// IsBase reports whether the model speaks in cloned voices.
func (e *Engine) IsBase() bool { return e.model.Config.TTSModelType == model.TypeBase }

// prepare validates the request and builds the prompt and generation
// options; for an in-context clone it also returns the reference codes the
// codec decodes first, as acoustic context whose samples are not emitted.
func (e *Engine) prepare(req Request) (backend.Prompt, backend.GenerateOptions, []backend.Codes, error) {
	var opt backend.GenerateOptions
	trimmed := strings.TrimSpace(req.Text)
	if trimmed == "" {
		return backend.Prompt{}, opt, nil, ErrEmptyText
	}
	if n := utf8.RuneCountInString(req.Text); n > MaxTextRunes {
		return backend.Prompt{}, opt, nil, fmt.Errorf("%w: %d characters, at most %d per request (split long text into sentences)", ErrTextTooLong, n, MaxTextRunes)
	}
	ids, err := e.tok.AssistantIDs(trimmed)
	if err != nil {
		return backend.Prompt{}, opt, nil, err
	}
	pr := prompt.Request{TextIDs: ids, Speaker: req.Voice, Language: req.Language, Streaming: prompt.DefaultStreaming(e.model.Config)}
	switch {
	case req.Clone != nil && !e.IsBase():
		return backend.Prompt{}, opt, nil, fmt.Errorf("%w: cloned voice %q: only Base models speak in cloned voices", ErrUnsupportedReq, req.Clone.Name)
	case req.Clone == nil && e.IsBase() && strings.TrimSpace(req.Voice) == "":
		return backend.Prompt{}, opt, nil, ErrNeedsClone
	case req.Clone != nil:
		enc, err := e.CloneEncoders()
		if err != nil {
			return backend.Prompt{}, opt, nil, err
		}
		d, _, err := enc.Derive(req.Clone)
		if err != nil {
			return backend.Prompt{}, opt, nil, err
		}
		pr.XVector = d.XVector
		if req.Clone.Mode() == "icl" {
			if pr.RefTextIDs, err = e.tok.RefTextIDs(strings.TrimSpace(req.Clone.Transcript)); err != nil {
				return backend.Prompt{}, opt, nil, err
			}
			pr.RefCodes = d.Codes
		}
	}
	if req.StreamingText != nil {
		pr.Streaming = *req.StreamingText
	}
	if strings.TrimSpace(req.Instruct) != "" {
		if pr.InstructIDs, err = e.tok.InstructIDs(req.Instruct); err != nil {
			return backend.Prompt{}, opt, nil, err
		}
	}
	p, err := e.prompts.Build(pr)
	if err != nil {
		return backend.Prompt{}, opt, nil, err
	}
	g := e.model.Generation
	opt.Talker, opt.Predictor = backend.Sampling(g)
	if req.Talker != nil {
		opt.Talker = *req.Talker
	}
	if req.Predictor != nil {
		opt.Predictor = *req.Predictor
	}
	opt.Seed = req.Seed
	opt.ExactFrames = req.ExactFrames
	opt.MaxFrames = backend.FrameCap(len(ids)-8, g.MaxNewTokens)
	return p, opt, pr.RefCodes, nil
}
