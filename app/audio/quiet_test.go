package audio

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

const envQuietChild = "TALKBOX_TEST_AUDIO_QUIET_CHILD"

func TestQuietChild(t *testing.T) {
	if os.Getenv(envQuietChild) != "1" {
		t.Skip("runs only as the child of TestOpenPrintsNothing")
	}
	p, err := Open(Options{})
	if err != nil {
		os.Stdout.WriteString("open: " + err.Error())
		os.Exit(1)
	}
	list, err := p.Outputs()
	if err != nil {
		os.Stdout.WriteString("outputs: " + err.Error())
		os.Exit(1)
	}
	for _, o := range list {
		os.Stdout.WriteString("output: " + o.Name + "\n")
	}
	_ = p.Close()
	os.Exit(0)
}

// Opening the real default device and listing the devices print nothing
// on stderr, whether a
// sound card is there or not (then libasound's own diagnostics, about
// thirty lines, used to land there); the test re-runs itself so the C
// library's writes to file descriptor 2 are seen.
func TestOpenPrintsNothing(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuietChild$")
	cmd.Env = append(os.Environ(), envQuietChild+"=1", EnvAudio+"=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v: %s %s", err, stdout.String(), stderr.String())
	}
	t.Logf("child's stdout: %s", stdout.String())
	if stderr.Len() != 0 {
		t.Errorf("opening the audio device wrote to stderr:\n%s", stderr.String())
	}
}
