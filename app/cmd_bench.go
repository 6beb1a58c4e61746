package main

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"talkbox/engine"
	"talkbox/engine/backend"
	"talkbox/engine/codec"
	"talkbox/engine/cpu"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

func init() {
	register(verb{name: "bench", summary: "measure LM speed (prefill, talker and predictor steps, frames) as JSON", run: runBench})
}

// benchReport is the one JSON object the bench verb prints. Fields are
// grouped by stage so later stages (codec, time to first chunk) can be added
// as new omitempty fields without changing the existing ones.
type benchReport struct {
	Device       string `json:"device"`
	Backend      string `json:"backend"`
	Model        string `json:"model"` // "0.6B" or "1.7B"
	ModelType    string `json:"model_type"`
	Threads      int    `json:"threads,omitempty"`
	PromptRows   int    `json:"prompt_rows"`
	Frames       int    `json:"frames"` // frames per run
	Runs         int    `json:"runs"`
	WarmupFrames int    `json:"warmup_frames"` // frames left out of the medians

	LoadMS           float64 `json:"load_ms"`            // weight conversion at New
	PrefillMS        float64 `json:"prefill_ms"`         // median over runs, all prompt rows in one pass
	TalkerStepMS     float64 `json:"talker_step_ms"`     // median: one position through the talker + codec head
	PredictorStepMS  float64 `json:"predictor_step_ms"`  // median frame pass / 15 groups
	PredictorFrameMS float64 `json:"predictor_frame_ms"` // median: all 15 groups of one frame
	FrameMS          float64 `json:"frame_ms"`           // median wall time between emitted frames
	RTF              float64 `json:"rtf"`                // frame_ms / 80 ms of audio per frame (12.5 Hz)

	// Codec: streaming decode of random frames, one push each (when the
	// checkpoint has speech_tokenizer/ and --codec-frames > 0).
	Codec *codec.BenchResult `json:"codec,omitempty"`
	// E2E: the whole pipeline from text (when --e2e-frames > 0).
	E2E *e2eReport `json:"e2e,omitempty"`
}

// e2eReport times text -> PCM chunks through engine.Synthesize, as the app
// sees it: TTFC is request -> first 80 ms PCM chunk ready in Go.
type e2eReport struct {
	Text         string  `json:"text"`
	Frames       int     `json:"frames"` // fixed with ExactFrames: random weights never learned EOS
	Runs         int     `json:"runs"`   // measured runs, after one warm-up
	TTFCp50MS    float64 `json:"ttfc_p50_ms"`
	TTFCp95MS    float64 `json:"ttfc_p95_ms"`
	LMFrameMS    float64 `json:"lm_frame_ms"`    // median over runs of the mean per frame
	CodecFrameMS float64 `json:"codec_frame_ms"` // likewise
	AudioSeconds float64 `json:"audio_seconds"`
	RTF          float64 `json:"rtf"` // median wall / audio
	PrefillMS    float64 `json:"prefill_ms"`
}

