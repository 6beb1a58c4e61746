package ui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/history"
)

// historyActions are what a history row's buttons do; the UI implements them.
type historyActions struct {
	play, save, copyText, remove, use func(e history.Entry)
}

// summary is the one-line figure string shown under an entry's text.
func summary(e history.Entry) string {
	s := e.Stats
	line := fmt.Sprintf("%s · %s · TTFC %s · RTF %.2f", e.Time.Local().Format("Jan 2 15:04"), formatSeconds(e.Duration()),
		formatMillis(s.TTFC), s.RTF)
	if s.BufferWait > 0 {
		line += " · waited " + formatSeconds(s.BufferWait)
	}
	if s.Underruns > 0 {
		line += fmt.Sprintf(" · %d underruns", s.Underruns)
	}
	if e.Voice != "" {
		line += " · " + displayName(e.Voice)
	}
	if e.Outcome != "" && e.Outcome != "done" {
		line += " · " + e.Outcome
	}
	return line
}

// historyList shows the kept utterances, newest first, each with play,
// save as, copy, delete and use buttons.
type historyList struct {
	entries []history.Entry // newest first
	list    *widget.List
	act     historyActions
}

func newHistoryList(act historyActions) *historyList {
	h := &historyList{act: act}
	h.list = widget.NewList(
		func() int { return len(h.entries) },
		func() fyne.CanvasObject {
			title := widget.NewLabel("text")
			title.Truncation = fyne.TextTruncateEllipsis
			title.TextStyle = fyne.TextStyle{Bold: true}
			figs := widget.NewLabel("figures")
			figs.Truncation = fyne.TextTruncateEllipsis
			figs.SizeName = theme.SizeNameCaptionText
			buttons := container.NewHBox(
				widget.NewButtonWithIcon("", theme.MediaPlayIcon(), nil),
				widget.NewButtonWithIcon("", theme.DocumentSaveIcon(), nil),
				widget.NewButtonWithIcon("", theme.ContentCopyIcon(), nil),
				widget.NewButtonWithIcon("", theme.DeleteIcon(), nil),
				widget.NewButton("Use", nil),
			)
			return container.NewBorder(nil, nil, nil, buttons, container.NewVBox(title, figs))
		},
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id < 0 || id >= len(h.entries) {
				return
			}
			e := h.entries[id]
			row := o.(*fyne.Container)
			texts := row.Objects[0].(*fyne.Container)
			texts.Objects[0].(*widget.Label).SetText(oneLine(e.Text))
			texts.Objects[1].(*widget.Label).SetText(summary(e))
			btns := row.Objects[1].(*fyne.Container).Objects
			for i, f := range []func(history.Entry){act.play, act.save, act.copyText, act.remove, act.use} {
				f := f
				btns[i].(*widget.Button).OnTapped = func() {
					if f != nil {
						f(e)
					}
				}
			}
		},
	)
	h.list.OnSelected = func(widget.ListItemID) { h.list.UnselectAll() }
	return h
}

// set replaces the shown entries (newest first).
func (h *historyList) set(entries []history.Entry) {
	h.entries = entries
	h.list.Refresh()
}

// oneLine flattens text for a list row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// historySize says how full the history is, for its header.
func historySize(used int64, limitMB int) string {
	return fmt.Sprintf("%.1f MB of %d MB", float64(used)/1e6, limitMB)
}

// historyLimits are the size limits the history header offers, in MB.
var historyLimits = []int{100, 250, 500, 1000, 2000, 5000}
