package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"talkbox/app/hub"
	"talkbox/engine"
	"talkbox/engine/backend"
	"talkbox/engine/codec"
	"talkbox/engine/cores"
	"talkbox/engine/cpu"
	"talkbox/engine/cuda"
	"talkbox/engine/cudacodec"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

func init() {
	register(verb{name: "bench", summary: "measure speed (LM steps, codec, time to first chunk, RTF) as one JSON object", run: runBench})
}

// benchReport is the one JSON object the bench verb prints. The LM fields
// are flat (the first version of this verb printed them so); later stages are
// omitempty objects.
type benchReport struct {
	Device       string `json:"device"`
	Backend      string `json:"backend"`
	Model        string `json:"model"` // "0.6B" or "1.7B"
	ModelType    string `json:"model_type"`
	Threads      int    `json:"threads,omitempty"`
	Precision    string `json:"precision,omitempty"` // CPU weights: f32 or int8
	PromptRows   int    `json:"prompt_rows"`
	Frames       int    `json:"frames"` // frames per run (CPU) or timed launches (CUDA)
	Runs         int    `json:"runs"`
	WarmupFrames int    `json:"warmup_frames"` // frames or launches left out of the medians
	Timer        string `json:"timer"`         // "wall" (CPU) or "cuda events"

	LoadMS           float64 `json:"load_ms"`            // weight conversion/upload and warm-up
	PrefillMS        float64 `json:"prefill_ms"`         // median, all prompt rows in one pass
	TalkerStepMS     float64 `json:"talker_step_ms"`     // median: one position through the talker + codec head
	PredictorStepMS  float64 `json:"predictor_step_ms"`  // median: one code-predictor step
	PredictorFrameMS float64 `json:"predictor_frame_ms"` // all 15 predictor steps of a frame
	FrameMS          float64 `json:"frame_ms"`           // median frame (sampling, as generation_config says)
	FrameGreedyMS    float64 `json:"frame_greedy_ms,omitempty"`
	RTF              float64 `json:"rtf"` // frame_ms / 80 ms of audio per frame (12.5 Hz)

	Codec    *codec.BenchResult     `json:"codec,omitempty"`     // CPU streaming decode, one frame per push
	CodecGPU *cudacodec.BenchResult `json:"codec_gpu,omitempty"` // GPU streaming decode, one frame per push
	// GPU: B streams' frames in one launch, for each B of --batch, one frame
	// and four frames a push.
	CodecBatch []cudacodec.BenchResult `json:"codec_batch,omitempty"`
	E2E        *e2eReport              `json:"e2e,omitempty"`     // text -> PCM through engine.Synthesize
	Streams    *streamsReport          `json:"streams,omitempty"` // concurrent utterances
	Batch      []batchRow              `json:"batch,omitempty"`   // CUDA: B utterances in one batch (LM only)
	// Stability: one long sampled utterance of --stability frames (no hang,
	// every code in range).
	Stability *stabilityReport `json:"stability,omitempty"`
	// Clone: the Base model's voice-clone encoders on one reference clip.
	Clone *cloneReport `json:"clone,omitempty"`
}

type stabilityReport struct {
	Frames      int                `json:"frames"`
	Stop        backend.StopReason `json:"stop"`
	BadCodes    int                `json:"bad_codes"` // codes outside 0..2047 or a group-0 EOS inside the utterance
	WallS       float64            `json:"wall_s"`
	MeanFrameMS float64            `json:"mean_frame_ms"`
}

