package ui

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/engine"
)

// document is a text cut into the sentences Speak sends one by one
// (engine.SentenceSpans), with where its paragraphs begin.
type document struct {
	text  string
	spans []engine.Span
	para  []bool // sentence i begins a paragraph (a blank line before it)
}

func newDocument(text string) *document {
	d := &document{text: text, spans: engine.SentenceSpans(text)}
	d.para = make([]bool, len(d.spans))
	prev := 0
	for i, s := range d.spans {
		d.para[i] = i > 0 && strings.Count(text[prev:s.Start], "\n") >= 2
		prev = s.End
	}
	return d
}

func (d *document) len() int { return len(d.spans) }

// sentence i as it is sent to the engine.
func (d *document) sentence(i int) string { return d.text[d.spans[i].Start:d.spans[i].End] }

// from is the text from sentence i on and its sentences, for a Speak that
// starts there.
func (d *document) from(i int) (string, []string) {
	out := make([]string, d.len()-i)
	for k := range out {
		out[k] = d.sentence(i + k)
	}
	return strings.TrimRightFunc(d.text[d.spans[i].Start:], isSpace), out
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\u00a0' || r == '\u3000'
}

// readView shows a document one sentence a row in a widget.List, which
// lays out only the rows on screen, so a book opens and scrolls as fast as
// a page (the multi-line Entry lays out its whole text on every change).
// One sentence is marked: the one being spoken, or where Speak starts.
// Tapping a sentence calls onTap with its index. UI goroutine only.
type readView struct {
	widget.BaseWidget
	doc   *document
	cur   int           // the marked sentence
	list  *sentenceList // a new one for each document: List keeps the row heights it was given
	box   *fyne.Container
	onTap func(int)
	// onStop is Esc on the list.
	onStop func()
	post   func(func())

	width   float32         // the width the row heights were measured at
	heights map[int]float32 // row heights given to the list
	pending map[int]float32 // heights measured, to be given after this layout
	queued  bool            // a post applying pending is queued
	probe   *sentenceRow    // the height of a row not measured yet
}

func newReadView(post func(func()), onTap func(int)) *readView {
	v := &readView{doc: newDocument(""), post: post, onTap: onTap,
		heights: map[int]float32{}, pending: map[int]float32{}}
	v.probe = newSentenceRow(nil)
	v.box = container.NewStack()
	v.newList()
	v.ExtendBaseWidget(v)
	return v
}

// newList puts a fresh list in the view.
func (v *readView) newList() {
	l := &sentenceList{view: v}
	l.Length = func() int { return v.doc.len() }
	l.CreateItem = func() fyne.CanvasObject { return newSentenceRow(v.tapped) }
	l.UpdateItem = func(id widget.ListItemID, o fyne.CanvasObject) {
		if l == v.list && id < v.doc.len() { // not a list of an earlier document
			v.update(id, o.(*sentenceRow))
		}
	}
	l.OnSelected = func(id widget.ListItemID) { // Space on a focused row
		l.UnselectAll()
		if v.onTap != nil && l == v.list {
			v.onTap(id)
		}
	}
	l.HideSeparators = true
	l.ExtendBaseWidget(l)
	v.list = l
	v.box.Objects = []fyne.CanvasObject{container.NewThemeOverride(l, readTheme{})}
	v.box.Refresh()
}

// setDocument shows d from its first sentence, marking sentence cur.
func (v *readView) setDocument(d *document, cur int) {
	v.doc, v.cur = d, cur
	clear(v.heights)
	clear(v.pending)
	v.newList()
}

// mark moves the mark to sentence i and scrolls it into view: when it has
// gone below the bottom edge, the view moves on so that it sits near the
// top, as a reader turns a page.
func (v *readView) mark(i int) {
	if i < 0 || i >= v.doc.len() || i == v.cur {
		return
	}
	old := v.cur
	v.cur = i
	v.list.RefreshItem(old)
	v.list.RefreshItem(i)
	before := v.list.GetScrollOffset()
	v.list.ScrollTo(i)
	if after := v.list.GetScrollOffset(); after > before {
		v.list.ScrollToOffset(after + v.list.Size().Height*2/3 - v.rowHeight(i))
	}
}

func (v *readView) tapped(row *sentenceRow) {
	if row.id >= 0 && row.id < v.doc.len() && v.onTap != nil {
		v.onTap(row.id)
	}
}

// update fills a row for sentence id and measures its height at the list's
// width. The List takes a new height only outside its own layout pass, so
// changed heights are handed over in a post.
func (v *readView) update(id int, row *sentenceRow) {
	row.id = id
	row.set(displayText(v.doc.sentence(id)), v.doc.para[id], id == v.cur)
	h := row.heightAt(v.list.Size().Width)
	if old, ok := v.heights[id]; ok && old == h {
		return
	}
	v.pending[id] = h
	if !v.queued {
		v.queued = true
		v.post(v.applyHeights)
	}
}

