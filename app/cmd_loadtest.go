package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"time"

	"talkbox/app/loadtest"
)

func init() {
	register(verb{name: "loadtest", summary: "load a speech server with concurrent streams; one JSON object (TTFC, RTF, throughput)", run: runLoadtest})
}

func runLoadtest(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("loadtest", stderr)
	url := fs.String("url", "http://127.0.0.1:8000", "server base URL")
	streams := fs.Int("streams", 1, "concurrent clients")
	requests := fs.Int("requests", 0, "total requests (default: 2 per stream)")
	text := fs.String("text", "", "text of every request (default: a sentence)")
	voice := fs.String("voice", "", "voice (default: the server's first)")
	frames := fs.Int("frames", 0, "exact frames per utterance (for random-weight checkpoints, which never stop)")
	token := fs.String("token", "", "bearer token (default: $TALKBOX_TOKEN)")
	timeout := fs.Duration("timeout", 10*time.Minute, "deadline for the whole test")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *streams < 1 {
		return usageErrorf("--streams %d: want at least 1", *streams)
	}
	if *requests <= 0 {
		*requests = 2 * *streams
	}
	if *token == "" {
		*token = os.Getenv("TALKBOX_TOKEN")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := loadtest.Run(ctx, loadtest.Config{URL: *url, Token: *token, Streams: *streams, Requests: *requests,
		Text: *text, Voice: *voice, Frames: *frames, Timeout: *timeout})
	if rep.URL != "" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if e := enc.Encode(rep); e != nil && err == nil {
			err = e
		}
	}
	return err
}
