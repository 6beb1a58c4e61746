package ui

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"talkbox/app/audio"
	"talkbox/engine"
	"talkbox/ui/uitest"
)

// bookText is about n bytes of prose: numbered sentences in paragraphs of
// six, like a book.
func bookText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Sentence %d of the book goes on for a while, as sentences in novels do.", i+1)
		if i%6 == 5 {
			b.WriteString("\n\n")
		} else {
			b.WriteString(" ")
		}
	}
	return b.String()
}

// settle runs the UI work posted so far (row heights, refreshes).
func (h *harness) settle() {
	for {
		select {
		case f := <-h.q:
			f()
		default:
			return
		}
	}
}

// rowFor is the read view's row on screen for sentence i, or nil.
func rowFor(u *UI, i int) *sentenceRow {
	for _, o := range test.LaidOutObjects(u.reader) {
		if r, ok := o.(*sentenceRow); ok && r.Visible() && r.id == i && r.Size().Height > 0 {
			return r
		}
	}
	return nil
}

// requestsSince is the texts the engine got after the first n requests.
func requestsSince(f *uitest.FakeEngine, n int) []string {
	var out []string
	for _, r := range f.Requests()[n:] {
		out = append(out, r.Text)
	}
	return out
}

// Opening a 1 MB text file into the window, up to a painted frame, takes
// under a second (the text box took minutes); then scrolling to the middle
// and Speak stay quick, and speaking starts at the first sentence.
func TestOpenMegabyteDocumentFast(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.2}
	h := newHarness(t, fake, nil)
	h.ready()
	u := h.ui
	path := filepath.Join(t.TempDir(), "book.txt")
	book := bookText(1 << 20)
	if err := os.WriteFile(path, []byte(book), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	u.OpenDocument(path)
	h.waitFor("the book to open", func() bool { return strings.HasPrefix(u.status.Text, "Opened") || u.errorMsg.Visible() })
	h.settle()
	h.win.Canvas().Capture()
	took := time.Since(start)
	t.Logf("1 MB document opened and painted in %v", took)
	if took > slowdown*time.Second {
		t.Fatalf("opening a 1 MB document took %v, want under %v", took, slowdown*time.Second)
	}
	if u.doc == nil || u.text.Visible() || !u.readPane.Visible() || u.doc.len() < 10000 || rowFor(u, 0) == nil {
		t.Fatalf("the book is not in the read view (doc %v, text box visible %v)", u.doc != nil, u.text.Visible())
	}

	start = time.Now()
	u.reader.list.ScrollTo(u.doc.len() / 2)
	h.settle()
	h.win.Canvas().Capture()
	if took := time.Since(start); took > slowdown*time.Second || rowFor(u, u.doc.len()/2) == nil {
		t.Fatalf("scrolling to the middle took %v (row shown: %v)", took, rowFor(u, u.doc.len()/2) != nil)
	}

	start = time.Now()
	u.Speak()
	if took := time.Since(start); took > slowdown*500*time.Millisecond {
		t.Fatalf("Speak on the book took %v to return", took)
	}
	h.waitFor("the first request", func() bool { return len(fake.Requests()) > 0 })
	if got := fake.Requests()[0].Text; got != u.doc.sentence(0) {
		t.Fatalf("first request %q, want the first sentence %q", got, u.doc.sentence(0))
	}
	u.Stop()
	h.waitFor("the stop", h.idle)

	test.Tap(u.editBtn)
	if !u.errorMsg.Visible() || !strings.Contains(u.errorMsg.Text, "text editor") || u.text.Visible() {
		t.Fatalf("Edit on a 1 MB book: error %q, text box shown %v", u.errorMsg.Text, u.text.Visible())
	}
}

// skipDoc is a document whose sentences the tests step through: short ones,
// a paragraph break, and a run-on that SplitSentences cuts at spaces.
func skipDoc() string {
	return "First one here. Second sentence is this one! Third?\n\nFourth opens a paragraph. " +
		strings.Repeat("word ", 100) + "ends the run-on. Last sentence."
}

