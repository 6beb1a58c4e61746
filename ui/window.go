package ui

import (
	"context"
	"os"
	"sync"
	"sync/atomic"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
	"talkbox/app/history"
	"talkbox/app/settings"
	"talkbox/assets"
	"talkbox/ui/speech"
)

// UI is the main window's content and behaviour. Fields below "UI goroutine
// state" are touched only on the UI goroutine (widget callbacks and Post).
type UI struct {
	cfg   Config
	post  func(func())
	known map[string]assets.VoiceInfo
	win   fyne.Window

	current atomic.Pointer[speech.Utterance] // read by the ticker goroutine
	stop    chan struct{}
	stopped sync.Once
	pending atomic.Bool // a panel update is queued and not yet run
	closed  atomic.Bool // after Close nothing more is posted to the UI
	// quitting is set when the app starts to stop (Quitting), before Close.
	quitting atomic.Bool

	// UI goroutine state.
	eng        Engine
	modelIdx   int
	loadSeq    int
	cur        *speech.Utterance
	nextID     uint64
	lastRTF    float64
	lastPCM    []float32
	voices     pickList
	langs      pickList
	history    *historyList
	panel      *latencyPanel
	text       *speakEntry
	voice      *keySelect
	lang       *keySelect
	instruct   *speakEntry
	instructR  *fyne.Container
	speakBtn   *widget.Button
	stopBtn    *widget.Button
	pauseBtn   *widget.Button
	themeSel   *widget.Select
	openBtn    *widget.Button
	clipBtn    *widget.Button
	saveBtn    *widget.Button
	exportBtn  *widget.Button
	modelsBtn  *widget.Button
	model      *keySelect
	device     *widget.Label
	status     *widget.Label
	errorMsg   *widget.Label
	audioWarn  *widget.Label
	volume     *keySlider
	volumeVal  *widget.Label
	speed      *keySlider
	speedVal   *widget.Label
	output     *keySelect
	outputNote *widget.Label
	// outputRefresh lists the devices again (one plugged in since start).
	outputRefresh *widget.Button
	// outputGuard is set while code changes the device picker; outputSeq
	// numbers device changes so only the latest one's result is shown.
	outputGuard bool
	outputSeq   int
	detailsBtn  *widget.Button
	details     *fyne.Container // the latency card, shown when unfolded
	settingsBtn *widget.Button
	content     fyne.CanvasObject
	instructL   *widget.Label
	designing   bool   // the loaded model is VoiceDesign: the description is required
	voiceGuard  bool   // the voice picker is being changed by code
	lastVoice   string // the picker's last real choice (not New voice…)

	prefs       settings.Settings // what is remembered; refreshed before each save
	restored    bool              // the saved voice/language were applied to a loaded model
	tempHistory string            // folder of a run-only history, removed at Close
	histHeader  *widget.Label
	histLimit   *widget.Select
	undoBar     *fyne.Container
	undoText    string // the draft a "Use" replaced
	replayStop  context.CancelFunc
	replayDone  chan struct{}
	exporting   bool

	// The reading workflow (reading.go).
	reader   *readView
	readPane *fyne.Container // the read view with its bar
	readInfo *widget.Label
	editBtn  *widget.Button
	closeBtn *widget.Button
	prevBtn  *widget.Button
	nextBtn  *widget.Button
	doc      *document                  // shown in the read view; nil while the text box shows
	docTemp  bool                       // doc is the text box's text, shown while it is spoken
	curDoc   *document                  // the document the current utterance reads
	curFrom  int                        // the sentence of curDoc it started at
	refocus  bool                       // the text box had the focus when its text was spoken
	moved    map[*speech.Utterance]bool // utterances a skip or tap replaced: kept out of the history

	cjkChecked bool // the fonts were checked for CJK text

	// Settings writes: each gets a generation; a background write older
	// than the last one written is skipped, so a late goroutine never
	// puts back an older state over the one saved at Close.
	settingsGen atomic.Uint64
	settingsMu  sync.Mutex
	savedGen    uint64 // guarded by settingsMu
}

// New builds the widgets. It starts no goroutines; call Start once the
// window shows.
func New(cfg Config) *UI {
	u := &UI{cfg: cfg, stop: make(chan struct{}), modelIdx: -1, prefs: cfg.Settings, moved: map[*speech.Utterance]bool{}}
	if u.prefs == (settings.Settings{}) {
		u.prefs = settings.Defaults()
	}
	if u.cfg.History == nil {
		// History only for this run: a private folder removed at Close.
		if dir, err := os.MkdirTemp("", "talkbox-history-"); err == nil {
			if st, err := history.Open(dir, 0); err == nil {
				u.cfg.History, u.tempHistory = st, dir
			}
		}
	}
	post := cfg.Post
	if post == nil {
		post = fyne.Do
	}
	// After Close (the window is gone, the event loop may have ended) late
	// completions from background goroutines are dropped, both when posted
	// and when a queued one finally runs.
	u.post = func(f func()) {
		if u.gone() {
			return
		}
		post(func() {
			if !u.gone() {
				f()
			}
		})
	}
	// A broken voices.json only loses the descriptions; names still show.
	u.known, _ = assets.Voices()
	applyTheme(u.prefs.Theme) // before the widgets, which take their colours as they are built
	u.build()
	return u
}

