package ui

import (
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// The reading workflow. Text up to readThreshold bytes is typed and edited
// in the text box (a Fyne Entry, which lays out its whole text on every
// change: 40 KB froze the window for 23 s). Longer text, such as an opened
// book, is shown in the read view, one sentence a row, of which only the
// rows on screen are laid out. Speaking always shows the read view, with
// the spoken sentence marked; text from the text box goes back to it when
// the speech ends. Tapping a sentence reads from there; Previous and Next
// (Alt+Left, Alt+Right) move to the sentence before or after the one being
// spoken.

// Under the test driver on the shared 2-core machine one keystroke in the
// text box took about 24 ms with 10 KB of text in it, 47 ms with 20 KB,
// 67 ms with 32 KB and 148 ms with 50 KB: it grows with the text.
const (
	// readThreshold is the longest text the text box takes; longer text
	// opens in the read view.
	readThreshold = 20 << 10
	// maxEditBytes is the longest document Edit puts in the text box, with
	// a note that typing lags.
	maxEditBytes = 50 << 10
	// maxDraftBytes is the longest text kept in the settings file for the
	// next start; a longer document is opened again.
	maxDraftBytes = 256 << 10
)

// buildReader makes the read view and the area that shows it or the text
// box; build calls it.
func (u *UI) buildReader() fyne.CanvasObject {
	u.reader = newReadView(u.post, u.readFrom)
	u.readInfo = widget.NewLabel("")
	u.readInfo.Truncation = fyne.TextTruncateEllipsis
	u.editBtn = widget.NewButtonWithIcon("Edit", theme.DocumentCreateIcon(), u.editDocument)
	u.closeBtn = widget.NewButtonWithIcon("Close", theme.CancelIcon(), u.closeDocument)
	bar := container.NewBorder(nil, nil, nil, container.NewHBox(u.editBtn, u.closeBtn), u.readInfo)
	u.readPane = container.NewBorder(bar, nil, nil, nil, u.reader)
	u.readPane.Hide()
	u.prevBtn = widget.NewButtonWithIcon("", theme.MediaSkipPreviousIcon(), func() { u.Skip(-1) })
	u.nextBtn = widget.NewButtonWithIcon("", theme.MediaSkipNextIcon(), func() { u.Skip(1) })
	u.prevBtn.Disable()
	u.nextBtn.Disable()
	return container.NewStack(u.text, u.readPane)
}

// setText puts text in the window for Speak: in the text box when it is
// short, else in the read view as a document. Everything that fills the
// text box (Open, a drop, the clipboard, a history entry, the draft) comes
// through here.
func (u *UI) setText(text string) {
	if len(text) <= readThreshold {
		u.showEntry(text)
		return
	}
	u.showDocument(newDocument(text), false)
	u.checkCJK(text)
}

// currentText is the text Speak and Export take.
func (u *UI) currentText() string {
	if u.doc != nil && !u.docTemp {
		return u.doc.text
	}
	return u.text.Text
}

// showEntry shows the text box holding text.
func (u *UI) showEntry(text string) {
	u.doc, u.docTemp = nil, false
	u.readPane.Hide()
	if u.text.Text != text {
		u.text.SetText(text)
	}
	u.text.Show()
	u.skipButtons()
}

// showDocument shows d in the read view. temp marks the text box's own text
// shown while it is spoken.
func (u *UI) showDocument(d *document, temp bool) {
	u.doc, u.docTemp = d, temp
	u.reader.setDocument(d, 0)
	u.readInfo.SetText(fmt.Sprintf("%s · %d sentences · tap a sentence to read from there", sizeText(len(d.text)), d.len()))
	show(u.closeBtn, !temp)
	u.text.Hide()
	u.readPane.Show()
	u.skipButtons()
}

// sizeText is a text length for people.
func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d characters", n)
}

