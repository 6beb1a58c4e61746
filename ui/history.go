package ui

import (
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// historyLen is how many past utterances the list keeps.
const historyLen = 20

// historyEntry is one finished (or stopped, or failed) utterance.
type historyEntry struct {
	Text       string
	Voice      string
	TTFC       time.Duration // -1 = never arrived
	FirstSound time.Duration // -1 = never played
	RTF        float64
	FramesPerS float64
	Underruns  uint64
	Silent     time.Duration
	Audio      time.Duration
	Outcome    string // "done", "stopped" or the error
}

// summary is the one-line figure string shown in the list.
func (h historyEntry) summary() string {
	s := fmt.Sprintf("TTFC %s · sound %s · RTF %.2f · %.1f fr/s · %d underruns · %s",
		formatMillis(h.TTFC), formatMillis(h.FirstSound), h.RTF, h.FramesPerS, h.Underruns, formatSeconds(h.Audio))
	if h.Outcome != "done" {
		s += " · " + h.Outcome
	}
	return s
}

// historyList shows the last utterances, newest first; "Use" copies an
// utterance's text back into the text box.
type historyList struct {
	entries []historyEntry // newest first
	list    *widget.List
	onUse   func(text string)
}

func newHistoryList(onUse func(string)) *historyList {
	h := &historyList{onUse: onUse}
	h.list = widget.NewList(
		func() int { return len(h.entries) },
		func() fyne.CanvasObject {
			title := widget.NewLabel("text")
			title.Truncation = fyne.TextTruncateEllipsis
			title.TextStyle = fyne.TextStyle{Bold: true}
			figs := widget.NewLabel("figures")
			figs.Truncation = fyne.TextTruncateEllipsis
			figs.SizeName = theme.SizeNameCaptionText
			use := widget.NewButtonWithIcon("Use", theme.ContentUndoIcon(), nil)
			return container.NewBorder(nil, nil, nil, use, container.NewVBox(title, figs))
		},
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id < 0 || id >= len(h.entries) {
				return
			}
			e := h.entries[id]
			row := o.(*fyne.Container)
			texts := row.Objects[0].(*fyne.Container)
			texts.Objects[0].(*widget.Label).SetText(oneLine(e.Text))
			texts.Objects[1].(*widget.Label).SetText(e.summary())
			row.Objects[1].(*widget.Button).OnTapped = func() { h.use(id) }
		},
	)
	h.list.OnSelected = func(id widget.ListItemID) {
		h.use(id)
		h.list.UnselectAll()
	}
	return h
}

func (h *historyList) add(e historyEntry) {
	h.entries = append([]historyEntry{e}, h.entries...)
	if len(h.entries) > historyLen {
		h.entries = h.entries[:historyLen]
	}
	h.list.Refresh()
}

func (h *historyList) use(id int) {
	if id >= 0 && id < len(h.entries) && h.onUse != nil {
		h.onUse(h.entries[id].Text)
	}
}

// oneLine flattens text for a list row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