// e2eReport times text -> PCM chunks through engine.Synthesize, as the app
// sees it: TTFC is request -> first 80 ms PCM chunk ready in Go.
type e2eReport struct {
	Text         string  `json:"text"`
	Frames       int     `json:"frames"`       // fixed with ExactFrames: random weights never learned EOS
	ChunkFrames  int     `json:"chunk_frames"` // 0: the engine's choice (engine.Request.ChunkFrames)
	Runs         int     `json:"runs"`         // measured runs, after one warm-up
	TTFCp50MS    float64 `json:"ttfc_p50_ms"`
	TTFCp95MS    float64 `json:"ttfc_p95_ms"`
	LMFrameMS    float64 `json:"lm_frame_ms"`    // median over runs of the mean per frame
	CodecFrameMS float64 `json:"codec_frame_ms"` // likewise
	AudioSeconds float64 `json:"audio_seconds"`
	RTF          float64 `json:"rtf"` // median wall / audio
	// Where TTFC goes (medians): tokenizer + prompt builder, LM prefill, LM
	// frame 0, codec of the first chunk; the rest is scheduling and hand-offs.
	PrepareMS    float64 `json:"prepare_ms"`
	PrefillMS    float64 `json:"prefill_ms"`
	FirstFrameMS float64 `json:"first_frame_lm_ms"`
	FirstCodecMS float64 `json:"first_codec_ms"`
}

// streamsReport is N utterances synthesised at once on one engine.
type streamsReport struct {
	Streams     int       `json:"streams"`
	Frames      int       `json:"frames"`
	ChunkFrames int       `json:"chunk_frames"`
	RTF         []float64 `json:"rtf_per_stream"`
	TTFCMS      []float64 `json:"ttfc_ms_per_stream"`
	MaxRTF      float64   `json:"max_rtf"`
	TTFCp95MS   float64   `json:"ttfc_p95_ms"`
	// Where TTFC goes (95th percentiles over the streams, as e2eReport's parts).
	PrepareP95MS    float64 `json:"prepare_p95_ms"`
	PrefillP95MS    float64 `json:"prefill_p95_ms"`
	FirstFrameP95MS float64 `json:"first_frame_lm_p95_ms"`
	FirstCodecP95MS float64 `json:"first_codec_p95_ms"`
}

// batchRow is B utterances of the same length decoding together in one
// cuda.Batcher (continuous batching; the LM only, no codec), all admitted at
// once: their prefills run one after another, so TTFC grows with B.
type batchRow struct {
	Streams     int     `json:"streams"`
	Frames      int     `json:"frames"`
	StepMS      float64 `json:"step_ms"`        // median wall time of one batched frame (every stream's)
	RTF         float64 `json:"rtf_per_stream"` // step_ms / 80 ms of audio
	AudioPerSec float64 `json:"audio_s_per_s"`  // all streams together
	WeightGBs   float64 `json:"weight_gb_per_s"`
	TTFCp50MS   float64 `json:"ttfc_lm_p50_ms"` // request -> first frame's codes (prefill queue + prefill + frame 0)
	TTFCp95MS   float64 `json:"ttfc_lm_p95_ms"`
	PrefillMS   float64 `json:"prefill_ms"` // median of one stream's prefill
}