// stepTimer is implemented by backends that time talker and predictor steps.
type stepTimer interface{ LastStepTimes() cpu.StepTimes }

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	dir := fs.String("model", "", "model directory (e.g. from talkbox synth)")
	backendName := fs.String("backend", "cpu", "backend: cpu")
	frames := fs.Int("frames", 16, "frames per run")
	runs := fs.Int("runs", 2, "runs (the first is a warm-up when runs > 1)")
	threads := fs.Int("threads", 0, "CPU threads (0 = all)")
	rows := fs.Int("prompt-rows", 40, "prefill rows")
	codecFrames := fs.Int("codec-frames", 10, "frames for the codec benchmark (0 = skip)")
	e2eFrames := fs.Int("e2e-frames", 0, "frames per end-to-end run from text (0 = skip; 125 = a 10 s utterance)")
	e2eRuns := fs.Int("e2e-runs", 3, "measured end-to-end runs (after one warm-up)")
	text := fs.String("text", "Talkbox reads this sentence aloud to measure how fast the first audio arrives.", "text for the end-to-end runs")
	voice := fs.String("voice", "", "voice for the end-to-end runs (default: the first preset)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return usageErrorf("--model DIR is required")
	}
	if *frames < 2 || *runs < 1 || *rows < 1 || *threads < 0 {
		return usageErrorf("--frames must be >= 2, --runs and --prompt-rows >= 1, --threads >= 0")
	}
	m, err := model.Load(*dir, model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()

	start := time.Now()
	var lm backend.LM
	switch *backendName {
	case "cpu":
		lm, err = cpu.New(m, cpu.Options{Threads: *threads})
	default:
		return usageErrorf("unknown backend %q (want cpu)", *backendName)
	}
	if err != nil {
		return err
	}
	defer lm.Close()
	rep := benchReport{Device: lm.Device(), Backend: *backendName, Model: m.Config.SizeName(), ModelType: m.Config.TTSModelType,
		Threads: *threads, PromptRows: *rows, Frames: *frames, Runs: *runs, LoadMS: ms(time.Since(start))}

	prompt := benchPrompt(m.Config.Talker.HiddenSize, *rows)
	g := m.Generation
	opt := backend.GenerateOptions{
		Talker:      sample.Params{DoSample: g.DoSample, Temperature: g.Temperature, TopK: g.TopK, TopP: g.TopP, RepetitionPenalty: g.RepetitionPenalty},
		Predictor:   sample.Params{DoSample: g.SubtalkerDoSample, Temperature: g.SubtalkerTemperature, TopK: g.SubtalkerTopK, TopP: g.SubtalkerTopP, RepetitionPenalty: 1},
		ExactFrames: *frames, // random weights never learned EOS; time a fixed length
	}
	var prefill, talker, pred, frame []time.Duration
	for r := 0; r < *runs; r++ {
		opt.Seed = uint64(r + 1)
		out := make(chan backend.Frame, *frames)
		res, err := lm.Generate(context.Background(), prompt, opt, out)
		if err != nil {
			return err
		}
		warm := *runs > 1 && r == 0
		if warm {
			continue
		}
		// Within a measured run the first frames still warm caches and the
		// scheduler; leave them out of the per-step medians.
		skip := min(2, len(res.FrameTimes)-1)
		rep.WarmupFrames = skip
		prefill = append(prefill, res.Prefill)
		frame = append(frame, res.FrameTimes[skip:]...)
		if st, ok := lm.(stepTimer); ok {
			steps := st.LastStepTimes()
			talker = append(talker, steps.Talker[min(skip, len(steps.Talker)):]...)
			pred = append(pred, steps.Predictor[min(skip, len(steps.Predictor)):]...)
		}
	}
	rep.PrefillMS = ms(median(prefill))
	rep.FrameMS = ms(median(frame))
	rep.TalkerStepMS = ms(median(talker))
	rep.PredictorFrameMS = ms(median(pred))
	rep.PredictorStepMS = rep.PredictorFrameMS / float64(backend.NumGroups-1)
	rep.RTF = rep.FrameMS / 80
	lm.Close()

	if *codecFrames > 0 && m.CodecFile != nil {
		dec, err := codec.New(m)
		if err != nil {
			return err
		}
		res := codec.BenchStreaming(dec, *codecFrames+1, 7)
		rep.Codec = &res
	}
	if *e2eFrames > 0 {
		e2e, err := benchEndToEnd(*dir, *backendName, *threads, *text, *voice, *e2eFrames, *e2eRuns)
		if err != nil {
			return err
		}
		rep.E2E = e2e
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(rep)
}

// benchEndToEnd runs the real pipeline (tokenizer, prompt, LM, codec) with a
// fixed frame count; the first run warms every path and is left out.
func benchEndToEnd(dir, backendName string, threads int, text, voice string, frames, runs int) (*e2eReport, error) {
	e, err := engine.Open(dir, engine.Options{Backend: backendName, Threads: threads})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if voice == "" {
		if vs := e.Voices(); len(vs) > 0 {
			voice = vs[0].Name
		}
	}
	rep := &e2eReport{Text: text, Frames: frames, Runs: runs}
	var ttfc, lmFrame, codecFrame, prefill []time.Duration
	var rtf []float64
	for r := 0; r <= runs; r++ {
		ch, err := e.Synthesize(context.Background(), engine.Request{Text: text, Voice: voice, Seed: uint64(r + 1), ExactFrames: frames, ChunkFrames: 1})
		if err != nil {
			return nil, err
		}
		var st *engine.Stats
		for c := range ch {
			if c.Final {
				if c.Err != nil {
					return nil, c.Err
				}
				st = c.Stats
			}
		}
		if r == 0 {
			continue
		}
		ttfc = append(ttfc, st.TTFC)
		lmFrame = append(lmFrame, st.LMPerFrame)
		codecFrame = append(codecFrame, st.CodecPerFrame)
		prefill = append(prefill, st.Prefill)
		rtf = append(rtf, st.RTF)
		rep.AudioSeconds = st.AudioSeconds
	}
	rep.TTFCp50MS = ms(percentile(ttfc, 50))
	rep.TTFCp95MS = ms(percentile(ttfc, 95))
	rep.LMFrameMS = ms(median(lmFrame))
	rep.CodecFrameMS = ms(median(codecFrame))
	rep.PrefillMS = ms(median(prefill))
	slices.Sort(rtf)
	rep.RTF = rtf[len(rtf)/2]
	return rep, nil
}

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

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