// Content is the window's root object.
func (u *UI) Content() fyne.CanvasObject { return u.content }

func (u *UI) build() {
	u.text = newSpeakEntry()
	u.text.SetPlaceHolder("Type text to speak, then press Speak or Ctrl+Enter…")
	u.text.SetMinRowsVisible(7)

	u.voice = newKeySelect(nil, func(s string) { u.voiceChanged(s) })
	u.voice.PlaceHolder = "(no model loaded)"
	u.lang = newKeySelect(nil, nil)
	u.lang.PlaceHolder = "Auto"
	u.instruct = newLineEntry()
	u.instruct.SetPlaceHolder("Optional speaking style, e.g. \"calm and slow\"")
	u.instructL = widget.NewLabel("Style (optional)")
	u.instructR = container.NewBorder(nil, nil, u.instructL, nil, u.instruct)
	u.instructR.Hide()

	u.speakBtn = widget.NewButtonWithIcon("Speak (Ctrl+Enter)", theme.MediaPlayIcon(), u.Speak)
	u.speakBtn.Importance = widget.HighImportance
	u.speakBtn.Disable()
	u.stopBtn = widget.NewButtonWithIcon("Stop (Esc)", theme.MediaStopIcon(), u.Stop)
	u.stopBtn.Disable()
	u.pauseBtn = widget.NewButtonWithIcon(pauseLabel, theme.MediaPauseIcon(), u.TogglePause)
	u.pauseBtn.Disable()
	u.openBtn = widget.NewButtonWithIcon("Open…", theme.FolderOpenIcon(), u.openDialog)
	u.clipBtn = widget.NewButtonWithIcon("Read clipboard", theme.ContentPasteIcon(), u.ReadClipboard)
	u.saveBtn = widget.NewButtonWithIcon("Save WAV…", theme.DocumentSaveIcon(), u.saveDialog)
	u.saveBtn.Disable()
	u.exportBtn = widget.NewButtonWithIcon("Export…", theme.DownloadIcon(), u.exportDialog)
	u.exportBtn.Disable()
	u.settingsBtn = widget.NewButtonWithIcon("Settings…", theme.SettingsIcon(), u.settingsDialog)
	u.modelsBtn = widget.NewButtonWithIcon("Models…", theme.StorageIcon(), u.modelsDialog)
	if u.cfg.Store == nil {
		u.modelsBtn.Hide()
	}
	textArea := u.buildReader()
	u.setText(u.prefs.Draft)
	u.instruct.SetText(u.prefs.Instruct)

	names := make([]string, len(u.cfg.Models))
	for i, m := range u.cfg.Models {
		names[i] = m.Name
	}
	u.model = newKeySelect(names, func(string) { u.selectModel(u.model.SelectedIndex()) })
	u.model.PlaceHolder = "(no models found)"
	u.device = widget.NewLabel("Device: –")
	u.device.TextStyle = fyne.TextStyle{Bold: true}

	u.status = widget.NewLabel("")
	u.status.Wrapping = fyne.TextWrapWord
	u.errorMsg = widget.NewLabel("")
	u.errorMsg.Importance = widget.DangerImportance
	u.errorMsg.Wrapping = fyne.TextWrapWord
	u.errorMsg.Hide()
	u.audioWarn = widget.NewLabel(audio.NoDeviceMessage)
	u.audioWarn.Importance = widget.WarningImportance
	u.audioWarn.Wrapping = fyne.TextWrapWord
	if u.cfg.Player == nil || !u.cfg.Player.NoDevice() {
		u.audioWarn.Hide()
	}

	u.panel = newLatencyPanel()
	u.panel.reset()
	u.history = newHistoryList(historyActions{play: u.replay, save: u.saveEntryDialog, copyText: u.copyEntry,
		remove: u.deleteEntry, use: u.useEntry})
	u.histHeader = widget.NewLabelWithStyle("History", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	var limits []string
	for _, mb := range historyLimits {
		limits = append(limits, limitLabel(mb))
	}
	u.histLimit = widget.NewSelect(limits, nil)
	u.histLimit.PlaceHolder = limitLabel(u.prefs.HistoryMB)
	u.histLimit.OnChanged = u.setHistoryLimit
	undoLabel := widget.NewLabel("The text box now holds a history entry.")
	u.undoBar = container.NewHBox(undoLabel, widget.NewButtonWithIcon("Undo", theme.ContentUndoIcon(), u.undoUse))
	u.undoBar.Hide()

	u.device.Truncation = fyne.TextTruncateEllipsis
	top := container.NewVBox(
		container.NewBorder(nil, nil, widget.NewLabel("Model"), u.modelsBtn, u.model),
		container.NewBorder(nil, nil, nil, container.NewHBox(u.openBtn, u.clipBtn, u.themePicker(), u.settingsBtn), u.device))
	picks := container.NewVBox(
		container.NewBorder(nil, nil, widget.NewLabel("Voice"), nil, u.voice),
		container.NewBorder(nil, nil, widget.NewLabel("Language"), nil, u.lang),
		u.instructR,
	)
	buttons := container.NewHBox(u.speakBtn, u.pauseBtn, u.prevBtn, u.nextBtn, u.stopBtn, u.saveBtn, u.exportBtn)
	player := u.buildPlayer()
	var welcome fyne.CanvasObject
	if w := u.cfg.Welcome; w != nil {
		welcome = w
		if len(u.cfg.Models) > 0 {
			w.Hide()
		}
	}
	left := container.NewBorder(welcome,
		container.NewVBox(u.undoBar, picks, buttons, player, u.status, u.errorMsg, u.audioWarn),
		nil, nil, textArea)
	right := container.NewBorder(
		u.buildDetails(), nil, nil, nil,
		container.NewBorder(container.NewBorder(nil, nil, u.histHeader, u.histLimit), nil, nil, nil, u.history.list))
	split := container.NewHSplit(container.NewPadded(left), container.NewPadded(right))
	split.Offset = 0.52
	u.content = container.NewBorder(container.NewVBox(container.NewPadded(top), widget.NewSeparator()), nil, nil, nil, split)
	u.wireKeys()
	u.watchCJK()
}

// AddModel adds a model to the picker (for example one the first-run panel
// just downloaded) and loads it. UI goroutine only.
func (u *UI) AddModel(m Model) {
	for i, have := range u.cfg.Models {
		if have.Dir == m.Dir {
			u.model.SetSelectedIndex(i)
			return
		}
	}
	u.cfg.Models = append(u.cfg.Models, m)
	u.model.SetOptions(append(u.model.Options, m.Name))
	if u.cfg.Welcome != nil {
		u.cfg.Welcome.Hide()
	}
	u.model.SetSelectedIndex(len(u.cfg.Models) - 1)
}

// Bind attaches window-level shortcuts (used when the text box is not
// focused) and keeps the window for dialogs.
func (u *UI) Bind(w fyne.Window) {
	u.win = w
	w.SetOnDropped(u.dropped)
	w.Canvas().AddShortcut(speakShortcut, func(fyne.Shortcut) { u.Speak() })
	w.Canvas().AddShortcut(&desktopEnter, func(fyne.Shortcut) { u.Speak() })
	w.Canvas().AddShortcut(prevShortcut, func(fyne.Shortcut) { u.Skip(-1) })
	w.Canvas().AddShortcut(nextShortcut, func(fyne.Shortcut) { u.Skip(1) })
	w.Canvas().SetOnTypedKey(u.windowKey)
}

// Start shows the kept history, loads the model used last (or else the
// first one the window can serve) in the background, and starts the ticker
// that refreshes the latency panel about ten times a second.
func (u *UI) Start() {
	go u.tick()
	u.listOutputs()
	u.refreshHistory()
	switch i := startModel(u.cfg.Models, u.prefs.Model); {
	case i >= 0:
		u.model.SetSelectedIndex(i) // triggers selectModel
	case len(u.cfg.Models) > 0:
		u.setStatus("None of the installed models can be used here: " + u.cfg.Models[0].CannotServe + ". Pick one to try, or get another with Models….")
	default:
		u.setStatus("No model installed yet.")
	}
	if u.cfg.Notice != "" {
		u.showError(u.cfg.Notice)
	}
}

// startModel is the model to load at start: the one used last when the
// window can serve it, else the first one it can; -1 when none.
func startModel(models []Model, last string) int {
	first := -1
	for i, m := range models {
		if m.CannotServe != "" {
			continue
		}
		if last != "" && m.Dir == last {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

// gone reports whether posted work must be dropped: the window is closed
// or the app is stopping.
func (u *UI) gone() bool { return u.closed.Load() || u.quitting.Load() }

// Quitting says that the app is about to stop: nothing more is posted to
// the UI from here on. Once Fyne's event loop has ended, fyne.Do runs a
// function at once on the caller's goroutine, so a ticker update posted
// between the loop's end and Close would touch widgets off the UI
// goroutine. Safe from any goroutine; Close still saves the settings.
func (u *UI) Quitting() { u.quitting.Store(true) }

// Close stops the ticker and any speech, then closes the engine in the
// background once the utterance has wound down.
func (u *UI) Close() {
	if !u.closed.Load() {
		u.saveSettings()
	}
	u.closed.Store(true)
	if u.replayStop != nil {
		u.replayStop()
	}
	if u.tempHistory != "" {
		os.RemoveAll(u.tempHistory)
	}
	u.stopped.Do(func() { close(u.stop) })
	cur, eng := u.cur, u.eng
	u.eng = nil
	if cur != nil {
		cur.Cancel()
	}
	if u.cfg.Player != nil {
		u.cfg.Player.Stop()
	}
	if eng != nil {
		go func() {
			if cur != nil {
				<-cur.Done()
			}
			_ = eng.Close()
		}()
	}
}
