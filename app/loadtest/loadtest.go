// Package loadtest drives a Talkbox (or any OpenAI-compatible) speech server
// with N concurrent streams and reports what each client saw: time to first
// audio byte, real-time factor, errors, rejections and the aggregate audio
// throughput. The request loop is bounded by count and by a deadline.
package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is one load test.
type Config struct {
	URL      string // server base, e.g. http://127.0.0.1:8000
	Token    string // bearer token, if the server wants one
	Streams  int    // concurrent clients
	Requests int    // total requests, shared among the clients
	Text     string
	Voice    string // "" = the server's first voice
	Frames   int    // > 0: ask for exactly this many frames (random-weight checkpoints never stop)
	Timeout  time.Duration
	Client   *http.Client
}

// Stat is a median and 95th percentile.
type Stat struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// Report is the JSON the loadtest verb prints.
type Report struct {
	URL          string  `json:"url"`
	Model        string  `json:"model,omitempty"`
	Device       string  `json:"device,omitempty"`
	Streams      int     `json:"streams"`
	Requests     int     `json:"requests"`
	Frames       int     `json:"frames,omitempty"`
	OK           int     `json:"ok"`
	Errors       int     `json:"errors"`
	Rejected     int     `json:"rejected"` // 503 overloaded
	TTFCms       Stat    `json:"ttfc_ms"`  // request sent -> first audio byte, per stream
	RTF          Stat    `json:"rtf"`      // request wall time / audio seconds, per stream
	AudioSeconds float64 `json:"audio_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
	Throughput   float64 `json:"audio_seconds_per_second"` // all streams together
	FirstError   string  `json:"first_error,omitempty"`
}

type result struct {
	ttfc, wall time.Duration
	audio      float64
	rejected   bool
	err        error
}

// Run performs the test; ctx bounds it as a whole.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Streams < 1 || cfg.Requests < 1 {
		return Report{}, fmt.Errorf("loadtest: streams and requests must be at least 1")
	}
	if cfg.Text == "" {
		cfg.Text = "Hello! This is a load test of the Talkbox speech server."
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	rep := Report{URL: cfg.URL, Streams: cfg.Streams, Requests: cfg.Requests, Frames: cfg.Frames}
	if err := describe(ctx, &cfg, &rep); err != nil {
		return rep, err
	}

	body, _ := json.Marshal(map[string]any{"model": "talkbox", "input": cfg.Text, "voice": cfg.Voice,
		"response_format": "pcm", "frames": cfg.Frames})
	jobs := make(chan struct{}, cfg.Requests)
	for range cfg.Requests {
		jobs <- struct{}{}
	}
	close(jobs)
	results := make(chan result, cfg.Requests)
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if ctx.Err() != nil {
					return
				}
				results <- one(ctx, cfg, body)
			}
		}()
	}
	wg.Wait()
	close(results)
	rep.WallSeconds = time.Since(start).Seconds()

	var ttfc, rtf []float64
	for r := range results {
		switch {
		case r.rejected:
			rep.Rejected++
		case r.err != nil:
			rep.Errors++
			if rep.FirstError == "" {
				rep.FirstError = r.err.Error()
			}
		default:
			rep.OK++
			rep.AudioSeconds += r.audio
			ttfc = append(ttfc, float64(r.ttfc)/float64(time.Millisecond))
			if r.audio > 0 {
				rtf = append(rtf, r.wall.Seconds()/r.audio)
			}
		}
	}
	rep.TTFCms, rep.RTF = stat(ttfc), stat(rtf)
	if rep.WallSeconds > 0 {
		rep.Throughput = round(rep.AudioSeconds/rep.WallSeconds, 3)
	}
	rep.AudioSeconds, rep.WallSeconds = round(rep.AudioSeconds, 3), round(rep.WallSeconds, 3)
	if ctx.Err() != nil && rep.OK+rep.Errors+rep.Rejected < cfg.Requests {
		return rep, fmt.Errorf("loadtest: stopped by the %s deadline after %d of %d requests", cfg.Timeout, rep.OK+rep.Errors+rep.Rejected, cfg.Requests)
	}
	return rep, nil
}

// describe reads the server's health and, when no voice was given, its first voice.
func describe(ctx context.Context, cfg *Config, rep *Report) error {
	var h struct{ Model, Device string }
	if err := getJSON(ctx, *cfg, "/healthz", &h); err != nil {
		return err
	}
	rep.Model, rep.Device = h.Model, h.Device
	if cfg.Voice != "" {
		return nil
	}
	var v struct {
		Voices []struct{ Name string } `json:"voices"`
	}
	if err := getJSON(ctx, *cfg, "/v1/voices", &v); err != nil {
		return err
	}
	if len(v.Voices) > 0 {
		cfg.Voice = v.Voices[0].Name
	}
	return nil
}

func getJSON(ctx context.Context, cfg Config, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL+path, nil)
	if err != nil {
		return err
	}
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("loadtest: GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// one sends a request and reads the streamed PCM to the end.
func one(ctx context.Context, cfg Config, body []byte) result {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL+"/v1/audio/speech", bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		io.Copy(io.Discard, resp.Body)
		return result{rejected: true}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return result{err: fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))}
	}
	rate, _ := strconv.Atoi(resp.Header.Get("X-Sample-Rate"))
	if rate <= 0 {
		rate = 24000 // OpenAI's pcm is 24 kHz
	}
	var r result
	buf := make([]byte, 32<<10)
	n := 0
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 && n == 0 {
			r.ttfc = time.Since(start)
		}
		n += k
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return result{err: fmt.Errorf("reading audio: %w", err)}
		}
	}
	r.wall = time.Since(start)
	r.audio = float64(n/2) / float64(rate)
	return r
}

// stat is nearest-rank p50 and p95, rounded to 0.1 ms / 0.001.
func stat(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	slices.Sort(v)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return round(v[max(0, min(i, len(v)-1))], 3)
	}
	return Stat{P50: at(0.50), P95: at(0.95)}
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
