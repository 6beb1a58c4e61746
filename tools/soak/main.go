// Command soak runs many utterances through one engine, with random texts,
// voices, languages and chunk sizes, cancels at random points and Stops that
// race the next Speak (as the window's Stop and Speak do), then prints one
// JSON object: RSS and goroutines at the start and the end, GPU memory on the
// CUDA backend, and every error that is not a cancellation. It exits 1 when
// an error occurred, RSS grew past --rss-bound-mb or goroutines did not come
// back to their baseline. Not part of `make test` (minutes); `make soak`.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"talkbox/engine"
)

type report struct {
	Model           string   `json:"model"`
	Backend         string   `json:"backend"`
	Device          string   `json:"device"`
	Utterances      int      `json:"utterances"`
	Completed       int      `json:"completed"`
	CancelledEarly  int      `json:"cancelled_by_consumer"`
	CancelledRacing int      `json:"cancelled_by_concurrent_stop"`
	Overlapped      int      `json:"started_while_previous_draining"`
	Frames          int      `json:"frames"`
	AudioSeconds    float64  `json:"audio_seconds"`
	Errors          int      `json:"errors"`
	ErrorSamples    []string `json:"error_samples,omitempty"`
	WarmUp          int      `json:"warm_up_utterances"`
	RSSStartMB      float64  `json:"rss_start_mb"`
	RSSEndMB        float64  `json:"rss_end_mb"`
	RSSMaxMB        float64  `json:"rss_max_mb"`
	RSSBoundMB      float64  `json:"rss_bound_mb"`
	GoroutinesBase  int      `json:"goroutines_baseline"`
	GoroutinesEnd   int      `json:"goroutines_end"`
	GPUMemStartMB   *float64 `json:"gpu_mem_start_mb,omitempty"`
	GPUMemEndMB     *float64 `json:"gpu_mem_end_mb,omitempty"`
	WallSeconds     float64  `json:"wall_seconds"`
	UtteranceP50MS  float64  `json:"utterance_p50_ms"`
	UtteranceP99MS  float64  `json:"utterance_p99_ms"`
	OK              bool     `json:"ok"`
}

var words = strings.Fields(`hello world the quick brown fox jumps over a lazy dog today is a good day
to speak numbers 42 and 3.14 or 1,000 questions? yes! no. maybe; well: "quoted" (paren) don't it's
Zürich café naïve 你好 世界 こんにちは 안녕하세요 Привет мир 🎉 emoji — dash… ellipsis`)

func randomText(r *rand.Rand) string {
	n := 1 + r.IntN(14)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[r.IntN(len(words))]
	}
	s := strings.Join(parts, " ")
	switch r.IntN(4) {
	case 0:
		s += "."
	case 1:
		s = "  " + s + "\n"
	}
	return s
}

func main() {
	dir := flag.String("model", "", "model folder")
	backend := flag.String("backend", engine.BackendCPU, "cpu, cuda or auto")
	n := flag.Int("n", 1000, "utterances")
	warm := flag.Int("warm-up", 20, "utterances before the RSS and goroutine baselines are taken")
	maxFrames := flag.Int("max-frames", 12, "each utterance is 1..N frames (the random-weight test models rarely say EOS)")
	seed := flag.Uint64("seed", 1, "random seed of the run")
	threads := flag.Int("threads", 0, "CPU threads (0 = all)")
	rssBound := flag.Float64("rss-bound-mb", 64, "largest RSS growth from start to end that counts as flat")
	flag.Parse()
	if *dir == "" || *n < 1 || *warm < 0 || *maxFrames < 1 {
		fmt.Fprintln(os.Stderr, "usage: soak --model DIR [--backend cpu|cuda] [--n 1000] [--max-frames 12]")
		os.Exit(2)
	}
	rep, err := run(*dir, *backend, *n, *warm, *maxFrames, *seed, *threads, *rssBound)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Println(string(b))
	if !rep.OK {
		os.Exit(1)
	}
}

