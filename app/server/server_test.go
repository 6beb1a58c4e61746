package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"talkbox/engine"
	"talkbox/engine/audioenc"
	"talkbox/engine/golden"
	"talkbox/engine/tempo"
)

// The tests run the real engine (CPU) on the tiny random-weight checkpoint,
// on loopback. Random weights never say EOS, so requests fix the length
// with "frames" (80 ms of audio each, 1920 samples at 24 kHz).

const frameSamples = 1920

var (
	engOnce sync.Once
	eng     *engine.Engine
	engErr  error
)

func TestMain(m *testing.M) {
	log.SetOutput(io.Discard) // github.com/mewkiz/flac's decoder notes every 24 kHz frame
	code := m.Run()
	if eng != nil {
		eng.Close()
	}
	os.Exit(code)
}

func tinyEngine(t *testing.T) *engine.Engine {
	t.Helper()
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	engOnce.Do(func() {
		eng, engErr = engine.Open(context.Background(), dir, engine.Options{Backend: engine.BackendCPU, Threads: 1})
	})
	if engErr != nil {
		t.Fatal(engErr)
	}
	return eng
}

// start serves a Server for the tiny engine on loopback.
func start(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s := New(tinyEngine(t), cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func presetVoice(t *testing.T) string { return tinyEngine(t).Voices()[0].Name }

// post sends a speech request and returns the response (the caller closes it).
func post(t *testing.T, ctx context.Context, url string, body any, header ...string) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/audio/speech", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func speech(t *testing.T, frames int, extra ...any) map[string]any {
	m := map[string]any{"model": "tts-1", "input": "Hello there, how are you today?", "voice": presetVoice(t), "frames": frames}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// apiErr reads an OpenAI error body, failing unless it has that shape.
func apiErr(t *testing.T, resp *http.Response) apiError {
	t.Helper()
	defer resp.Body.Close()
	var body struct {
		Error *apiError `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil || body.Error.Message == "" || body.Error.Type == "" {
		t.Fatalf("status %d: not an OpenAI error body (%v)", resp.StatusCode, err)
	}
	return *body.Error
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestEveryFormat: each response_format decodes to exactly the frames asked
// for, at 24 kHz (Opus: 48 kHz decoded, 24 kHz in its header), with the
// format's Content-Type; the SSE stream carries the same WAV in base64.
func TestEveryFormat(t *testing.T) {
	_, ts := start(t, Config{})
	const frames = 6
	for _, name := range audioenc.Formats() {
		f, _ := audioenc.ParseFormat(name)
		resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, frames, "response_format", name))
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v %s", name, resp.StatusCode, err, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != f.ContentType() {
			t.Errorf("%s: Content-Type %q", name, ct)
		}
		d, err := audioenc.Decode(b, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantLen, wantRate := frames*frameSamples, 24000
		switch f {
		case audioenc.Opus:
			wantLen, wantRate = 2*wantLen, 48000
		case audioenc.PCM:
			wantRate = 0 // raw: the rate is the header X-Sample-Rate
			if resp.Header.Get("X-Sample-Rate") != "24000" {
				t.Errorf("pcm: X-Sample-Rate %q", resp.Header.Get("X-Sample-Rate"))
			}
		}
		if len(d.PCM) != wantLen || d.SampleRate != wantRate || (f == audioenc.Opus && d.SourceRate != 24000) {
			t.Errorf("%s: %d samples at %d Hz (source %d); want %d at %d", name, len(d.PCM), d.SampleRate, d.SourceRate, wantLen, wantRate)
		}
		var energy float64
		for _, x := range d.PCM {
			energy += float64(x) * float64(x)
		}
		if energy == 0 {
			t.Errorf("%s: silent", name)
		}
	}

	// SSE: speech.audio.delta events whose base64 audio concatenates to a
	// WAV, then speech.audio.done.
	resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, frames, "stream_format", "sse"))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("sse: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var audio []byte
	var done bool
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Audio string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "speech.audio.delta":
			b, err := base64.StdEncoding.DecodeString(ev.Audio)
			if err != nil {
				t.Fatal(err)
			}
			audio = append(audio, b...)
		case "speech.audio.done":
			done = true
		}
	}
	d, err := audioenc.Decode(audio, audioenc.WAV)
	if err != nil || !done || len(d.PCM) != frames*frameSamples {
		t.Errorf("sse: done=%v, %v, %d samples", done, err, len(d.PCM))
	}
}

// TestFirstChunkBeforeTheEnd: the first audio bytes arrive while the
// utterance is still being synthesised.
func TestFirstChunkBeforeTheEnd(t *testing.T) {
	s, ts := start(t, Config{})
	resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, 60, "response_format", "pcm"))
	defer resp.Body.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if l := s.Scheduler().Load(); l.Active != 1 {
		t.Fatalf("first audio arrived with %d utterances running; want the one still running", l.Active)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || len(rest)+2 != 60*frameSamples*2 {
		t.Fatalf("%v, %d bytes", err, len(rest)+2)
	}
}

// TestConcurrentClients: 8 clients at once all get their full audio.
func TestConcurrentClients(t *testing.T) {
	_, ts := start(t, Config{MaxStreams: 8, Queue: 8})
	const frames = 5
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			format := []string{"pcm", "wav"}[i%2]
			resp := post(t, ctxT(t, 2*time.Minute), ts.URL, speech(t, frames, "response_format", format))
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				errs <- errors.New(resp.Status)
				return
			}
			f, _ := audioenc.ParseFormat(format)
			d, err := audioenc.Decode(b, f)
			if err != nil || len(d.PCM) != frames*frameSamples {
				errs <- errors.New("client " + format + ": wrong audio")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// waitLoad polls until cond holds, failing after d.
func waitLoad(t *testing.T, s Scheduler, d time.Duration, cond func(Load) bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond(s.Load()) {
		if time.Since(t0) > d {
			t.Fatalf("load %+v after %v", s.Load(), d)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(t0)
}

// TestOverload: with one slot and one queue place taken, the next request
// gets 503 with Retry-After at once; cancelling the others frees everything.
func TestOverload(t *testing.T) {
	s, ts := start(t, Config{MaxStreams: 1, Queue: 1})
	ctx, cancel := context.WithCancel(ctxT(t, time.Minute))
	defer cancel()
	done := make(chan struct{}, 2)
	for range 2 {
		go func() {
			b, _ := json.Marshal(speech(t, 5000, "response_format", "pcm"))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/audio/speech", bytes.NewReader(b))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- struct{}{}
		}()
	}
	waitLoad(t, s.Scheduler(), 20*time.Second, func(l Load) bool { return l.Active == 1 && l.Queued == 1 })
	t0 := time.Now()
	resp := post(t, ctxT(t, 10*time.Second), ts.URL, speech(t, 5))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("overload: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if e := apiErr(t, resp); e.Type != errOverloaded {
		t.Errorf("error type %q", e.Type)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("503 took %v; it should be immediate", d)
	}
	cancel()
	for range 2 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a cancelled request hangs")
		}
	}
	waitLoad(t, s.Scheduler(), 5*time.Second, func(l Load) bool { return l.Active == 0 && l.Queued == 0 })
}

// TestDisconnectFreesEngine: a client that goes away mid-stream frees its
// slot (and the engine) within 100 ms, and the next request runs.
func TestDisconnectFreesEngine(t *testing.T) {
	s, ts := start(t, Config{MaxStreams: 1, Queue: 0})
	ctx, cancel := context.WithCancel(ctxT(t, time.Minute))
	resp := post(t, ctx, ts.URL, speech(t, 5000, "response_format", "pcm"))
	buf := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if s.Scheduler().Load().Active != 1 {
		t.Fatal("not running")
	}
	cancel() // closes the connection
	resp.Body.Close()
	freed := waitLoad(t, s.Scheduler(), 5*time.Second, func(l Load) bool { return l.Active == 0 })
	if freed > 100*time.Millisecond {
		t.Errorf("slot freed %v after the disconnect; want within 100 ms", freed)
	}
	t.Logf("slot freed %v after the disconnect", freed)
	r2 := post(t, ctxT(t, time.Minute), ts.URL, speech(t, 3, "response_format", "pcm"))
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 200 || len(b) != 3*frameSamples*2 {
		t.Errorf("next request: %d, %d bytes", r2.StatusCode, len(b))
	}
}

// TestAuth: with a token every route but /healthz needs it; addresses off
// loopback are refused without one.
func TestAuth(t *testing.T) {
	_, ts := start(t, Config{Token: "s3cret"})
	for _, h := range [][]string{nil, {"Authorization", "Bearer nope"}, {"Authorization", "s3cret"}} {
		resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2), h...)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("auth %v: %d", h, resp.StatusCode)
		}
		if e := apiErr(t, resp); e.Type != errAuth {
			t.Errorf("type %q", e.Type)
		}
	}
	resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2), "Authorization", "Bearer s3cret")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("right token: %d", resp.StatusCode)
	}
	for path, want := range map[string]int{"/healthz": 200, "/v1/models": 401, "/metrics": 401} {
		r, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Errorf("GET %s without token: %d, want %d", path, r.StatusCode, want)
		}
	}
	for addr, ok := range map[string]bool{"127.0.0.1:8000": true, "localhost:80": true, "[::1]:8000": true, "127.9.9.9:1": true,
		"0.0.0.0:8000": false, ":8000": false, "192.168.1.5:8000": false, "example.com:80": false} {
		if err := CheckListen(addr, ""); (err == nil) != ok {
			t.Errorf("CheckListen(%q, no token) = %v", addr, err)
		}
		if err := CheckListen(addr, "t"); err != nil {
			t.Errorf("CheckListen(%q, token) = %v", addr, err)
		}
	}
}

// TestBadRequests: each malformed request gets its status and an OpenAI
// error naming the field, and none reaches the engine.
func TestBadRequests(t *testing.T) {
	s, ts := start(t, Config{MaxInputRunes: 50})
	raw := func(body string) *http.Response {
		resp, err := http.Post(ts.URL+"/v1/audio/speech", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	cases := []struct {
		name   string
		resp   *http.Response
		status int
		param  string
		says   string
	}{
		{"oversize", raw(`{"input":"` + strings.Repeat("a", 70<<10) + `"}`), 413, "", "65536"},
		{"bad json", raw(`{"input": "hi",`), 400, "", "JSON"},
		{"two values", raw(`{"input":"hi","voice":"` + presetVoice(t) + `"} {}`), 400, "", "more than one"},
		{"no input", post(t, ctxT(t, time.Minute), ts.URL, map[string]any{"voice": presetVoice(t)}), 400, "input", "required"},
		{"long input", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "input", strings.Repeat("word ", 20))), 400, "input", "at most 50"},
		{"unknown voice", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "voice", "alloy")), 400, "voice", presetVoice(t)},
		{"no voice", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "voice", "")), 400, "voice", "required"},
		{"mp3", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "response_format", "mp3")), 400, "response_format", "wav, pcm, flac, opus"},
		{"speed", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "speed", 9)), 400, "speed", "outside"},
		{"stream format", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "stream_format", "ws")), 400, "stream_format", "sse"},
		{"language", post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "language", "klingon")), 400, "language", "klingon"},
	}
	for _, c := range cases {
		if c.resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, c.resp.StatusCode, c.status)
		}
		e := apiErr(t, c.resp)
		got := ""
		if e.Param != nil {
			got = *e.Param
		}
		if got != c.param || !strings.Contains(e.Message, c.says) {
			t.Errorf("%s: param %q message %q", c.name, got, e.Message)
		}
	}
	r, _ := http.Get(ts.URL + "/v1/audio/speech")
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET speech: %d", r.StatusCode)
	}
	r.Body.Close()
	if l := s.Scheduler().Load(); l.Active != 0 {
		t.Errorf("load %+v", l)
	}
}

// TestSpeed: speed 2 gives half the samples of the same frames, 0.5 twice.
func TestSpeed(t *testing.T) {
	if tempo.MaxSpeed == 1 {
		t.Skip("built without libsonic (nosonic)")
	}
	_, ts := start(t, Config{})
	const frames = 10
	for _, sp := range []float64{2, 0.5} {
		resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, frames, "response_format", "pcm", "speed", sp))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := float64(frames*frameSamples) / sp
		if got := float64(len(b) / 2); resp.StatusCode != 200 || got < 0.9*want || got > 1.1*want {
			t.Errorf("speed %v: %d, %.0f samples, want about %.0f", sp, resp.StatusCode, got, want)
		}
	}
}

// TestCORS: no CORS headers unless an origin is allowed; then only for it.
func TestCORS(t *testing.T) {
	get := func(url, origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, url+"/v1/audio/speech", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	_, plain := start(t, Config{})
	if h := get(plain.URL, "http://evil.example").Header.Get("Access-Control-Allow-Origin"); h != "" {
		t.Errorf("CORS on by default: %q", h)
	}
	_, ts := start(t, Config{AllowOrigins: []string{"http://app.example"}})
	if r := get(ts.URL, "http://app.example"); r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "http://app.example" {
		t.Errorf("allowed origin: %d %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if h := get(ts.URL, "http://evil.example").Header.Get("Access-Control-Allow-Origin"); h != "" {
		t.Errorf("other origin allowed: %q", h)
	}
}

// TestInfoRoutes: models, voices, healthz and metrics (after one request).
func TestInfoRoutes(t *testing.T) {
	_, ts := start(t, Config{ModelID: "tiny"})
	resp := post(t, ctxT(t, time.Minute), ts.URL, speech(t, 2, "response_format", "pcm"))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	getJSON := func(path string, v any) {
		r, err := http.Get(ts.URL + path)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, err, r.Status)
		}
		defer r.Body.Close()
		if err := json.NewDecoder(r.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var models struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	getJSON("/v1/models", &models)
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "tiny" || models.Data[0].Object != "model" {
		t.Errorf("models: %+v", models)
	}
	var voices struct{ Voices []voiceInfo }
	getJSON("/v1/voices", &voices)
	if len(voices.Voices) != len(tinyEngine(t).Voices()) || voices.Voices[0].Name != presetVoice(t) || voices.Voices[0].Type != "preset" {
		t.Errorf("voices: %+v", voices)
	}
	var h struct{ Status, Device string }
	getJSON("/healthz", &h)
	if h.Status != "ok" || !strings.HasPrefix(h.Device, "CPU") {
		t.Errorf("healthz: %+v", h)
	}
	r, _ := http.Get(ts.URL + "/metrics")
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{"talkbox_ttfc_seconds_count 1", "talkbox_rtf_count 1", "talkbox_active_streams 0",
		"talkbox_queue_depth 0", `talkbox_speech_requests_total{format="pcm",outcome="ok"} 1`, "talkbox_device_info{device=\"CPU"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
