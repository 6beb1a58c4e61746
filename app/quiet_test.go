package main

import (
	"bytes"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/golden"
)

// envHelperArgs, when set, makes TestHelperRun act as the talkbox binary:
// it runs these arguments (separated by newlines) and exits.
const envHelperArgs = "TALKBOX_TEST_HELPER_ARGS"

func TestHelperRun(t *testing.T) {
	a, ok := os.LookupEnv(envHelperArgs)
	if !ok {
		t.Skip("runs only as the child of TestNormalSessionQuietStderr")
	}
	quietStderr()
	os.Exit(run(strings.Split(a, "\n"), os.Stdout, os.Stderr))
}

// A normal command-line session prints its result and nothing on stderr,
// also under LANG=C.UTF-8 (where Fyne's lang package used to log a locale
// parse error from its package initialisation) and LANG=C. The test binary
// is re-run as the program, so what lands on file descriptor 2 from any
// package or C library is seen.
func TestNormalSessionQuietStderr(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	out := filepath.Join(t.TempDir(), "hello.wav")
	cpuArgs := []string{"say", "--model", ck, "--backend", "cpu", "--frames", "8", "--out", out, "Hello there."}
	// Without --backend (as a user types it) the engine tries the GPU first;
	// where there is none, why goes on standard output, not stderr.
	autoArgs := append([]string{"say", "--model", ck}, cpuArgs[5:]...)
	for i, lang := range []string{"C.UTF-8", "C", "en_US.UTF-8", "en_US.UTF-8"} {
		args := cpuArgs
		if i == 3 {
			args = autoArgs
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRun$")
		cmd.Env = append(os.Environ(), envHelperArgs+"="+strings.Join(args, "\n"), "LANG="+lang, "LC_ALL=", "LC_MESSAGES=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("LANG=%s: %v\nstderr: %s", lang, err, stderr.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("LANG=%s: stderr not empty:\n%s", lang, stderr.String())
		}
		if !strings.Contains(stdout.String(), "frames in 1 sentence") {
			t.Errorf("LANG=%s: stdout %q lacks the summary", lang, stdout.String())
		}
		if st, err := os.Stat(out); err != nil || st.Size() <= 44 {
			t.Errorf("LANG=%s: no audio written: %v", lang, err)
		}
	}
}

func TestQuietLogDropsOnlyItsNotes(t *testing.T) {
	var buf bytes.Buffer
	l := log.New(&quietLog{w: &buf}, "", 0)
	stamped := log.New(&quietLog{w: &buf}, "", log.LstdFlags) // as the standard logger writes
	stamped.Printf("Fyne error:  Preferences load error:")
	stamped.Printf("  Cause: EOF")
	stamped.Printf("  At: app/preferences.go:103")
	l.Printf("frame.Frame.parseHeader: The flac library test cases do not yet include any audio files with sample rate %d. If possible please consider contributing.", 24000)
	l.Printf("Fyne error:  Getting favorite locations")
	l.Printf("  Cause: this computer does not define a VIDEOS folder")
	l.Printf("  At: dialog/file.go:396")
	l.Printf("Fyne error:  Preferences load error:")
	l.Printf("  Cause: EOF")
	l.Printf("  At: /root/go/pkg/mod/fyne.io/fyne/v2@v2.7.1/app/preferences.go:103")
	l.Printf("Fyne error:  Preferences load error:")
	l.Printf("  Cause: invalid character 'x' looking for beginning of value")
	l.Printf("Fyne error:  something real")
	l.Printf("  Cause: a real cause")
	want := "Fyne error:  Preferences load error:\n  Cause: invalid character 'x' looking for beginning of value\n" +
		"Fyne error:  something real\n  Cause: a real cause\n"
	if got := buf.String(); got != want {
		t.Fatalf("logged %q, want %q", got, want)
	}
}
