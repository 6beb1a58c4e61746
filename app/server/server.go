// Package server is Talkbox's local speech API: OpenAI's POST
// /v1/audio/speech (streamed WAV, PCM, FLAC or Ogg Opus, or SSE), GET
// /v1/models, /v1/voices, /healthz and /metrics. It listens on loopback
// unless given a bearer token, admits utterances through a Scheduler, and
// drains on shutdown.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"talkbox/engine"
	"talkbox/engine/voice"
)

// Defaults for Config's zero values.
const (
	DefaultBodyLimit      = 64 << 10
	DefaultRequestTimeout = 5 * time.Minute
	DefaultDrainTimeout   = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// ModelID is the id /v1/models lists (requests may name any model: one
	// is served).
	ModelID string
	// Token, when set, is required as "Authorization: Bearer TOKEN" on every
	// route but /healthz. A non-loopback Listen address needs one.
	Token string
	// AllowOrigins lists the browser origins given CORS headers ("*" for
	// any); none by default.
	AllowOrigins []string
	// MaxStreams and Queue size the default scheduler (1 and 16 when 0;
	// Queue < 0 means no queue).
	MaxStreams, Queue int
	// Voices is the user's cloned voices, spoken by Base models (which
	// have no presets); nil: none.
	Voices *voice.Library
	// Scheduler replaces the default one (which shares the engine).
	Scheduler      Scheduler
	BodyLimit      int64         // request body bytes (64 KB)
	MaxInputRunes  int           // characters of input (engine.MaxTextRunes)
	RequestTimeout time.Duration // whole request, queue included (5 min)
	DrainTimeout   time.Duration // shutdown: in-flight streams finish within this, then are cancelled (30 s)
	Logger         *slog.Logger
}

// Server serves one engine.
type Server struct {
	cfg    Config
	eng    Synthesizer
	sched  Scheduler
	m      *metrics
	log    *slog.Logger
	base   context.Context // parent of every request's context; cancelled to abort streams
	cancel context.CancelFunc
}

// New builds a Server for eng.
func New(eng Synthesizer, cfg Config) *Server {
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.MaxInputRunes <= 0 || cfg.MaxInputRunes > engine.MaxTextRunes {
		cfg.MaxInputRunes = engine.MaxTextRunes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 1
	}
	if cfg.Queue == 0 {
		cfg.Queue = 16
	}
	if cfg.ModelID == "" {
		cfg.ModelID = "talkbox"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, eng: eng, log: cfg.Logger, m: newMetrics(eng.Device(), eng.ModelName())}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.sched = cfg.Scheduler
	if s.sched == nil {
		s.sched = NewSharedEngine(eng, cfg.MaxStreams, max(cfg.Queue, 0), s.m.setLoad)
	}
	return s
}

// Scheduler is the server's scheduler (tests watch its Load).
func (s *Server) Scheduler() Scheduler { return s.sched }

// IsLoopback reports whether a listen address only accepts local
// connections: a loopback IP or "localhost". An empty host (every
// interface) or any other name is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses a non-loopback address without a token.
func CheckListen(addr, token string) error {
	if !IsLoopback(addr) && token == "" {
		return fmt.Errorf("%s is reachable from other machines: give --token (clients then send \"Authorization: Bearer TOKEN\"), or listen on 127.0.0.1", addr)
	}
	return nil
}

// Handler is the server's routes with auth and CORS around them.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/audio/speech", s.speech)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /v1/voices", s.voices)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", s.m.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errInvalidRequest, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), "", "not_found")
	})
	return s.cors(s.auth(mux))
}

// auth requires the bearer token (when one is set) on every route but
// /healthz, comparing in constant time.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.Method != http.MethodOptions {
			got := []byte(r.Header.Get("Authorization"))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				s.m.rejected.WithLabelValues("auth").Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="talkbox"`)
				writeError(w, http.StatusUnauthorized, errAuth, "missing or wrong bearer token (send \"Authorization: Bearer TOKEN\")", "", "invalid_api_key")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cors answers browsers only for the origins given (none by default).
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.cfg.AllowOrigins) == 0 {
		return next
	}
	any := slices.Contains(s.cfg.AllowOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && (any || slices.Contains(s.cfg.AllowOrigins, origin)) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{{
		"id": s.cfg.ModelID, "object": "model", "created": 0, "owned_by": "talkbox", "description": s.eng.ModelName(),
	}}})
}

type voiceInfo struct {
	Name    string  `json:"name"`
	Type    string  `json:"type"` // "preset" or "cloned"
	Dialect string  `json:"dialect,omitempty"`
	Mode    string  `json:"mode,omitempty"`    // cloned: "icl" or "x-vector"
	Seconds float64 `json:"seconds,omitempty"` // cloned: reference audio length
}

// voiceList is what this model can speak in: its presets, or for a Base
// model the cloned voices.
func (s *Server) voiceList() []voiceInfo {
	out := []voiceInfo{}
	if s.eng.IsBase() {
		if s.cfg.Voices != nil {
			list, errs := s.cfg.Voices.List()
			for _, err := range errs {
				s.log.Warn("skipping a voice file", "reason", err)
			}
			for _, v := range list {
				out = append(out, voiceInfo{Name: v.Name, Type: "cloned", Mode: v.Mode, Seconds: v.Seconds})
			}
		}
		return out
	}
	for _, v := range s.eng.Voices() {
		out = append(out, voiceInfo{Name: v.Name, Type: "preset", Dialect: v.Dialect})
	}
	return out
}

func (s *Server) voices(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"voices": s.voiceList(), "languages": s.eng.Languages()})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	l := s.sched.Load()
	writeJSON(w, map[string]any{"status": "ok", "model": s.eng.ModelName(), "device": s.eng.Device(),
		"active": l.Active, "queued": l.Queued, "max_streams": l.MaxActive, "max_queue": l.MaxQueued})
}

// Serve answers on ln until ctx is done, then drains: no new connections,
// in-flight streams may finish within DrainTimeout, after which they are
// cancelled. It returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.cancel()
		return err
	case <-ctx.Done():
	}
	l := s.sched.Load()
	s.log.Info("shutting down: finishing streams", "active", l.Active, "queued", l.Queued, "timeout", s.cfg.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	err := srv.Shutdown(dctx)
	if err != nil {
		s.log.Info("drain timed out: cancelling the remaining streams")
		s.cancel()
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	s.cancel()
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return nil
}
