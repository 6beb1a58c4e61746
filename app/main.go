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
	"strings"
	"unicode/utf8"
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
	quietStderr()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// `talkbox --model DIR` opens the window on that model, as
	// TALKBOX_MODEL=DIR does.
	if len(args) == 2 && args[0] == "--model" || len(args) == 1 && strings.HasPrefix(args[0], "--model=") {
		os.Setenv(envModel, strings.TrimPrefix(args[len(args)-1], "--model="))
		args = nil
	}
	if len(args) == 0 {
		if windowMain != nil {
			if err := displayMissing(); err != nil {
				fmt.Fprintf(stderr, "talkbox: %v; the window needs one, the command-line verbs work without: %s (talkbox help)\n", err, strings.Join(verbNames(), ", "))
				return 1
			}
		}
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
		if len(args) > 1 && name == "help" {
			return helpVerb(args[1], stdout, stderr)
		}
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
		fmt.Fprintf(stderr, "talkbox %s: %s\n", name, capMessage(err.Error()))
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// helpVerb prints one verb's summary and flags (talkbox help VERB).
func helpVerb(name string, stdout, stderr io.Writer) int {
	v, ok := verbs[name]
	if !ok {
		fmt.Fprintf(stderr, "talkbox help: unknown verb %q\n", name)
		usage(stderr)
		return 2
	}
	fmt.Fprintf(stdout, "talkbox %s: %s\n\n", v.name, v.summary)
	if err := v.run([]string{"-h"}, stdout, stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "talkbox help %s: %v\n", name, err)
		return 1
	}
	return 0
}

// maxMessage bounds an error line: a hostile file can make a parser quote
// megabytes; the head of the message says what went wrong.
const maxMessage = 2000

func capMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Talkbox: type text, hear it spoken (Qwen3-TTS).")
	fmt.Fprintln(w, "\nusage: talkbox            open the window")
	fmt.Fprintln(w, "       talkbox VERB [flags] [args]")
	fmt.Fprintln(w, "\nverbs:")
	for _, n := range verbNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, verbs[n].summary)
	}
}

func verbNames() []string {
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// envModel names one model folder (or store name) for the window to load
// instead of the store's list.
const envModel = "TALKBOX_MODEL"

// displayMissing reports why no X display can be reached: GLFW panics with
// a goroutine dump instead of an error when it cannot open one (SSH, a
// service). DISPLAY=:N is checked against the X server's local socket;
// other forms (host:N, forwarded) are left to the window.
func displayMissing() error {
	d := os.Getenv("DISPLAY")
	if d == "" {
		return errors.New("no display found (DISPLAY is not set)")
	}
	if !strings.HasPrefix(d, ":") {
		return nil
	}
	n := strings.TrimPrefix(d, ":")
	if i := strings.IndexByte(n, '.'); i >= 0 {
		n = n[:i]
	}
	sock := "/tmp/.X11-unix/X" + n
	if _, err := os.Stat(sock); err != nil {
		return fmt.Errorf("no display found (DISPLAY=%s, but no X server at %s)", d, sock)
	}
	return nil
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
