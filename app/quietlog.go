package main

import (
	"bytes"
	"io"
	"log"
	"os"
)

// flacNote is in the note github.com/mewkiz/flac's frame parser logs
// through the standard logger for every frame at a sample rate its own
// tests lack; 24 kHz is every frame Talkbox writes, so opening the history
// or a FLAC voice printed a line per 80 ms of audio.
var flacNote = []byte("The flac library test cases do not yet include any audio files with sample rate")

// quietLog is the standard logger's output: everything but flacNote's
// lines. The logger calls Write once per message.
type quietLog struct{ w io.Writer }

func (q quietLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, flacNote) {
		return len(p), nil
	}
	return q.w.Write(p)
}

// quietStderr routes the standard logger through quietLog; main calls it
// first.
func quietStderr() { log.SetOutput(quietLog{os.Stderr}) }
