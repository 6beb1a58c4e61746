package ui

import (
	"image/color"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// maxTicks bounds the drawn chunk marks; longer utterances are thinned.
const maxTicks = 160

// timeline draws when each PCM chunk arrived (thin bars) and when the first
// sample reached the speaker (a taller accent bar) on a time axis that grows
// with the utterance. Only the UI goroutine touches it.
type timeline struct {
	widget.BaseWidget
	chunks     []time.Duration
	firstSound time.Duration // < 0: not yet
	span       time.Duration
}

func newTimeline() *timeline {
	t := &timeline{firstSound: -1}
	t.ExtendBaseWidget(t)
	return t
}

// set replaces the data and redraws.
func (t *timeline) set(chunks []time.Duration, firstSound, elapsed time.Duration) {
	t.chunks, t.firstSound = chunks, firstSound
	t.span = elapsed
	for _, c := range chunks {
		t.span = max(t.span, c)
	}
	t.span = max(t.span, firstSound, time.Second)
	t.Refresh()
}

func (t *timeline) CreateRenderer() fyne.WidgetRenderer {
	r := &timelineRenderer{t: t, bg: canvas.NewRectangle(color.Transparent)}
	r.bg.StrokeWidth = 1
	r.axis = canvas.NewText("", theme.Color(theme.ColorNameForeground))
	r.axis.TextSize = theme.CaptionTextSize()
	r.refreshColors()
	return r
}

type timelineRenderer struct {
	t     *timeline
	bg    *canvas.Rectangle
	axis  *canvas.Text
	ticks []*canvas.Rectangle
	sound *canvas.Rectangle
	size  fyne.Size
}

func (r *timelineRenderer) refreshColors() {
	r.bg.StrokeColor = theme.Color(theme.ColorNameSeparator)
	r.bg.FillColor = theme.Color(theme.ColorNameInputBackground)
	r.axis.Color = theme.Color(theme.ColorNamePlaceHolder)
}

func (r *timelineRenderer) MinSize() fyne.Size {
	return fyne.NewSize(120, 34+theme.CaptionTextSize())
}

func (r *timelineRenderer) Layout(s fyne.Size) {
	r.size = s
	r.place()
}

// place builds and positions one bar per (thinned) chunk.
func (r *timelineRenderer) place() {
	s := r.size
	barH := s.Height - theme.CaptionTextSize() - 6
	r.bg.Resize(fyne.NewSize(s.Width, barH))
	r.bg.Move(fyne.NewPos(0, 0))
	step := 1
	if n := len(r.t.chunks); n > maxTicks {
		step = (n + maxTicks - 1) / maxTicks
	}
	want := (len(r.t.chunks) + step - 1) / step
	for len(r.ticks) < want {
		r.ticks = append(r.ticks, canvas.NewRectangle(theme.Color(theme.ColorNamePrimary)))
	}
	r.ticks = r.ticks[:want]
	x := func(d time.Duration) float32 {
		return 2 + (s.Width-4)*float32(d.Seconds()/r.t.span.Seconds())
	}
	for i := range r.ticks {
		tk := r.ticks[i]
		tk.FillColor = theme.Color(theme.ColorNamePrimary)
		tk.Resize(fyne.NewSize(2, barH*0.5))
		tk.Move(fyne.NewPos(x(r.t.chunks[i*step]), barH*0.45))
	}
	r.sound = nil
	if r.t.firstSound >= 0 {
		r.sound = canvas.NewRectangle(theme.Color(theme.ColorNameSuccess))
		r.sound.Resize(fyne.NewSize(3, barH-4))
		r.sound.Move(fyne.NewPos(x(r.t.firstSound), 2))
	}
	r.axis.Text = "0–" + formatSeconds(r.t.span) + " · short bars: chunks · tall bar: first sound"
	r.axis.Move(fyne.NewPos(0, barH+2))
	r.axis.Resize(fyne.NewSize(s.Width, theme.CaptionTextSize()+4))
}

func (r *timelineRenderer) Objects() []fyne.CanvasObject {
	objs := make([]fyne.CanvasObject, 0, len(r.ticks)+3)
	objs = append(objs, r.bg, r.axis)
	for _, t := range r.ticks {
		objs = append(objs, t)
	}
	if r.sound != nil {
		objs = append(objs, r.sound)
	}
	return objs
}

func (r *timelineRenderer) Refresh() {
	r.refreshColors()
	r.place()
	canvas.Refresh(r.t)
}

func (r *timelineRenderer) Destroy() {}
