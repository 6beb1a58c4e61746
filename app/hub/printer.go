package hub

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// NewProgressPrinter renders Pull's reports for a terminal. On a TTY one line
// per file is redrawn in place (carriage return, erase line) at most ten
// times a second; otherwise (a log, a pipe) it prints a plain line when a
// file starts and ends and every few seconds in between.
func NewProgressPrinter(w io.Writer, tty bool) func(Progress) {
	pp := &progressPrinter{w: w, tty: tty, now: time.Now}
	return pp.print
}

type progressPrinter struct {
	w        io.Writer
	tty      bool
	now      func() time.Time
	last     time.Time
	lineOpen bool // a TTY line is drawn without its newline yet
}

const (
	ttyRedraw   = 100 * time.Millisecond
	plainPeriod = 5 * time.Second
	barWidth    = 24
)

func (pp *progressPrinter) print(p Progress) {
	t := pp.now()
	switch p.Event {
	case EventListing:
		pp.line(fmt.Sprintf("pulling %s: asking the Hub for the file list", p.Repo), true)
	case EventFileStart:
		if p.FileDone > 0 {
			pp.line(fmt.Sprintf("%s resuming at %s", p.prefix(), FormatBytes(p.FileDone)), !pp.tty)
		} else if !pp.tty {
			pp.line(fmt.Sprintf("%s %s", p.prefix(), FormatBytes(p.FileSize)), true)
		}
		if pp.tty {
			pp.line(p.barLine(), false)
		}
		pp.last = t
	case EventBytes:
		if pp.tty && t.Sub(pp.last) >= ttyRedraw {
			pp.line(p.barLine(), false)
			pp.last = t
		} else if !pp.tty && t.Sub(pp.last) >= plainPeriod {
			pp.line(p.barLine(), true)
			pp.last = t
		}
	case EventVerifying:
		pp.line(fmt.Sprintf("%s checking the copy on disk", p.prefix()), !pp.tty)
	case EventFileSkipped:
		pp.line(fmt.Sprintf("%s already complete (%s)", p.prefix(), FormatBytes(p.FileSize)), true)
	case EventFileDone:
		if pp.tty {
			pp.line(p.barLine(), true)
		} else {
			pp.line(fmt.Sprintf("%s done, verified (%s)", p.prefix(), FormatBytes(p.FileSize)), true)
		}
	case EventRetry:
		pp.line(fmt.Sprintf("%s %s", p.prefix(), p.Note), true)
	case EventDone:
		fetched := FormatBytes(p.Downloaded) + " downloaded"
		if p.Downloaded == 0 {
			fetched = "already up to date"
		}
		pp.line(fmt.Sprintf("pulled %s: %d files, %s (%s)", p.Repo, p.FileCount, FormatBytes(p.Total), fetched), true)
	}
}

// line writes s; on a TTY a line without end is redrawn by the next call.
func (pp *progressPrinter) line(s string, end bool) {
	var b strings.Builder
	if pp.tty && pp.lineOpen {
		b.WriteString("\r\x1b[K")
	}
	b.WriteString(s)
	if end {
		b.WriteByte('\n')
	}
	pp.lineOpen = pp.tty && !end
	io.WriteString(pp.w, b.String())
}

func (p Progress) prefix() string {
	return fmt.Sprintf("[%d/%d] %s", p.FileIndex, p.FileCount, p.File)
}

// barLine is "[3/9] model.safetensors [=====>    ] 45% 6.4 MB/14.2 MB 3.1 MB/s ETA 3s".
func (p Progress) barLine() string {
	frac := 1.0
	if p.FileSize > 0 {
		frac = min(1, float64(p.FileDone)/float64(p.FileSize))
	}
	filled := int(frac * barWidth)
	bar := strings.Repeat("=", filled)
	if filled < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-filled-1)
	}
	s := fmt.Sprintf("%s [%s] %3.0f%% %s/%s", p.prefix(), bar, frac*100, FormatBytes(p.FileDone), FormatBytes(p.FileSize))
	if p.Rate > 0 {
		s += "  " + FormatBytes(int64(p.Rate)) + "/s"
	}
	if p.ETA >= 0 && p.FileDone < p.FileSize {
		s += "  ETA " + formatETA(p.ETA)
	}
	return s
}

// formatETA rounds to whole seconds: "3s", "4m05s", "1h02m".
func formatETA(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}