func (v *readView) applyHeights() {
	v.queued = false
	for id, h := range v.pending {
		if id < v.doc.len() {
			v.heights[id] = h
			v.list.SetItemHeight(id, h)
		}
	}
	clear(v.pending)
}

// rowHeight is sentence i's row height as last measured (a one-line row
// before it has been on screen).
func (v *readView) rowHeight(i int) float32 {
	if h, ok := v.heights[i]; ok {
		return h
	}
	return v.probe.MinSize().Height
}

// Resize re-measures the rows on screen when the width changes: their text
// wraps differently now.
func (v *readView) Resize(s fyne.Size) {
	v.BaseWidget.Resize(s)
	if s.Width != v.width && v.doc.len() > 0 {
		v.width = s.Width
		v.post(v.list.Refresh)
	}
}

func (v *readView) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(v.box) }

// readInnerPadding is the room around a sentence's text, readPadding the
// room between rows.
const (
	readInnerPadding = 3
	readPadding      = 1
)

// readTheme is the window's theme with less room between rows, so that the
// sentences of a paragraph read as one block and the blank line before a
// paragraph stands out.
type readTheme struct{}

func (readTheme) current() fyne.Theme { return fyne.CurrentApp().Settings().Theme() }
func (t readTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	return t.current().Color(n, v)
}
func (t readTheme) Font(s fyne.TextStyle) fyne.Resource     { return t.current().Font(s) }
func (t readTheme) Icon(n fyne.ThemeIconName) fyne.Resource { return t.current().Icon(n) }
func (t readTheme) Size(n fyne.ThemeSizeName) float32 {
	switch n {
	case theme.SizeNamePadding:
		return readPadding
	case theme.SizeNameInnerPadding:
		return readInnerPadding
	}
	return t.current().Size(n)
}

// sentenceList is the read view's list; Esc on it stops, as on every field.
type sentenceList struct {
	widget.List
	view *readView
}

func (l *sentenceList) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyEscape && l.view.onStop != nil {
		l.view.onStop()
		return
	}
	l.List.TypedKey(k)
}

// displayText is a sentence as shown: line breaks of hard-wrapped text and
// runs of spaces become single spaces.
func displayText(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") && !strings.Contains(s, "  ") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// sentenceRow is one sentence of the read view: its text word-wrapped on a
// background that marks the spoken sentence, with a blank line's room above
// when it begins a paragraph.
type sentenceRow struct {
	widget.BaseWidget
	id    int // the sentence shown
	label *widget.Label
	bg    *canvas.Rectangle
	gap   *canvas.Rectangle
	box   *fyne.Container
	onTap func(*sentenceRow)
}

func newSentenceRow(onTap func(*sentenceRow)) *sentenceRow {
	r := &sentenceRow{label: widget.NewLabel(""), onTap: onTap}
	r.label.Wrapping = fyne.TextWrapWord
	r.bg = canvas.NewRectangle(theme.Color(theme.ColorNameSelection))
	r.bg.CornerRadius = theme.Size(theme.SizeNameSelectionRadius)
	r.gap = canvas.NewRectangle(color.Transparent)
	r.gap.SetMinSize(fyne.NewSize(0, theme.Size(theme.SizeNameText)))
	r.gap.Hide() // a new row is one line: the List's height for rows not measured yet
	// The text lines up with the other text of the window (the label's
	// inner padding is small here, see readTheme). Rows are made while the
	// list is drawn, when theme.Size answers with readTheme, so the
	// window's padding is asked of the app's theme.
	side := readTheme{}.current().Size(theme.SizeNameInnerPadding) - readInnerPadding
	text := container.New(layout.NewCustomPaddedLayout(0, 0, side, side), r.label)
	r.box = container.NewBorder(r.gap, nil, nil, nil, container.NewStack(r.bg, text))
	r.ExtendBaseWidget(r)
	return r
}

func (r *sentenceRow) set(text string, para, marked bool) {
	show(r.gap, para)
	show(r.bg, marked)
	r.bg.FillColor = theme.Color(theme.ColorNameSelection)
	r.bg.Refresh()
	r.label.SetText(text)
	r.box.Refresh() // lays the gap out again
}

func show(o fyne.CanvasObject, visible bool) {
	if visible {
		o.Show()
	} else {
		o.Hide()
	}
}

// heightAt is the row's height when it is w wide.
func (r *sentenceRow) heightAt(w float32) float32 {
	r.Resize(fyne.NewSize(w, r.Size().Height))
	return r.MinSize().Height
}

func (r *sentenceRow) Tapped(*fyne.PointEvent) {
	if r.onTap != nil {
		r.onTap(r)
	}
}

// Cursor shows a hand over a sentence: tapping it reads from there.
func (r *sentenceRow) Cursor() desktop.Cursor { return desktop.PointerCursor }

func (r *sentenceRow) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(container.NewThemeOverride(r.box, readTheme{}))
}