func run(dir, backendName string, n, warm, maxFrames int, seed uint64, threads int, rssBound float64) (*report, error) {
	rep := &report{Model: dir, Backend: backendName, Utterances: n, WarmUp: warm, RSSBoundMB: rssBound}
	e, err := engine.Open(context.Background(), dir, engine.Options{Backend: backendName, Threads: threads})
	if err != nil {
		return nil, err
	}
	rep.Device = e.Device()
	voices := e.Voices()
	langs := e.Languages()
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var durations []time.Duration
	var mu sync.Mutex
	note := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		rep.Errors++
		if len(rep.ErrorSamples) < 10 {
			rep.ErrorSamples = append(rep.ErrorSamples, err.Error())
		}
	}
	// draining is the previous utterance when it was stopped and the next one
	// starts before it has wound down (Stop then Speak at once).
	var draining sync.WaitGroup
	start := time.Now()
	for i := 0; i < warm+n; i++ {
		if i == warm {
			draining.Wait()
			settle()
			rep.RSSStartMB = rssMB()
			rep.GoroutinesBase = runtime.NumGoroutine()
			rep.GPUMemStartMB = gpuMemMB(e.Device())
			start = time.Now()
			durations = durations[:0]
		}
		func() {
			req := engine.Request{Text: randomText(r), Language: langs[r.IntN(len(langs))], Seed: r.Uint64(),
				ExactFrames: 1 + r.IntN(maxFrames), ChunkFrames: 1 + r.IntN(4)}
			if len(voices) > 0 {
				req.Voice = voices[r.IntN(len(voices))].Name
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			mode := r.IntN(10) // 0-3 run to the end, 4-6 the consumer stops after k chunks, 7-9 a Stop from another goroutine
			stopAfter := r.IntN(4)
			delay := time.Duration(r.IntN(20_000)) * time.Microsecond
			t0 := time.Now()
			chunks, err := e.Synthesize(ctx, req)
			if err != nil {
				cancel()
				note(fmt.Errorf("utterance %d (%q): %w", i, req.Text, err))
				return
			}
			if mode >= 7 {
				go func() { time.Sleep(delay); cancel() }()
			}
			got, stopped := 0, false
			var final engine.Chunk
			for c := range chunks {
				if c.Final {
					final = c
					break
				}
				got++
				if mode >= 4 && mode <= 6 && got > stopAfter {
					cancel()
					stopped = true
					break // the window's Stop: leave the rest to drain behind us
				}
			}
			counted := i >= warm
			if stopped {
				// Keep draining in the background while the next Speak starts.
				draining.Add(1)
				go func(i int, text string) {
					defer draining.Done()
					for c := range chunks {
						if c.Final && c.Err != nil && !errors.Is(c.Err, engine.ErrCancelled) {
							note(fmt.Errorf("utterance %d (%q): %w", i, text, c.Err))
						}
					}
				}(i, req.Text)
				if counted {
					rep.CancelledEarly++
					rep.Overlapped++
				}
				return
			}
			cancel()
			switch {
			case final.Err == nil:
				if counted {
					rep.Completed++
					if final.Stats != nil {
						rep.Frames += final.Stats.Frames
						rep.AudioSeconds += final.Stats.AudioSeconds
					}
					if final.Stats == nil || final.Stats.Frames != req.ExactFrames {
						note(fmt.Errorf("utterance %d: %v frames, asked for %d", i, final.Stats, req.ExactFrames))
					}
				}
			case errors.Is(final.Err, engine.ErrCancelled) && mode >= 7:
				if counted {
					rep.CancelledRacing++
				}
			default:
				note(fmt.Errorf("utterance %d (%q): %w", i, req.Text, final.Err))
			}
			if counted {
				durations = append(durations, time.Since(t0))
				if m := rssMB(); m > rep.RSSMaxMB {
					rep.RSSMaxMB = m
				}
			}
		}()
	}
	draining.Wait()
	rep.WallSeconds = time.Since(start).Seconds()
	settle()
	rep.RSSEndMB = rssMB()
	rep.GPUMemEndMB = gpuMemMB(e.Device())
	// Goroutines of finished utterances may take a moment to return.
	for t := 0; t < 50 && runtime.NumGoroutine() > rep.GoroutinesBase; t++ {
		time.Sleep(20 * time.Millisecond)
	}
	rep.GoroutinesEnd = runtime.NumGoroutine()
	if err := e.Close(); err != nil {
		note(fmt.Errorf("close: %w", err))
	}
	sort.Slice(durations, func(a, b int) bool { return durations[a] < durations[b] })
	if len(durations) > 0 {
		rep.UtteranceP50MS = ms(durations[len(durations)/2])
		rep.UtteranceP99MS = ms(durations[len(durations)*99/100])
	}
	rep.OK = rep.Errors == 0 && rep.RSSEndMB-rep.RSSStartMB <= rssBound && rep.GoroutinesEnd <= rep.GoroutinesBase
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// settle returns freed memory to the system so RSS reflects what is live.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// rssMB is VmRSS of this process (Linux), in MB.
func rssMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// gpuMemMB is the GPU memory this process holds, from nvidia-smi; nil off
// the GPU or without nvidia-smi.
func gpuMemMB(device string) *float64 {
	if strings.HasPrefix(device, "CPU") {
		return nil
	}
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil
	}
	pid := strconv.Itoa(os.Getpid())
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) == 2 && strings.TrimSpace(f[0]) == pid {
			v, err := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
			if err == nil {
				return &v
			}
		}
	}
	return nil
}
