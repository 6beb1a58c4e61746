package main

import (
	"bytes"
	"io"
	"log"
	"os"
	"sync"
)

// Notes that libraries log through the standard logger in normal use and
// that tell a user nothing:
//   - github.com/mewkiz/flac's frame parser, for every frame at a sample
//     rate its own tests lack; 24 kHz is every frame Talkbox writes, so
//     opening the history or a FLAC voice printed a line per 80 ms of audio;
//   - Fyne's file dialog, when one of the XDG folders it offers as a
//     favourite (Videos, Music…) does not exist, on every Save dialog. Fyne
//     logs its errors as a header line then "Cause:" and "At:" lines.
var (
	flacNote     = []byte("The flac library test cases do not yet include any audio files with sample rate")
	favoriteNote = []byte("Fyne error:  Getting favorite locations")
	fyneDetail   = [][]byte{[]byte("  Cause: "), []byte("  At: ")}
)

// quietLog is the standard logger's output less the notes above. The
// logger calls Write once per message.
type quietLog struct {
	w        io.Writer
	mu       sync.Mutex
	dropping bool // the last message was a dropped Fyne header: drop its details
}

func (q *quietLog) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case bytes.Contains(p, flacNote):
		return len(p), nil
	case bytes.Contains(p, favoriteNote):
		q.dropping = true
		return len(p), nil
	case q.dropping && (bytes.Contains(p, fyneDetail[0]) || bytes.Contains(p, fyneDetail[1])):
		return len(p), nil
	}
	q.dropping = false
	return q.w.Write(p)
}

// quietStderr routes the standard logger through quietLog; main calls it
// first.
func quietStderr() { log.SetOutput(&quietLog{w: os.Stderr}) }
