package main

import (
	"bytes"
	"strings"
	"testing"
)

// Numeric flags are range-checked, and every flag error exits 2 (a usage
// error) with a message naming the flag and the range; before, --threads -3
// or --chunk-frames 0 reached the engine and bad flags exited 1.
func TestFlagRangesAndExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"say", "--threads", "-3", "--out", "x.wav", "hi"}, "-threads"},
		{[]string{"say", "--threads", "1000", "--out", "x.wav", "hi"}, "want 0 (all) to 256"},
		{[]string{"say", "--chunk-frames", "0", "--out", "x.wav", "hi"}, "want 1 to 1024"},
		{[]string{"say", "--chunk-frames", "-1", "--out", "x.wav", "hi"}, "chunk-frames"},
		{[]string{"say", "--chunk-frames", "1000000000", "--out", "x.wav", "hi"}, "out of range"},
		{[]string{"say", "--frames", "99999999", "--out", "x.wav", "hi"}, "-frames"},
		{[]string{"say", "--frames", "x", "--out", "x.wav", "hi"}, "not an integer"},
		{[]string{"say", "--no-such-flag", "hi"}, "not defined"},
		{[]string{"bench", "--runs", "0"}, "-runs"},
		{[]string{"bench", "--threads", "-1"}, "-threads"},
		{[]string{"bench", "--streams", "1000"}, "-streams"},
		{[]string{"decode", "--bogus"}, "not defined"},
		{[]string{"tokenize", "--bogus"}, "not defined"},
		{[]string{"models", "--bogus"}, "not defined"},
		{[]string{"synth", "--seed", "-1"}, "seed"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d (want 2), stderr %q (want %q)", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// `talkbox help VERB` prints that verb's flags (it used to print the general
// usage); an unknown verb is a usage error.
func TestHelpVerb(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"help", "say"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"talkbox say:", "-chunk-frames", "-voice"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help say lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	if code := run([]string{"help", "nope"}, &stdout, &stderr); code != 2 {
		t.Errorf("help nope: exit %d", code)
	}
}

func TestCapMessage(t *testing.T) {
	long := strings.Repeat("é", 5000)
	got := capMessage(long)
	if len(got) > maxMessage+40 || !strings.Contains(got, "more bytes") {
		t.Fatalf("capped to %d bytes: %.80q", len(got), got)
	}
	if capMessage("short") != "short" {
		t.Fatal("short message changed")
	}
}
