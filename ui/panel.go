package ui

import (
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/ui/speech"
)

// latencyPanel shows the live figures of the current utterance.
type latencyPanel struct {
	ttfc, firstSound, rtf, fps, underruns, buffered, bufWait, progress *widget.Label
	timeline                                                           *timeline
	box                                                                fyne.CanvasObject
	// summary is the one line shown beside the Details toggle, so the
	// two figures people look at most stay in view when the panel is folded.
	summary *widget.Label
}

func newLatencyPanel() *latencyPanel {
	p := &latencyPanel{timeline: newTimeline(), summary: widget.NewLabel("")}
	value := func() *widget.Label {
		l := widget.NewLabel("–")
		l.TextStyle = fyne.TextStyle{Monospace: true}
		return l
	}
	p.ttfc, p.firstSound, p.rtf, p.fps = value(), value(), value(), value()
	p.underruns, p.buffered, p.bufWait, p.progress = value(), value(), value(), value()
	row := func(name string, v *widget.Label) []fyne.CanvasObject {
		return []fyne.CanvasObject{widget.NewLabel(name), v}
	}
	var cells []fyne.CanvasObject
	cells = append(cells, row("Time to first chunk", p.ttfc)...)
	cells = append(cells, row("Time to first sound", p.firstSound)...)
	cells = append(cells, row("Real-time factor", p.rtf)...)
	cells = append(cells, row("Waited on playback", p.bufWait)...)
	cells = append(cells, row("Frames per second", p.fps)...)
	cells = append(cells, row("Underruns", p.underruns)...)
	cells = append(cells, row("Buffered", p.buffered)...)
	cells = append(cells, row("Progress", p.progress)...)
	p.box = container.NewVBox(container.New(layout.NewFormLayout(), cells...), p.timeline)
	return p
}

// show writes a snapshot into the labels; UI goroutine only.
func (p *latencyPanel) show(f speech.Figures) {
	p.ttfc.SetText(formatMillis(f.TTFC))
	p.firstSound.SetText(formatMillis(f.FirstSound))
	if f.RTF > 0 {
		p.rtf.SetText(fmt.Sprintf("%.2f (%s audio)", f.RTF, formatSeconds(f.Audio)))
		p.fps.SetText(fmt.Sprintf("%.1f (%d frames)", f.FramesPerS, f.Frames))
	} else {
		p.rtf.SetText("–")
		p.fps.SetText("–")
	}
	p.underruns.SetText(fmt.Sprintf("%d (%s silence)", f.Underruns, formatMillis(f.Silent)))
	held := ""
	if f.Held {
		held = " (prebuffering)"
	}
	p.buffered.SetText(formatSeconds(f.Buffered) + held)
	// Not part of the RTF above: the generator was ahead and the buffer full.
	p.bufWait.SetText(formatSeconds(f.BufferWait))
	p.progress.SetText(fmt.Sprintf("sentence %d of %d", min(f.Sentence+1, f.Sentences), f.Sentences))
	if f.Synthesised {
		p.progress.SetText(fmt.Sprintf("%d of %d sentences synthesised", f.Sentence, f.Sentences))
	}
	p.timeline.set(f.Timeline, f.FirstSound, f.Elapsed)
	p.summary.SetText(summaryText(f))
}

// summaryText is the folded panel's line: first sound and real-time factor.
func summaryText(f speech.Figures) string {
	if f.FirstSound < 0 && f.RTF <= 0 {
		return ""
	}
	s := "first sound " + formatMillis(f.FirstSound)
	if f.RTF > 0 {
		s += fmt.Sprintf(" · RTF %.2f", f.RTF)
	}
	return s
}

const detailsLabel = "Details"

// buildDetails is the latency panel folded under a Details toggle; whether
// it is unfolded is remembered.
func (u *UI) buildDetails() fyne.CanvasObject {
	u.detailsBtn = widget.NewButton(detailsLabel, u.toggleDetails)
	u.detailsBtn.Importance = widget.LowImportance
	u.details = container.NewStack(widget.NewCard("Latency", "", u.panel.box))
	u.showDetails(u.prefs.Details)
	head := container.NewBorder(nil, nil, u.detailsBtn, nil, u.panel.summary)
	return container.NewVBox(head, u.details)
}

// toggleDetails folds or unfolds the latency panel and remembers it.
func (u *UI) toggleDetails() {
	u.prefs.Details = !u.prefs.Details
	u.showDetails(u.prefs.Details)
	u.saveSettingsLater()
}

func (u *UI) showDetails(open bool) {
	if open {
		u.detailsBtn.SetIcon(theme.MenuDropDownIcon())
		u.details.Show()
		u.panel.summary.Hide()
		return
	}
	u.detailsBtn.SetIcon(theme.MenuExpandIcon())
	u.details.Hide()
	u.panel.summary.Show()
}

func (p *latencyPanel) reset() {
	p.show(speech.Figures{TTFC: -1, FirstSound: -1})
	for _, l := range []*widget.Label{p.underruns, p.buffered, p.bufWait, p.progress} {
		l.SetText("–")
	}
}

// formatMillis shows a duration in ms; negative means "not yet".
func formatMillis(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%.1f s", d.Seconds())
}
