package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"talkbox/engine/golden"
)

func sayArgs(ck string, extra ...string) []string {
	return append([]string{"say", "--model", ck, "--voice", "ryan", "--backend", "cpu", "--greedy"}, extra...)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

// A directory as --out is refused before any synthesis (it used to fail only
// when renaming after the last frame).
func TestSayRefusesDirectoryFirst(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(sayArgs(ck, "--frames", "4", "--out", dir, "hello"), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "is a directory") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("synthesis ran: %q", stdout.String())
	}
	if n := dirNames(t, dir); len(n) != 0 {
		t.Errorf("files left in the directory: %v", n)
	}
}

// A user's own X.wav.part is neither overwritten nor deleted, and nothing
// else is left beside the output.
func TestSayLeavesUserPartFile(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := t.TempDir()
	out := filepath.Join(dir, "x.wav")
	os.WriteFile(out+".part", []byte("mine"), 0o644)
	var stdout, stderr bytes.Buffer
	if code := run(sayArgs(ck, "--frames", "3", "--out", out, "hello"), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if b, err := os.ReadFile(out + ".part"); err != nil || string(b) != "mine" {
		t.Fatalf("user's x.wav.part: %q, %v", b, err)
	}
	if n := dirNames(t, dir); len(n) != 2 {
		t.Errorf("folder holds %v, want x.wav and x.wav.part", n)
	}
}

// Special targets are written in place: /dev/null stays a device, a link
// stays a link and its target gets the audio.
func TestSaySpecialTargets(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	var stdout, stderr bytes.Buffer
	if code := run(sayArgs(ck, "--frames", "2", "--out", "/dev/null", "--codes-out", "/dev/null", "hello"), &stdout, &stderr); code != 0 {
		t.Fatalf("/dev/null: exit %d: %s", code, stderr.String())
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null replaced: %v", err)
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real.wav")
	os.WriteFile(real, nil, 0o644)
	link := filepath.Join(dir, "link.wav")
	os.Symlink("real.wav", link)
	stderr.Reset()
	if code := run(sayArgs(ck, "--frames", "2", "--out", link, "hello"), &stdout, &stderr); code != 0 {
		t.Fatalf("link: exit %d: %s", code, stderr.String())
	}
	if st, _ := os.Lstat(link); st.Mode()&fs.ModeSymlink == 0 {
		t.Error("the link was replaced by a file")
	}
	if st, _ := os.Stat(real); st.Size() != 44+2*1920*2 {
		t.Errorf("real file has %d bytes", st.Size())
	}
}

// A write error (a full disk) fails the command (export's own test checks
// that it stops the engine at once).
func TestSayWriteErrorStopsSynthesis(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	var stdout, stderr bytes.Buffer
	if code := run(sayArgs(ck, "--frames", "2", "--out", "/dev/full", "hello"), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no space left") {
		t.Errorf("/dev/full: exit %d, %q", code, stderr.String())
	}
}

// SIGTERM and SIGHUP cancel like Ctrl-C: the user's file is untouched and no
// temporary file is left.
func TestSaySignalsLeaveNothing(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		// A handler of the test's own keeps the process alive whatever say
		// does with the signal.
		keep := make(chan os.Signal, 1)
		signal.Notify(keep, sig)
		dir := t.TempDir()
		out := filepath.Join(dir, "x.wav")
		os.WriteFile(out, []byte("old audio"), 0o644)
		go func() {
			// Once audio reaches the temporary file, synthesis is under way.
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if m, _ := filepath.Glob(filepath.Join(dir, ".x.wav.*")); len(m) == 1 {
					if st, err := os.Stat(m[0]); err == nil && st.Size() > 44 {
						break
					}
				}
			}
			syscall.Kill(os.Getpid(), sig)
		}()
		var stdout, stderr bytes.Buffer
		code := run(sayArgs(ck, "--frames", "500", "--chunk-frames", "1", "--out", out, "--codes-out", filepath.Join(dir, "c.json"), "hello"), &stdout, &stderr)
		signal.Stop(keep)
		if code != 1 || !strings.Contains(stderr.String(), "cancel") {
			t.Errorf("%v: exit %d, stderr %q", sig, code, stderr.String())
		}
		if b, _ := os.ReadFile(out); string(b) != "old audio" {
			t.Errorf("%v: user's file changed (%d bytes)", sig, len(b))
		}
		if n := dirNames(t, dir); len(n) != 1 {
			t.Errorf("%v: folder holds %v", sig, n)
		}
	}
}

// Without --voice, say uses the model's first voice (it used to fail with
// "unknown voice"); --instruct on a model that ignores it is an error naming
// the models that take one (it used to be dropped silently).
func TestSayDefaultVoiceAndInstruct(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	out := filepath.Join(t.TempDir(), "x.wav")
	var stdout, stderr bytes.Buffer
	args := []string{"say", "--model", ck, "--backend", "cpu", "--greedy", "--frames", "2", "--out", out, "hello"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("no --voice: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	args = []string{"say", "--model", ck, "--backend", "cpu", "--instruct", "whisper", "--frames", "2", "--out", out, "hello"}
	if code := run(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "1.7B CustomVoice and the VoiceDesign") {
		t.Fatalf("instruct on 0.6B: exit %d: %s", code, stderr.String())
	}
}

// endlessText never ends, like /dev/zero or a runaway pipe.
type endlessText struct{}

func (endlessText) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// Text from a file or standard input is bounded: /dev/zero or an endless
// pipe is an error naming the limit, not a process that grows until killed.
func TestSayTextIsBounded(t *testing.T) {
	for _, tc := range []struct {
		args []string
		in   io.Reader
	}{
		{[]string{"say", "--file", "/dev/zero", "--out", "/dev/null"}, nil},
		{[]string{"say", "--out", "/dev/null", "-"}, endlessText{}},
	} {
		if tc.in != nil {
			stdin = tc.in
		}
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		stdin = os.Stdin
		if code != 1 || !strings.Contains(stderr.String(), "more than 16 MB of text") {
			t.Errorf("%v: exit %d, %q", tc.args, code, stderr.String())
		}
	}
}
