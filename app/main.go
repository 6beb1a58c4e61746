// Command talkbox is the Talkbox desktop app (no verb) and its CLI verbs.
// Each verb lives in its own cmd_*.go file and registers itself in init, so
// verbs stay independent of each other.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// verb is one CLI subcommand.
type verb struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var verbs = map[string]verb{}

// register adds a verb; called from init in each cmd_*.go file.
func register(v verb) { verbs[v.name] = v }

// windowMain opens the desktop window; set by window.go when the UI is built in.
var windowMain func() error

// errUsage marks errors whose message is a usage hint (exit status 2).
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		if windowMain == nil {
			fmt.Fprintln(stderr, "talkbox: this build has no window; use a verb (talkbox help)")
			return 2
		}
		if err := windowMain(); err != nil {
			fmt.Fprintln(stderr, "talkbox:", err)
			return 1
		}
		return 0
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		usage(stdout)
		return 0
	}
	v, ok := verbs[name]
	if !ok {
		fmt.Fprintf(stderr, "talkbox: unknown verb %q\n", name)
		usage(stderr)
		return 2
	}
	if err := v.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "talkbox %s: %v\n", name, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Talkbox: type text, hear it spoken (Qwen3-TTS).")
	fmt.Fprintln(w, "\nusage: talkbox            open the window")
	fmt.Fprintln(w, "       talkbox VERB [flags] [args]")
	fmt.Fprintln(w, "\nverbs:")
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, verbs[n].summary)
	}
}

// newFlags makes a FlagSet that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("talkbox "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// usageErrorf wraps a usage problem so run exits with status 2.
func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}
