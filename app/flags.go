package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
)

// Ranges of the numeric flags, one place for all verbs.
const (
	maxThreads = 256     // CPU threads; 0 = all
	maxFrames  = 1 << 14 // frames asked for on the command line (~22 minutes)
	maxRuns    = 1000
)

// rangedInt is an int flag that refuses values outside [lo, hi] when parsed,
// so a bad number is a usage error before any work starts.
type rangedInt struct {
	v      *int
	lo, hi int
	note   string // what lo means, if special ("all", "skip")
}

func (r *rangedInt) String() string {
	if r.v == nil {
		return ""
	}
	return strconv.Itoa(*r.v)
}

func (r *rangedInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < r.lo || n > r.hi {
		if r.note != "" {
			return fmt.Errorf("out of range: want %d (%s) to %d", r.lo, r.note, r.hi)
		}
		return fmt.Errorf("out of range: want %d to %d", r.lo, r.hi)
	}
	*r.v = n
	return nil
}

// intFlag defines an int flag limited to [lo, hi]; note says what lo means
// when it is special (e.g. "all" for --threads 0).
func intFlag(fs *flag.FlagSet, name string, def, lo, hi int, note, usage string) *int {
	v := new(int)
	*v = def
	fs.Var(&rangedInt{v: v, lo: lo, hi: hi, note: note}, name, usage)
	return v
}

// intFlagVar is intFlag into an existing variable.
func intFlagVar(fs *flag.FlagSet, v *int, name string, def, lo, hi int, note, usage string) {
	*v = def
	fs.Var(&rangedInt{v: v, lo: lo, hi: hi, note: note}, name, usage)
}

// parseFlags parses args; a bad flag is a usage error (exit status 2),
// -h/--help stays flag.ErrHelp (exit 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	return nil
}