type benchFlags struct {
	dir, backend, text, voice       string
	precision                       string
	frames, runs, threads, rows     int
	codecFrames, e2eFrames, e2eRuns int
	chunkFrames                     int
	streams, stability              int
	batch                           string
	cloneSeconds                    float64
	cloneOnly                       bool
	fusedMaxLen                     int
	prefill                         string
}

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	var f benchFlags
	fs.StringVar(&f.dir, "model", "", "model folder (e.g. from talkbox synth) or installed name")
	fs.StringVar(&f.backend, "backend", "cpu", "backend: cpu or cuda")
	intFlagVar(fs, &f.frames, "frames", 16, 1, maxFrames, "", "CPU: frames per run; CUDA: timed launches per kind (x10)")
	intFlagVar(fs, &f.runs, "runs", 2, 1, maxRuns, "", "CPU runs (the first is a warm-up when runs > 1)")
	intFlagVar(fs, &f.threads, "threads", 0, 0, maxThreads, "all", "CPU threads (0 = all)")
	fs.StringVar(&f.precision, "precision", "", "CPU weights: f32 (the reference) or int8 (default: "+string(cpu.DefaultPrecision)+")")
	intFlagVar(fs, &f.rows, "prompt-rows", 40, 1, maxFrames, "", "prefill rows")
	intFlagVar(fs, &f.codecFrames, "codec-frames", 10, 0, maxFrames, "skip", "frames for the codec benchmark (0 = skip)")
	intFlagVar(fs, &f.e2eFrames, "e2e-frames", 0, 0, maxFrames, "skip", "frames per end-to-end run from text (0 = skip; 125 = a 10 s utterance)")
	intFlagVar(fs, &f.e2eRuns, "e2e-runs", 3, 1, maxRuns, "", "measured end-to-end runs (after one warm-up)")
	intFlagVar(fs, &f.chunkFrames, "chunk-frames", 0, 0, 64, "the engine's", "end to end: frames a PCM chunk after the first (0 = the engine's choice, as the window and talkbox serve use: larger while the audio sent is ahead, up to 8)")
	intFlagVar(fs, &f.streams, "streams", 0, 0, 64, "skip", "also run N utterances of --e2e-frames at once on one engine (0 = skip)")
	fs.StringVar(&f.batch, "batch", "", "CUDA: also time B utterances of --frames frames in one batch, and the codec decoding B streams in one launch, for each B of a comma list (e.g. 1,2,4,8,16,32,64)")
	intFlagVar(fs, &f.stability, "stability", 0, 0, maxFrames, "skip", "also run one sampled utterance of N frames and check every code (0 = skip)")
	fs.Float64Var(&f.cloneSeconds, "clone-seconds", 10, "Base models: time the voice-clone encoders on a clip this long, 1-30 s (0 = skip)")
	fs.BoolVar(&f.cloneOnly, "clone-only", false, "time only the voice-clone encoders")
	fs.StringVar(&f.text, "text", "Talkbox reads this sentence aloud to measure how fast the first audio arrives.", "text for the end-to-end runs")
	fs.StringVar(&f.voice, "voice", "", "voice for the end-to-end runs (default: the first preset)")
	intFlagVar(fs, &f.fusedMaxLen, "fused-max-len", 0, -1, 1<<20, "", "CUDA LM timings: longest talker context run with attention fused into O (0 = the library's default, -1 = never)")
	fs.StringVar(&f.prefill, "prefill", "tensor-cores", "CUDA LM timings: prefill path, tensor-cores or passes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.dir == "" {
		return usageErrorf("--model is required")
	}
	if f.cloneSeconds != 0 && !(f.cloneSeconds >= 1 && f.cloneSeconds <= 30) {
		return usageErrorf("--clone-seconds %v: want 1 to 30, or 0 to skip", f.cloneSeconds)
	}
	dir, err := hub.Resolve(f.dir)
	if err != nil {
		return err
	}
	f.dir = dir
	if f.frames < 2 || f.runs < 1 || f.rows < 1 || f.threads < 0 || f.streams < 0 || f.stability < 0 {
		return usageErrorf("--frames must be >= 2, --runs and --prompt-rows >= 1, --threads, --streams and --stability >= 0")
	}
	if _, err := cpu.ParsePrecision(f.precision); err != nil {
		return usageErrorf("--precision: %v", err)
	}
	if f.backend != engine.BackendCPU && f.backend != engine.BackendCUDA {
		return usageErrorf("unknown backend %q (want cpu or cuda)", f.backend)
	}
	if f.prefill != "tensor-cores" && f.prefill != "passes" {
		return usageErrorf("--prefill %q: want tensor-cores or passes", f.prefill)
	}
	m, err := model.Load(f.dir, model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	rep := &benchReport{Backend: f.backend, Model: m.Config.SizeName(), ModelType: m.Config.TTSModelType,
		Threads: f.threads, PromptRows: f.rows}
	if m.Config.TTSModelType == model.TypeBase && f.cloneSeconds > 0 {
		if rep.Clone, err = benchClone(m, f); err != nil {
			return err
		}
	}
	if f.cloneOnly {
		rep.Device, rep.Timer = fmt.Sprintf("CPU (%d threads)", cores.Limit()), "wall"
		return json.NewEncoder(stdout).Encode(rep)
	}
	if f.backend == engine.BackendCPU {
		p, _ := cpu.ParsePrecision(f.precision)
		rep.Precision = string(p)
	}
	if f.backend == engine.BackendCPU {
		err = benchCPULM(m, f, rep)
	} else {
		err = benchCUDALM(m, f, rep)
	}
	if err != nil {
		return err
	}
	if f.codecFrames > 0 && m.CodecFile != nil {
		if err := benchCodec(m, f, rep); err != nil {
			return err
		}
	}
	if f.e2eFrames > 0 {
		if rep.E2E, err = benchEndToEnd(f); err != nil {
			return err
		}
		if f.streams > 0 {
			if rep.Streams, err = benchStreams(f); err != nil {
				return err
			}
		}
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// benchCPULM times the CPU LM with wall clocks over whole Generate runs.
func benchCPULM(m *model.Model, f benchFlags, rep *benchReport) error {
	start := time.Now()
	lm, err := cpu.New(m, cpu.Options{Threads: f.threads, Precision: cpu.Precision(f.precision), CacheDir: engine.DefaultWeightCache()})
	if err != nil {
		return err
	}
	defer lm.Close()
	rep.Device, rep.Timer, rep.LoadMS = lm.Device(), "wall", ms(time.Since(start))
	rep.Frames, rep.Runs = f.frames, f.runs
	prompt := benchPrompt(m.Config.Talker.HiddenSize, f.rows)
	opt := backend.GenerateOptions{ExactFrames: f.frames} // random weights never learned EOS; time a fixed length
	opt.Talker, opt.Predictor = backend.Sampling(m.Generation)
	var prefill, talker, pred, frame []time.Duration
	for r := 0; r < f.runs; r++ {
		opt.Seed = uint64(r + 1)
		out := make(chan backend.Frame, f.frames)
		res, err := lm.Generate(context.Background(), prompt, opt, out)
		if err != nil {
			return err
		}
		if f.runs > 1 && r == 0 {
			continue // warm-up
		}
		// Within a measured run the first frames still warm caches and the
		// scheduler; leave them out of the per-step medians.
		skip := min(2, len(res.FrameTimes)-1)
		rep.WarmupFrames = skip
		prefill = append(prefill, res.Prefill)
		frame = append(frame, res.FrameTimes[skip:]...)
		steps := lm.LastStepTimes()
		talker = append(talker, steps.Talker[min(skip, len(steps.Talker)):]...)
		pred = append(pred, steps.Predictor[min(skip, len(steps.Predictor)):]...)
	}
	rep.PrefillMS = ms(median(prefill))
	rep.FrameMS = ms(median(frame))
	rep.TalkerStepMS = ms(median(talker))
	rep.PredictorFrameMS = ms(median(pred))
	rep.PredictorStepMS = rep.PredictorFrameMS / float64(backend.NumGroups-1)
	rep.RTF = rep.FrameMS / 80
	if f.stability > 0 {
		if rep.Stability, err = stabilityRun(lm, m, prompt, f.stability); err != nil {
			return err
		}
	}
	return nil
}

// benchCUDALM times each kind of launch with CUDA events after a warm-up.
func benchCUDALM(m *model.Model, f benchFlags, rep *benchReport) error {
	start := time.Now()
	// The KV cache must hold the stability run's frames after the prompt.
	opt := cuda.Options{MaxPositions: max(backend.DefaultPositions, f.rows+f.stability+64), FusedMaxLen: f.fusedMaxLen}
	if f.prefill == "passes" {
		opt.Prefill = cuda.PrefillPasses
	}
	lm, err := cuda.NewLM(m, opt)
	if err != nil {
		return err
	}
	defer lm.Close()
	rep.Device, rep.Timer, rep.LoadMS = lm.Device(), "cuda events", ms(time.Since(start))
	iters := 10 * f.frames
	const warm = 20
	rep.Frames, rep.Runs, rep.WarmupFrames = iters, 1, warm
	talker, predictor := backend.Sampling(m.Generation)
	prompt := cuda.SyntheticPrompt(m.Config.Talker.HiddenSize, f.rows, 8, 1)
	timed := func(kind cuda.BenchKind, t, p sample.Params) (float64, error) {
		v, err := lm.Bench(prompt, t, p, kind, warm+iters)
		if err != nil {
			return 0, err
		}
		s := slices.Clone(v[warm:])
		slices.Sort(s)
		return float64(s[len(s)/2]), nil
	}
	if rep.TalkerStepMS, err = timed(cuda.BenchTalkerStep, talker, predictor); err != nil {
		return err
	}
	if rep.PredictorStepMS, err = timed(cuda.BenchPredictorStep, talker, predictor); err != nil {
		return err
	}
	rep.PredictorFrameMS = rep.PredictorStepMS * float64(backend.NumGroups-1)
	if rep.FrameMS, err = timed(cuda.BenchFrame, talker, predictor); err != nil {
		return err
	}
	g := sample.Greedy()
	if rep.FrameGreedyMS, err = timed(cuda.BenchFrame, g, g); err != nil {
		return err
	}
	if rep.PrefillMS, err = timed(cuda.BenchPrefill, talker, predictor); err != nil {
		return err
	}
	rep.RTF = rep.FrameMS / 80
	if f.stability > 0 {
		if rep.Stability, err = stabilityRun(lm, m, prompt, f.stability); err != nil {
			return err
		}
	}
	if f.batch != "" {
		if rep.Batch, err = benchBatch(lm, m, f, prompt); err != nil {
			return err
		}
	}
	return nil
}

// batchSizes parses --batch.
func batchSizes(list string) ([]int, error) {
	var sizes []int
	for _, v := range strings.Split(list, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || b < 1 || b > 64 {
			return nil, usageErrorf("--batch: %q is not a stream count 1..64", v)
		}
		sizes = append(sizes, b)
	}
	return sizes, nil
}

// benchBatch runs B sampled utterances of --frames frames at once through one
// cuda.Batcher for each B of --batch, after a warm-up at the largest B.
func benchBatch(lm *cuda.LM, m *model.Model, f benchFlags, prompt backend.Prompt) ([]batchRow, error) {
	sizes, err := batchSizes(f.batch)
	if err != nil {
		return nil, err
	}
	bt, err := cuda.NewBatcher(lm, slices.Max(sizes), f.rows+f.frames+16)
	if err != nil {
		return nil, err
	}
	defer bt.Close()
	if bt.Capacity() < slices.Max(sizes) {
		return nil, fmt.Errorf("--batch: only %d streams fit in GPU memory", bt.Capacity())
	}
	talker, predictor := backend.Sampling(m.Generation)
	frames := max(f.frames, 8)
	run := func(n int) (steps, ttfc, prefill []time.Duration, wall time.Duration, err error) {
		res := make([]backend.Result, n)
		firsts := make([]time.Duration, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make(chan backend.Frame, frames)
				opt := backend.GenerateOptions{ExactFrames: frames, Seed: uint64(i + 1), Talker: talker, Predictor: predictor}
				go func() {
					<-out
					firsts[i] = time.Since(start)
					for range out {
					}
				}()
				res[i], errs[i] = bt.LM().Generate(context.Background(), prompt, opt, out)
				close(out)
			}()
		}
		wg.Wait()
		wall = time.Since(start)
		if err := errors.Join(errs...); err != nil {
			return nil, nil, nil, 0, err
		}
		for i := range res {
			// Frame 0 waits for the others' prefills; the steady steps follow.
			steps = append(steps, res[i].FrameTimes[min(2, len(res[i].FrameTimes)-1):]...)
			ttfc = append(ttfc, firsts[i])
			prefill = append(prefill, res[i].Prefill)
		}
		return steps, ttfc, prefill, wall, nil
	}
	if _, _, _, _, err := run(slices.Max(sizes)); err != nil {
		return nil, fmt.Errorf("batch warm-up: %w", err)
	}
	bytes := float64(cuda.FrameWeightBytes(m))
	var rows []batchRow
	for _, n := range sizes {
		steps, ttfc, prefill, _, err := run(n)
		if err != nil {
			return nil, fmt.Errorf("batch of %d: %w", n, err)
		}
		step := ms(median(steps))
		rows = append(rows, batchRow{Streams: n, Frames: frames, StepMS: step, RTF: step / 80,
			AudioPerSec: float64(n) * 80 / step, WeightGBs: bytes / (step * 1e6),
			TTFCp50MS: ms(percentile(ttfc, 50)), TTFCp95MS: ms(percentile(ttfc, 95)), PrefillMS: ms(median(prefill))})
	}
	return rows, nil
}

// stabilityRun generates one long sampled utterance and checks every code.
func stabilityRun(lm backend.LM, m *model.Model, p backend.Prompt, frames int) (*stabilityReport, error) {
	out := make(chan backend.Frame, 256)
	bad := make(chan int, 1)
	eos := int32(m.Config.Talker.CodecEosID)
	cpVocab := int32(m.Config.Talker.CodePredictor.VocabSize)
	go func() {
		n := 0
		for f := range out {
			for g, c := range f.Codes {
				if c < 0 || c >= cpVocab || (g == 0 && c == eos) {
					n++
				}
			}
		}
		bad <- n
	}()
	opt := backend.GenerateOptions{ExactFrames: frames, Seed: 5}
	opt.Talker, opt.Predictor = backend.Sampling(m.Generation)
	start := time.Now()
	res, err := lm.Generate(context.Background(), p, opt, out)
	close(out)
	nBad := <-bad
	if err != nil {
		return nil, fmt.Errorf("stability run: %w", err)
	}
	wall := time.Since(start)
	return &stabilityReport{Frames: res.Frames, Stop: res.Stop, BadCodes: nBad, WallS: wall.Seconds(),
		MeanFrameMS: wall.Seconds() * 1000 / float64(max(res.Frames, 1))}, nil
}

// benchCodec times the streaming decoder of the checkpoint, one frame per
// push: on the CPU always, and on the GPU with the cuda backend.
func benchCodec(m *model.Model, f benchFlags, rep *benchReport) error {
	dec, err := codec.New(m)
	if err != nil {
		return err
	}
	if f.backend == engine.BackendCPU {
		res := codec.BenchStreaming(dec, f.codecFrames+1, 7)
		rep.Codec = &res
		return nil
	}
	gpu, err := cudacodec.New(dec, 1)
	if err != nil {
		return err
	}
	defer gpu.Close()
	res, err := cudacodec.Bench(gpu, 1, 1, 20, max(f.codecFrames, 50), 7)
	if err != nil {
		return err
	}
	rep.CodecGPU = &res
	if f.batch == "" {
		return nil
	}
	sizes, err := batchSizes(f.batch)
	if err != nil {
		return err
	}
	for _, frames := range []int{1, 4} {
		for _, b := range sizes {
			res, err := cudacodec.Bench(gpu, b, frames, 10, max(f.codecFrames, 30), 7)
			if err != nil {
				return fmt.Errorf("codec batch of %d: %w", b, err)
			}
			rep.CodecBatch = append(rep.CodecBatch, res)
		}
	}
	return nil
}

// synthesizeOnce runs one utterance to the end and returns its stats.
func synthesizeOnce(e *engine.Engine, f benchFlags, voice string, seed uint64) (*engine.Stats, error) {
	ch, err := e.Synthesize(context.Background(), engine.Request{Text: f.text, Voice: voice, Seed: seed, ExactFrames: f.e2eFrames, ChunkFrames: f.chunkFrames})
	if err != nil {
		return nil, err
	}
	var st *engine.Stats
	var runErr error
	for c := range ch {
		if c.Final {
			st, runErr = c.Stats, c.Err
		}
	}
	if runErr != nil {
		return nil, runErr
	}
	if st == nil {
		return nil, errors.New("bench: utterance ended without stats")
	}
	return st, nil
}

func openBenchEngine(f benchFlags, streams int) (*engine.Engine, string, error) {
	e, err := engine.Open(context.Background(), f.dir, engine.Options{Backend: f.backend, Threads: f.threads, Precision: f.precision,
		Streams: streams, WeightCache: engine.DefaultWeightCache()})
	if err != nil {
		return nil, "", err
	}
	voice := f.voice
	if vs := e.Voices(); voice == "" && len(vs) > 0 {
		voice = vs[0].Name
	}
	return e, voice, nil
}

// benchEndToEnd runs the real pipeline (tokenizer, prompt, LM, codec) with a
// fixed frame count; the first run warms every path and is left out.
func benchEndToEnd(f benchFlags) (*e2eReport, error) {
	e, voice, err := openBenchEngine(f, 1)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rep := &e2eReport{Text: f.text, Frames: f.e2eFrames, ChunkFrames: f.chunkFrames, Runs: f.e2eRuns}
	var ttfc, lmFrame, codecFrame, prepare, prefill, firstLM, firstCodec []time.Duration
	var rtf []float64
	for r := 0; r <= f.e2eRuns; r++ {
		st, err := synthesizeOnce(e, f, voice, uint64(r+1))
		if err != nil {
			return nil, err
		}
		if r == 0 {
			continue
		}
		ttfc = append(ttfc, st.TTFC)
		lmFrame = append(lmFrame, st.LMPerFrame)
		codecFrame = append(codecFrame, st.CodecPerFrame)
		prepare = append(prepare, st.Prepare)
		prefill = append(prefill, st.Prefill)
		firstLM = append(firstLM, st.FirstFrameLM)
		firstCodec = append(firstCodec, st.FirstCodec)
		rtf = append(rtf, st.RTF)
		rep.AudioSeconds = st.AudioSeconds
	}
	rep.TTFCp50MS = ms(percentile(ttfc, 50))
	rep.TTFCp95MS = ms(percentile(ttfc, 95))
	rep.LMFrameMS = ms(median(lmFrame))
	rep.CodecFrameMS = ms(median(codecFrame))
	rep.PrepareMS = ms(median(prepare))
	rep.PrefillMS = ms(median(prefill))
	rep.FirstFrameMS = ms(median(firstLM))
	rep.FirstCodecMS = ms(median(firstCodec))
	slices.Sort(rtf)
	rep.RTF = rtf[len(rtf)/2]
	return rep, nil
}

// benchStreams opens one engine for n utterances at once (on the GPU: they
// start together, so all run in one batch; on the CPU they take turns) and
// synthesises n at the same time, after a warm-up round, reporting every
// stream's RTF and TTFC.
func benchStreams(f benchFlags) (*streamsReport, error) {
	n := f.streams
	e, voice, err := openBenchEngine(f, n)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rep := &streamsReport{Streams: n, Frames: f.e2eFrames, ChunkFrames: f.chunkFrames, RTF: make([]float64, n), TTFCMS: make([]float64, n)}
	parts := make([][4]time.Duration, n)
	round := func(seed uint64) error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := synthesizeOnce(e, f, voice, seed+uint64(i))
				if err != nil {
					errs[i] = fmt.Errorf("stream %d: %w", i, err)
					return
				}
				rep.RTF[i], rep.TTFCMS[i] = st.RTF, ms(st.TTFC)
				parts[i] = [4]time.Duration{st.Prepare, st.Prefill, st.FirstFrameLM, st.FirstCodec}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := round(1); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := round(100); err != nil {
		return nil, err
	}
	rep.MaxRTF = slices.Max(rep.RTF)
	rep.TTFCp95MS = percentileF(rep.TTFCMS, 95)
	part := func(k int) float64 {
		d := make([]time.Duration, n)
		for i := range parts {
			d[i] = parts[i][k]
		}
		return ms(percentile(d, 95))
	}
	rep.PrepareP95MS, rep.PrefillP95MS, rep.FirstFrameP95MS, rep.FirstCodecP95MS = part(0), part(1), part(2), part(3)
	return rep, nil
}

// percentileF is the nearest-rank percentile of v.
func percentileF(v []float64, p int) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// benchPrompt makes rows of the talker width with the scale of real prompt
// rows (embedding sums of order 1); the values do not change the timing.
func benchPrompt(hidden, rows int) backend.Prompt {
	rng := rand.New(rand.NewPCG(1, 2))
	row := func() []float32 {
		v := make([]float32, hidden)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	p := backend.Prompt{TTSPad: row()}
	for i := 0; i < rows; i++ {
		p.Prefill = append(p.Prefill, row())
	}
	for i := 0; i < 8; i++ {
		p.Trailing = append(p.Trailing, row())
	}
	return p
}

func median(d []time.Duration) time.Duration { return percentile(d, 50) }

// percentile is the nearest-rank percentile.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
