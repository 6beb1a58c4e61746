package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"talkbox/engine"
	"talkbox/engine/audioenc"
	"talkbox/engine/tempo"
	"talkbox/engine/voice"
)

// speechRequest is OpenAI's body for POST /v1/audio/speech, plus language.
// Unknown fields are ignored, as clients send extras.
type speechRequest struct {
	Model          string          `json:"model"`
	Input          *string         `json:"input"`
	Voice          json.RawMessage `json:"voice"` // "name" or {"id": "name"}
	ResponseFormat string          `json:"response_format"`
	Speed          *float64        `json:"speed"`
	Instructions   string          `json:"instructions"`
	StreamFormat   string          `json:"stream_format"` // "audio" (default) or "sse"
	Language       string          `json:"language"`      // Talkbox: "auto" or a language name
	// Frames (Talkbox) makes exactly this many 80 ms frames, ignoring the
	// model's end of speech: for benchmarks and tests on random-weight
	// checkpoints, which never learned to stop (bench --e2e-frames does the same).
	Frames int `json:"frames"`
}

// maxFrames bounds Frames: 10 minutes of audio.
const maxFrames = 7500

// badRequest is a 400 with the offending parameter.
type badRequest struct{ param, msg string }

func (e *badRequest) Error() string { return e.msg }

// speechJob is a validated request.
type speechJob struct {
	req    engine.Request
	format audioenc.Format
	speed  float64
	sse    bool
	notes  []string // what was ignored, reported in a response header
}

func (s *Server) parseSpeech(body []byte) (*speechJob, error) {
	var in speechRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil {
		return nil, &badRequest{"", "the body is not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &badRequest{"", "the body holds more than one JSON value"}
	}
	job := &speechJob{speed: 1}
	if in.Input == nil || strings.TrimSpace(*in.Input) == "" {
		return nil, &badRequest{"input", "input is required: the text to speak"}
	}
	if n := utf8.RuneCountInString(*in.Input); n > s.cfg.MaxInputRunes {
		return nil, &badRequest{"input", fmt.Sprintf("input is %d characters; at most %d per request (split long text into sentences)", n, s.cfg.MaxInputRunes)}
	}
	if !utf8.ValidString(*in.Input) {
		return nil, &badRequest{"input", "input is not valid UTF-8"}
	}
	if in.Frames < 0 || in.Frames > maxFrames {
		return nil, &badRequest{"frames", fmt.Sprintf("frames %d is outside 0 to %d", in.Frames, maxFrames)}
	}
	job.req = engine.Request{Text: *in.Input, Language: in.Language, ExactFrames: in.Frames}

	name, err := voiceName(in.Voice)
	if err != nil {
		return nil, err
	}
	if err := s.pickVoice(job, name); err != nil {
		return nil, err
	}

	format := in.ResponseFormat
	if format == "" {
		format = "wav"
	}
	if job.format, err = audioenc.ParseFormat(format); err != nil {
		return nil, &badRequest{"response_format", fmt.Sprintf("response_format %q is not supported; use one of %s", format, strings.Join(audioenc.Formats(), ", "))}
	}
	if in.Speed != nil {
		job.speed = *in.Speed
		if !(job.speed >= tempo.MinSpeed && job.speed <= tempo.MaxSpeed) {
			return nil, &badRequest{"speed", fmt.Sprintf("speed %v is outside %v to %v", job.speed, tempo.MinSpeed, tempo.MaxSpeed)}
		}
	}
	if strings.TrimSpace(in.Instructions) != "" {
		if s.eng.SupportsInstruct() {
			job.req.Instruct = in.Instructions
		} else {
			job.notes = append(job.notes, "instructions (this model takes none)")
		}
	}
	switch in.StreamFormat {
	case "", "audio":
	case "sse":
		job.sse = true
	default:
		return nil, &badRequest{"stream_format", fmt.Sprintf("stream_format %q: use audio or sse", in.StreamFormat)}
	}
	return job, nil
}

// pickVoice resolves the voice: a preset of a CustomVoice model, a cloned
// voice of a Base model (loaded from the library, which checks the name
// before it touches the file system), or nothing for VoiceDesign, whose
// voice is described in instructions.
func (s *Server) pickVoice(job *speechJob, name string) error {
	var names []string
	for _, v := range s.voiceList() {
		names = append(names, v.Name)
	}
	unknown := func() error {
		what := "voice is required"
		if name != "" {
			what = fmt.Sprintf("unknown voice %q", name)
		}
		list := strings.Join(names, ", ")
		if len(names) == 0 {
			list = "none yet (add one with `talkbox voice add`)"
		}
		return &badRequest{"voice", fmt.Sprintf("%s; this model's voices: %s", what, list)}
	}
	switch {
	case s.eng.IsBase():
		if name == "" || s.cfg.Voices == nil {
			return unknown()
		}
		v, err := s.cfg.Voices.Load(name)
		if errors.Is(err, voice.ErrNotFound) || errors.Is(err, voice.ErrBadName) {
			return unknown()
		}
		if err != nil {
			return &badRequest{"voice", err.Error()}
		}
		job.req.Clone = v
	case len(s.eng.Voices()) > 0:
		for _, v := range s.eng.Voices() {
			if strings.EqualFold(v.Name, name) {
				job.req.Voice = v.Name
			}
		}
		if job.req.Voice == "" {
			return unknown()
		}
	case name != "":
		job.notes = append(job.notes, "voice (this model has no preset voices; describe one in instructions)")
	}
	return nil
}

// keepDerived saves what the engine derived from a cloned voice for this
// model (speaker embedding, reference codes), so the next request skips it.
func (s *Server) keepDerived(v *voice.Voice, before int) {
	if v == nil || len(v.Derived) == before || s.cfg.Voices == nil {
		return
	}
	if err := s.cfg.Voices.Save(v); err != nil {
		s.log.Warn("could not keep a cloned voice's derived data", "voice", v.Name, "reason", err)
	}
}

// voiceName accepts "name" or {"id": "name"}.
func voiceName(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		return strings.TrimSpace(name), nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", &badRequest{"voice", "voice must be a name or {\"id\": name}"}
	}
	return strings.TrimSpace(obj.ID), nil
}

