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
//     logs its errors as a header line then "Cause:" and "At:" lines;
//   - Fyne 2.7's preferences file watcher, when it reads the file while
//     Fyne itself rewrites it (its save truncates the file before it marks
//     the save as its own, app/preferences.go): "Preferences load error"
//     with cause EOF, at quit, now and then. The preferences in memory are
//     intact; any other cause is still logged.
var (
	flacNote     = []byte("The flac library test cases do not yet include any audio files with sample rate")
	favoriteNote = []byte("Fyne error:  Getting favorite locations")
	prefsNote    = []byte("Fyne error:  Preferences load error")
	eofCause     = []byte("  Cause: EOF") // the whole line after the logger's time stamp
	fyneDetail   = [][]byte{[]byte("  Cause: "), []byte("  At: ")}
)

// quietLog is the standard logger's output less the notes above. The
// logger calls Write once per message.
type quietLog struct {
	w        io.Writer
	mu       sync.Mutex
	dropping bool   // the last message was a dropped Fyne header: drop its details
	held     []byte // a preferences header, kept until its cause shows whether it is the note
}

func (q *quietLog) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held != nil {
		held := q.held
		q.held = nil
		if bytes.HasSuffix(bytes.TrimRight(p, "\n"), eofCause) {
			q.dropping = true
			return len(p), nil
		}
		q.dropping = false
		if _, err := q.w.Write(held); err != nil {
			return 0, err
		}
	}
	switch {
	case bytes.Contains(p, prefsNote):
		q.held = append([]byte(nil), p...)
		return len(p), nil
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
