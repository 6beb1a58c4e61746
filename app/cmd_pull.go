package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"talkbox/app/hub"
)

func init() {
	register(verb{name: "pull", summary: "download a model from Hugging Face (default " + hub.Known[0].Alias + ")", run: runPull})
}

func runPull(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pull", stderr)
	dir := fs.String("dir", "", "model folder (default $"+hub.EnvModels+", else $XDG_DATA_HOME/talkbox/models)")
	rev := fs.String("revision", "main", "branch, tag or commit to download")
	quiet := fs.Bool("quiet", false, "print no progress")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: talkbox pull [flags] [MODEL]")
		fmt.Fprintln(stderr, "\nDownloads MODEL (an alias or a Hugging Face repository) into the model folder,")
		fmt.Fprintln(stderr, "resuming partial files and checking every file against the Hub's hashes.")
		fmt.Fprintln(stderr, "HF_TOKEN and HF_ENDPOINT are honoured. Models:")
		for _, k := range hub.Known {
			fmt.Fprintf(stderr, "  %-18s %s (%s)\n", k.Alias, k.Repo, k.About)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(names) > 1 {
		return usageErrorf("pull takes one model, got %d: %v", len(names), names)
	}
	name := ""
	if len(names) == 1 {
		name = names[0]
	}
	store, err := openStore(*dir)
	if err != nil {
		return err
	}
	store.Revision = *rev

	// Ctrl-C stops the download cleanly; the partial file is kept for next time.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress func(hub.Progress)
	if !*quiet {
		progress = hub.NewProgressPrinter(stderr, isTerminal(stderr))
	}
	modelDir, err := store.Pull(ctx, name, progress)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted: %w", err)
	}
	if err != nil {
		return err
	}
	if in := hub.Inspect(modelDir); !in.Complete {
		return fmt.Errorf("downloaded %s, but it is not usable: %s", modelDir, in.Problem)
	}
	fmt.Fprintln(stdout, modelDir)
	return nil
}

// openStore is the store at dir, or the default one when dir is "".
func openStore(dir string) (*hub.Store, error) {
	if dir == "" {
		return hub.DefaultStore()
	}
	return hub.NewStore(dir), nil
}

// parseInterspersed lets flags follow the positional arguments
// ("talkbox pull 1.7b --dir X"), which package flag alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// isTerminal reports whether w is a terminal that can redraw a line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