func (s *Server) speech(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, errInvalidRequest, "use POST", "", "method_not_allowed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.BodyLimit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.m.rejected.WithLabelValues("body_too_large").Inc()
			writeError(w, http.StatusRequestEntityTooLarge, errInvalidRequest, fmt.Sprintf("request body over %d bytes", s.cfg.BodyLimit), "", "body_too_large")
			return
		}
		writeError(w, http.StatusBadRequest, errInvalidRequest, "reading the body: "+err.Error(), "", "")
		return
	}
	job, err := s.parseSpeech(body)
	if err != nil {
		s.m.rejected.WithLabelValues("bad_request").Inc()
		var br *badRequest
		errors.As(err, &br)
		writeError(w, http.StatusBadRequest, errInvalidRequest, br.msg, br.param, "")
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()

	derived := 0
	if job.req.Clone != nil {
		derived = len(job.req.Clone.Derived)
	}
	chunks, err := s.sched.Submit(ctx, job.req)
	switch {
	case errors.Is(err, ErrOverloaded):
		s.m.rejected.WithLabelValues("overloaded").Inc()
		w.Header().Set("Retry-After", "1")
		l := s.sched.Load()
		writeError(w, http.StatusServiceUnavailable, errOverloaded,
			fmt.Sprintf("busy: %d streams running and %d queued (the most this server takes); retry shortly", l.Active, l.Queued), "", "overloaded")
		return
	case errors.Is(err, context.DeadlineExceeded):
		s.m.rejected.WithLabelValues("queue_timeout").Inc()
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, errOverloaded, "timed out waiting for a free stream", "", "timeout")
		return
	case errors.Is(err, context.Canceled):
		return // the client left while queued
	case err != nil:
		s.m.requests.WithLabelValues(job.format.String(), "bad_request").Inc()
		writeError(w, http.StatusBadRequest, errInvalidRequest, err.Error(), engineParam(err), "")
		return
	}
	s.keepDerived(job.req.Clone, derived) // Submit derived it, before any audio
	s.stream(ctx, cancel, w, job, chunks, start)
}

// engineParam names the request field an engine error is about.
func engineParam(err error) string {
	switch {
	case errors.Is(err, engine.ErrUnknownVoice):
		return "voice"
	case errors.Is(err, engine.ErrUnknownLang):
		return "language"
	case errors.Is(err, engine.ErrEmptyText), errors.Is(err, engine.ErrTextTooLong):
		return "input"
	}
	return ""
}