// editDocument puts the document in the text box when it is short enough
// to edit there, and says why not otherwise. The text box's own text goes
// back there at once, while it is still spoken.
func (u *UI) editDocument() {
	if u.doc == nil {
		return
	}
	if u.docTemp {
		u.showEntry(u.text.Text)
		if u.win != nil {
			u.win.Canvas().Focus(u.text)
		}
		return
	}
	if len(u.doc.text) > maxEditBytes {
		u.showError(fmt.Sprintf("This document is %s: the text box edits up to %d KB without freezing the window. Edit it in a text editor and open it again.",
			sizeText(len(u.doc.text)), maxEditBytes>>10))
		return
	}
	u.stopSpeaking()
	u.clearError()
	n := len(u.doc.text)
	u.showEntry(u.doc.text)
	u.setStatus(fmt.Sprintf("Editing %s in the text box: typing lags with this much text; Speak shows it in the read view again.", sizeText(n)))
	if u.win != nil {
		u.win.Canvas().Focus(u.text)
	}
}

// closeDocument leaves the document for an empty text box.
func (u *UI) closeDocument() {
	u.stopSpeaking()
	u.clearError()
	u.showEntry("")
	u.setStatus("")
}

// stopSpeaking ends the utterance in flight, if any.
func (u *UI) stopSpeaking() {
	if u.cur != nil {
		u.Stop()
	}
}

// readFrom speaks the shown document from sentence i (a tapped sentence).
func (u *UI) readFrom(i int) {
	if u.doc == nil || i < 0 || i >= u.doc.len() {
		return
	}
	u.reader.mark(i)
	u.speakFrom(u.doc, i)
}

// Skip moves to the sentence delta after (or before) the marked one: while
// speaking it stops the sentence at once and speaks from the new one; else
// it moves the mark where Speak will start. It stays within the document:
// Previous on the first sentence starts it again, Next on the last says
// there is no more.
func (u *UI) Skip(delta int) {
	if u.doc == nil {
		return
	}
	i := u.reader.cur + delta
	if i >= u.doc.len() {
		u.setStatus("That is the last sentence.")
		return
	}
	i = max(0, i)
	u.reader.mark(i)
	if u.cur != nil {
		u.speakFrom(u.doc, i)
	}
}

// skipButtons enables Previous and Next when there is a document to move in.
func (u *UI) skipButtons() {
	if u.doc != nil && u.doc.len() > 1 {
		u.prevBtn.Enable()
		u.nextBtn.Enable()
		return
	}
	u.prevBtn.Disable()
	u.nextBtn.Disable()
}

// markSpoken moves the mark to the sentence the player is at (from the
// ticker's figures); the utterance started at sentence u.curFrom of u.curDoc.
func (u *UI) markSpoken(playing int) {
	if u.doc != nil && u.doc == u.curDoc {
		u.reader.mark(u.curFrom + playing)
	}
}

// readingDone follows the end of an utterance: text from the text box goes
// back there; a document read to its end is marked from its start again.
func (u *UI) readingDone(completed bool) {
	if u.doc == nil || u.doc != u.curDoc {
		return
	}
	if u.docTemp {
		u.showEntry(u.text.Text)
		if u.refocus && u.win != nil && u.win.Canvas().Focused() == nil {
			u.win.Canvas().Focus(u.text)
		}
		return
	}
	if completed {
		u.reader.mark(0)
	}
}

// pasteLong takes a paste that would make the text box's text too long for
// it: the text with the clipboard's inserted at the cursor opens in the
// read view. It reports whether it did.
func (u *UI) pasteLong(clip string) bool {
	if len(u.text.Text)+len(clip) <= readThreshold {
		return false
	}
	r := []rune(u.text.Text)
	at := min(max(0, u.text.CursorTextOffset()), len(r))
	u.setText(string(r[:at]) + clip + string(r[at:]))
	u.setStatus("The pasted text is long: it is shown in the read view.")
	return true
}