// Previous and Next, by button and by Alt+Left/Alt+Right, stop the sentence
// being spoken and speak from the one before or after, landing exactly on
// the sentences the engine is sent; Previous on the first starts it again,
// Next on the last says so and changes nothing.
func TestSkipLandsOnSentenceBoundaries(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.5}
	h := newHarness(t, fake, nil)
	h.ready()
	u, c := h.ui, h.win.Canvas()
	u.setText(skipDoc())
	if u.doc != nil {
		t.Fatal("a short text went to the read view")
	}
	u.Speak()
	d := u.doc
	if d == nil || !u.docTemp || d.len() < 7 || !u.readPane.Visible() {
		t.Fatalf("speaking did not show the read view (doc %v)", d != nil)
	}
	want := engine.SplitSentences(skipDoc())
	if d.len() != len(want) {
		t.Fatalf("read view has %d sentences, SplitSentences %d", d.len(), len(want))
	}
	skip := func(how string, to int) {
		t.Helper()
		n := len(fake.Requests())
		switch how {
		case "next":
			test.Tap(u.nextBtn)
		case "prev":
			test.Tap(u.prevBtn)
		case "alt+right":
			press(t, c, fyne.KeyRight, fyne.KeyModifierAlt)
		case "alt+left":
			press(t, c, fyne.KeyLeft, fyne.KeyModifierAlt)
		}
		// The utterance cut off may still have asked for its next sentence
		// as it was cancelled; the new one asks for the target.
		h.waitFor("the target's request", func() bool { return slices.Contains(requestsSince(fake, n), want[to]) })
		if text := u.cur.Text(); !strings.HasPrefix(text, want[to]) || u.reader.cur != to || u.curFrom != to {
			t.Fatalf("%s: speaking %.40q, mark %d from %d; want sentence %d %q", how, text, u.reader.cur, u.curFrom, to, want[to])
		}
	}
	h.waitFor("the first sentence", func() bool { return len(fake.Requests()) > 0 })
	skip("prev", 0) // the first starts again
	skip("next", 1)
	skip("alt+right", 2)
	skip("alt+left", 1)
	skip("next", 2)
	skip("next", 3)
	skip("next", 4) // into the run-on's pieces
	if !strings.HasPrefix(want[4], "word word") || strings.HasSuffix(want[4], "ends the run-on.") {
		t.Fatalf("sentence 4 %q is not a piece of the run-on", want[4])
	}
	skip("next", 5)
	for u.reader.cur < d.len()-1 {
		skip("next", u.reader.cur+1)
	}
	n := len(fake.Requests())
	test.Tap(u.nextBtn)
	if u.reader.cur != d.len()-1 || !strings.Contains(u.status.Text, "last sentence") || len(fake.Requests()) != n || h.idle() {
		t.Fatalf("Next on the last sentence: mark %d, status %q, requests %d -> %d, idle %v", u.reader.cur, u.status.Text, n, len(fake.Requests()), h.idle())
	}
	h.waitFor("audio of the last sentence", func() bool { return u.cur.Snapshot(audio.Live{}).Frames > 0 })
	c.Focus(u.reader.list) // Esc on the read view stops, as on every field
	press(t, c, fyne.KeyEscape, 0)
	h.waitFor("the stop and the text box back", func() bool { return h.idle() && u.text.Visible() })
	// The reading is one history entry: the pieces the skips cut off are
	// not kept.
	if es := h.historyN(1); len(es) != 1 || es[0].Outcome != "stopped" || es[0].Text != want[len(want)-1] {
		t.Fatalf("history after a read with skips: %d entries, newest %q", len(es), es[0].Text)
	}
	if u.text.Text != skipDoc() {
		t.Fatal("the text box lost its text")
	}
}