// stream sends the audio as it comes. The status is decided by the first
// chunk: an utterance that fails before any audio gets a JSON error; one
// that fails later has its connection aborted, so the client sees a
// truncated transfer rather than a short file that looks whole.
func (s *Server) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, job *speechJob,
	chunks <-chan engine.Chunk, start time.Time) {
	format := job.format.String()
	first, ok := <-chunks
	if !ok || (first.Final && first.Err != nil) {
		if ctx.Err() != nil {
			return
		}
		msg := "synthesis ended without audio"
		if ok {
			msg = first.Err.Error()
		}
		s.m.requests.WithLabelValues(format, "error").Inc()
		writeError(w, http.StatusInternalServerError, errServer, msg, "", "")
		return
	}
	rate := s.eng.SampleRate()
	stretch, err := tempo.New(rate, job.speed)
	if err != nil {
		cancel()
		writeError(w, http.StatusBadRequest, errInvalidRequest, err.Error(), "speed", "")
		return
	}
	defer stretch.Close()

	h := w.Header()
	h.Set("X-Sample-Rate", strconv.Itoa(rate))
	h.Set("Cache-Control", "no-store")
	if len(job.notes) > 0 {
		h.Set("X-Talkbox-Ignored", strings.Join(job.notes, "; "))
	}
	out := &flushWriter{w: w, rc: http.NewResponseController(w)}
	var sink io.Writer = out
	var sse *sseWriter
	if job.sse {
		h.Set("Content-Type", "text/event-stream")
		sse = &sseWriter{out: out}
		sink = sse
	} else {
		h.Set("Content-Type", job.format.ContentType())
	}
	// The encoder writes its header at once, which sends the 200; a format
	// this build lacks (noopus) fails before that and gets a JSON error.
	enc, err := audioenc.New(sink, job.format, rate)
	if err != nil {
		cancel()
		s.m.requests.WithLabelValues(format, "bad_request").Inc()
		writeError(w, http.StatusBadRequest, errInvalidRequest, err.Error(), "response_format", "")
		return
	}
	out.flush()

	sent := 0
	ttfc := false
	c := first
	for {
		if len(c.PCM) > 0 {
			pcm, err := stretch.Process(c.PCM)
			if err == nil {
				err = enc.Write(pcm)
			}
			if err == nil && sse != nil {
				err = sse.delta()
			}
			if err == nil {
				err = out.flush()
			}
			if err != nil { // the client went away, or the stretcher failed
				cancel()
				s.abort(format, err)
			}
			sent += len(pcm)
			if !ttfc {
				ttfc = true
				s.m.ttfc.Observe(time.Since(start).Seconds())
			}
		}
		if c.Final {
			break
		}
		if c, ok = <-chunks; !ok {
			break
		}
	}
	if !c.Final || c.Err != nil {
		cancel()
		err := errors.New("stream ended early")
		if c.Err != nil {
			err = c.Err
		}
		s.abort(format, err)
	}
	rest, err := stretch.Flush()
	if err == nil {
		err = enc.Write(rest)
	}
	if err == nil {
		err = enc.Close()
	}
	if err == nil && sse != nil {
		if err = sse.delta(); err == nil {
			err = sse.done()
		}
	}
	if err == nil {
		err = out.flush()
	}
	if err != nil {
		s.abort(format, err)
	}
	sent += len(rest)
	if st := c.Stats; st != nil && st.RTF > 0 {
		s.m.rtf.Observe(st.RTF)
	}
	s.m.audio.Add(float64(sent) / float64(rate))
	s.m.requests.WithLabelValues(format, "ok").Inc()
}

// abort ends a response whose headers are out: net/http then closes the
// connection without the final chunk, so the client sees an incomplete body.
func (s *Server) abort(format string, err error) {
	s.m.requests.WithLabelValues(format, "aborted").Inc()
	s.log.Debug("speech stream aborted", "reason", err)
	panic(http.ErrAbortHandler)
}

// flushWriter writes to the response and flushes on demand.
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f *flushWriter) flush() error                { return f.rc.Flush() }

// sseWriter collects encoded bytes and sends them as OpenAI's speech SSE
// events: speech.audio.delta with base64 audio, then speech.audio.done.
type sseWriter struct {
	out *flushWriter
	buf []byte
}

func (s *sseWriter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	return len(p), nil
}

func (s *sseWriter) delta() error {
	if len(s.buf) == 0 {
		return nil
	}
	ev, _ := json.Marshal(map[string]string{"type": "speech.audio.delta", "audio": base64.StdEncoding.EncodeToString(s.buf)})
	s.buf = s.buf[:0]
	_, err := fmt.Fprintf(s.out, "data: %s\n\n", ev)
	return err
}

func (s *sseWriter) done() error {
	_, err := fmt.Fprintf(s.out, "data: %s\n\n", `{"type":"speech.audio.done","usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0}}`)
	return err
}
