package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"talkbox/app/hub"
	"talkbox/app/server"
	"talkbox/engine"
	"talkbox/engine/cpu"
)

func init() {
	register(verb{name: "serve", summary: "serve an OpenAI-compatible speech API (POST /v1/audio/speech) on this machine", run: runServe})
}

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	modelFlag := fs.String("model", "", "model folder or installed name (default: the installed model)")
	listen := fs.String("listen", "127.0.0.1:8000", "address to listen on; other than loopback needs --token")
	token := fs.String("token", "", "require \"Authorization: Bearer TOKEN\" (default: $TALKBOX_TOKEN)")
	maxStreams := fs.Int("max-streams", 0, "utterances admitted at once (default 1 on the CPU, 8 on the GPU, where they decode together in one batch)")
	queue := fs.Int("queue", 16, "requests waiting beyond --max-streams before 503 (0: none)")
	allowOrigin := fs.String("allow-origin", "", "comma-separated browser origins allowed by CORS (\"*\" for any; default none)")
	timeout := fs.Duration("timeout", server.DefaultRequestTimeout, "deadline of one request, queueing included")
	drain := fs.Duration("drain", server.DefaultDrainTimeout, "on SIGINT/SIGTERM, time in-flight streams get to finish")
	backendName := fs.String("backend", engine.BackendAuto, "auto, cpu or cuda")
	threads := fs.Int("threads", 0, "CPU threads (0 = all)")
	precision := fs.String("precision", "", "CPU weights: f32 (the reference) or int8 (default: "+string(cpu.DefaultPrecision)+")")
	verbose := fs.Bool("v", false, "log every request problem")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *token == "" {
		*token = os.Getenv("TALKBOX_TOKEN")
	}
	if err := server.CheckListen(*listen, *token); err != nil {
		return usageErrorf("%v", err)
	}
	if _, err := cpu.ParsePrecision(*precision); err != nil {
		return usageErrorf("--precision: %v", err)
	}
	if *queue < 0 {
		return usageErrorf("--queue %d: want 0 or more", *queue)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	dir, err := hub.Resolve(*modelFlag)
	if err != nil {
		return err
	}
	// The GPU engine decodes up to this many utterances at once (the CPU one
	// ignores it): the admitted streams, or the GPU default below.
	streams := *maxStreams
	if streams <= 0 {
		streams = 8
	}
	e, err := engine.Open(context.Background(), dir, engine.Options{Backend: *backendName, Threads: *threads, Precision: *precision,
		Logger: log, Streams: streams, WeightCache: engine.DefaultWeightCache()})
	if err != nil {
		return err
	}
	defer e.Close()
	if *maxStreams <= 0 {
		*maxStreams = 1
		if !strings.HasPrefix(strings.ToLower(e.Device()), "cpu") {
			*maxStreams = 8
		}
	}
	cfg := server.Config{
		ModelID: filepath.Base(dir), Token: *token, MaxStreams: *maxStreams, Queue: *queue,
		RequestTimeout: *timeout, DrainTimeout: *drain, Logger: log,
	}
	if cfg.Queue == 0 {
		cfg.Queue = -1 // Config's 0 means the default
	}
	for _, o := range strings.Split(*allowOrigin, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowOrigins = append(cfg.AllowOrigins, o)
		}
	}
	if e.IsBase() {
		// A Base model speaks in the user's cloned voices (talkbox voice add).
		if cfg.Voices, err = voiceLibrary(); err != nil {
			return err
		}
	}
	srv := server.New(e, cfg)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	auth := "no token (loopback only)"
	if *token != "" {
		auth = "bearer token required"
	}
	fmt.Fprintf(stdout, "talkbox: serving %s on %s at http://%s (%s; %d streams, queue %d)\n",
		e.ModelName(), e.Device(), ln.Addr(), auth, *maxStreams, max(cfg.Queue, 0))
	if !server.IsLoopback(*listen) {
		fmt.Fprintf(stdout, "talkbox: %s accepts connections from other machines; every request needs the token\n", *listen)
	}
	start := time.Now()
	err = srv.Serve(ctx, ln)
	fmt.Fprintf(stdout, "talkbox: stopped after %s\n", time.Since(start).Round(time.Second))
	return err
}