// Tapping a sentence of an opened document speaks from it; while it plays
// the mark follows the spoken sentence, and its row is drawn marked.
func TestTapSentenceSpeaksFromThereAndMarkFollows(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.1}
	h := newHarness(t, fake, nil)
	h.ready()
	u := h.ui
	text := "Zero is here. One is short. Two is the next one. Three is a longer sentence than the others. Four follows three.\n\n" + bookText(readThreshold)
	u.setText(text)
	if u.doc == nil || u.docTemp {
		t.Fatal("a long text did not open in the read view")
	}
	h.settle()
	h.win.Canvas().Capture()
	row := rowFor(u, 2)
	if row == nil {
		t.Fatal("sentence 2 is not on screen")
	}
	test.Tap(row)
	h.waitFor("the first request", func() bool { return len(fake.Requests()) > 0 })
	if got := fake.Requests()[0].Text; got != "Two is the next one." || u.curFrom != 2 {
		t.Fatalf("tapping sentence 2 sent %q (from %d)", got, u.curFrom)
	}
	// One 80 ms frame a character: sentence 3 plays for over three seconds,
	// so the ticker (10 Hz) sees it even on a busy machine.
	seen := []int{u.reader.cur}
	h.waitFor("the mark to reach sentence 4", func() bool {
		if c := u.reader.cur; c != seen[len(seen)-1] {
			seen = append(seen, c)
		}
		return u.reader.cur >= 4
	})
	if fmt.Sprint(seen) != "[2 3 4]" {
		t.Fatalf("the mark went %v, want [2 3 4]", seen)
	}
	h.settle()
	if img := h.win.Canvas().Capture(); os.Getenv("READ_SHOT") != "" {
		f, _ := os.Create(os.Getenv("READ_SHOT"))
		png.Encode(f, img)
		f.Close()
	}
	if r := rowFor(u, 4); r == nil || !r.bg.Visible() {
		t.Fatal("the spoken sentence's row is not drawn marked")
	}
	if r := rowFor(u, 2); r != nil && r.bg.Visible() {
		t.Fatal("a sentence already spoken is still drawn marked")
	}
	u.Stop()
	h.waitFor("the stop", h.idle)
	if u.reader.cur != 4 || u.doc == nil {
		t.Fatalf("after Stop the mark is at %d; Speak should go on from where it stopped", u.reader.cur)
	}
	n := len(fake.Requests())
	u.Speak()
	h.waitFor("the request", func() bool { return len(fake.Requests()) > n })
	if got := fake.Requests()[n].Text; got != "Four follows three." {
		t.Fatalf("Speak after Stop sent %q, want the marked sentence", got)
	}
}

// The mark stays in view: a sentence below the screen scrolls up to the
// upper part of it, and moving to one already on screen does not scroll.
func TestMarkKeptInView(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u := h.ui
	u.setText(bookText(4 * readThreshold))
	h.win.Content().Refresh() // lay the read view out as the driver's next frame does
	h.settle()
	v := u.reader
	// top is where sentence i's row begins in the list (rows of one line:
	// every sentence of bookText fits on one).
	top := func(i int) float32 {
		y := float32(0)
		for j := range i {
			y += v.rowHeight(j) + readPadding
		}
		return y
	}
	view := v.list.Size().Height
	if top(300) < view {
		t.Fatal("sentence 300 is on screen from the start")
	}
	v.mark(300)
	h.settle()
	at := v.list.GetScrollOffset()
	if y := top(300); y < at || y > at+view/2 || y+v.rowHeight(300) > at+view {
		t.Fatalf("sentence 300 at %v-%v, view shows %v-%v: want it whole, starting in the upper half", y, y+v.rowHeight(300), at, at+view)
	}
	v.mark(301)
	h.settle()
	if got := v.list.GetScrollOffset(); got != at {
		t.Fatalf("marking a sentence on screen scrolled from %v to %v", at, got)
	}
}

// Pasting text that makes the text box's text too long for it opens the
// whole in the read view instead; Edit takes it back to the text box (up to
// maxEditBytes, saying that typing lags), Close leaves an empty one.
func TestLongPasteOpensReadView(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u, c := h.ui, h.win.Canvas()
	u.text.SetText("Before. After.")
	c.Focus(u.text)
	u.text.CursorColumn = len("Before. ")
	clip := test.NewClipboard()
	clip.SetContent(bookText(readThreshold))
	u.text.TypedShortcut(&fyne.ShortcutPaste{Clipboard: clip})
	whole := "Before. " + clip.Content() + "After."
	if u.doc == nil || u.docTemp || u.doc.text != whole {
		t.Fatalf("a long paste: doc %v", u.doc != nil)
	}
	test.Tap(u.editBtn)
	if u.doc != nil || !u.text.Visible() || u.text.Text != whole || !strings.Contains(u.status.Text, "typing lags") || c.Focused() != fyne.Focusable(u.text) {
		t.Fatalf("Edit: doc %v, text box shown %v, status %q", u.doc != nil, u.text.Visible(), u.status.Text)
	}
	u.setText(whole)
	u.closeDocument()
	if u.doc != nil || !u.text.Visible() || u.text.Text != "" {
		t.Fatal("Close did not bring back an empty text box")
	}
	clip.SetContent("short")
	u.text.TypedShortcut(&fyne.ShortcutPaste{Clipboard: clip})
	if u.doc != nil || u.text.Text != "short" {
		t.Fatalf("a short paste: doc %v, text %q", u.doc != nil, u.text.Text)
	}
}
