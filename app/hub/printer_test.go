package hub

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeClock advances by step on every read, so throttling is deterministic.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func feed(pp *progressPrinter) {
	base := Progress{Repo: "Qwen/X", File: "model.safetensors", FileIndex: 2, FileCount: 2, FileSize: 10_000_000, Total: 10_001_000, ETA: -1}
	p := base
	p.Event = EventListing
	pp.print(p)
	p.Event = EventFileStart
	pp.print(p)
	for i := int64(1); i <= 10; i++ {
		p.Event, p.FileDone, p.Done, p.Rate = EventBytes, i*1_000_000, 1000+i*1_000_000, 2e6
		p.ETA = time.Duration(float64(p.Total-p.Done) / p.Rate * float64(time.Second))
		pp.print(p)
	}
	p.Event = EventFileDone
	pp.print(p)
	p.Event, p.Downloaded = EventDone, 10_000_000
	pp.print(p)
}

func TestProgressPrinterTTY(t *testing.T) {
	var b bytes.Buffer
	pp := &progressPrinter{w: &b, tty: true, now: (&fakeClock{step: 150 * time.Millisecond}).now}
	feed(pp)
	out := b.String()
	if !strings.Contains(out, "\r\x1b[K[2/2] model.safetensors [============>           ]  50% 5.00 MB/10.0 MB  2.00 MB/s  ETA 3s") {
		t.Fatalf("TTY output lacks the redrawn 50%% line:\n%q", out)
	}
	if n := strings.Count(out, "\n"); n != 3 { // listing, file done, summary
		t.Fatalf("TTY output has %d newlines, want 3 (one line per file, redrawn in place):\n%q", n, out)
	}
	if !strings.Contains(out, "pulled Qwen/X: 2 files, 10.0 MB (10.0 MB downloaded)") {
		t.Fatalf("no summary:\n%s", out)
	}
}

func TestProgressPrinterPlain(t *testing.T) {
	var b bytes.Buffer
	// 2 s between reports: a plain line every 5 s means every third report.
	pp := &progressPrinter{w: &b, tty: false, now: (&fakeClock{step: 2 * time.Second}).now}
	feed(pp)
	out := b.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Fatalf("plain output has control characters:\n%q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// listing, start, 3 periodic (at 6, 12, 18 s after the start), done, summary
	if len(lines) != 7 {
		t.Fatalf("got %d lines, want 7:\n%s", len(lines), out)
	}
	if !strings.HasSuffix(lines[5], "done, verified (10.0 MB)") {
		t.Fatalf("file line %q", lines[5])
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{999: "999 B", 1500: "1.50 kB", 14_243_240: "14.2 MB", 2_500_000_000: "2.50 GB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{3 * time.Second: "3s", 245 * time.Second: "4m05s", 3720 * time.Second: "1h02m"} {
		if got := formatETA(d); got != want {
			t.Errorf("formatETA(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestPrintPullFromFakeHub shows what `talkbox pull` prints, on a pipe, for a
// pull from the loopback fake Hub with a dropped connection resumed.
// Run with -v to see it.
func TestPrintPullFromFakeHub(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	s.Retries = 1
	h.DropAfter("model.safetensors", 6_000_000)
	var b bytes.Buffer
	if _, err := s.Pull(context.Background(), testRepo, NewProgressPrinter(&b, false)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	n := len(h.Files)
	for _, want := range []string{
		"model.safetensors stopped at 6.00 MB (unexpected EOF); resuming in",
		fmt.Sprintf("[%d/%d] model.safetensors resuming at 6.00 MB", n, n),
		fmt.Sprintf("[%d/%d] model.safetensors done, verified (14.2 MB)", n, n),
		fmt.Sprintf("pulled %s: %d files, 23.1 MB", testRepo, n),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if testing.Verbose() {
		fmt.Fprint(os.Stderr, out)
	}
}
