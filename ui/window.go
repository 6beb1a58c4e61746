package ui

import (
	"sync"
	"sync/atomic"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
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
	voice      *widget.Select
	lang       *widget.Select
	instruct   *widget.Entry
	instructR  *fyne.Container
	speakBtn   *widget.Button
	stopBtn    *widget.Button
	saveBtn    *widget.Button
	model      *widget.Select
	device     *widget.Label
	status     *widget.Label
	errorMsg   *widget.Label
	audioWarn  *widget.Label
	content    fyne.CanvasObject
	instructL  *widget.Label
	designing  bool   // the loaded model is VoiceDesign: the description is required
	voiceGuard bool   // the voice picker is being changed by code
	lastVoice  string // the picker's last real choice (not New voice…)
}

// New builds the widgets. It starts no goroutines; call Start once the
// window shows.
func New(cfg Config) *UI {
	u := &UI{cfg: cfg, stop: make(chan struct{}), modelIdx: -1}
	post := cfg.Post
	if post == nil {
		post = fyne.Do
	}
	// After Close (the window is gone, the event loop may have ended) late
	// completions from background goroutines are dropped, both when posted
	// and when a queued one finally runs.
	u.post = func(f func()) {
		if u.closed.Load() {
			return
		}
		post(func() {
			if !u.closed.Load() {
				f()
			}
		})
	}
	// A broken voices.json only loses the descriptions; names still show.
	u.known, _ = assets.Voices()
	u.build()
	return u
}

// Content is the window's root object.
func (u *UI) Content() fyne.CanvasObject { return u.content }

func (u *UI) build() {
	u.text = newSpeakEntry()
	u.text.SetPlaceHolder("Type text to speak, then press Speak or Ctrl+Enter…")
	u.text.SetMinRowsVisible(7)
	u.text.onSpeak, u.text.onStop = u.Speak, u.Stop

	u.voice = widget.NewSelect(nil, func(s string) { u.voiceChanged(s) })
	u.voice.PlaceHolder = "(no model loaded)"
	u.lang = widget.NewSelect(nil, nil)
	u.lang.PlaceHolder = "Auto"
	u.instruct = widget.NewEntry()
	u.instruct.SetPlaceHolder("Optional speaking style, e.g. \"calm and slow\"")
	u.instructL = widget.NewLabel("Style (optional)")
	u.instructR = container.NewBorder(nil, nil, u.instructL, nil, u.instruct)
	u.instructR.Hide()

	u.speakBtn = widget.NewButtonWithIcon("Speak (Ctrl+Enter)", theme.MediaPlayIcon(), u.Speak)
	u.speakBtn.Importance = widget.HighImportance
	u.speakBtn.Disable()
	u.stopBtn = widget.NewButtonWithIcon("Stop (Esc)", theme.MediaStopIcon(), u.Stop)
	u.stopBtn.Disable()
	u.saveBtn = widget.NewButtonWithIcon("Save WAV…", theme.DocumentSaveIcon(), u.saveDialog)
	u.saveBtn.Disable()

	names := make([]string, len(u.cfg.Models))
	for i, m := range u.cfg.Models {
		names[i] = m.Name
	}
	u.model = widget.NewSelect(names, func(string) { u.selectModel(u.model.SelectedIndex()) })
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
	u.history = newHistoryList(func(text string) { u.text.SetText(text) })

	top := container.NewBorder(nil, nil, widget.NewLabel("Model"), u.device, u.model)
	picks := container.NewVBox(
		container.NewBorder(nil, nil, widget.NewLabel("Voice"), nil, u.voice),
		container.NewBorder(nil, nil, widget.NewLabel("Language"), nil, u.lang),
		u.instructR,
	)
	buttons := container.NewHBox(u.speakBtn, u.stopBtn, u.saveBtn)
	var welcome fyne.CanvasObject
	if w := u.cfg.Welcome; w != nil {
		welcome = w
		if len(u.cfg.Models) > 0 {
			w.Hide()
		}
	}
	left := container.NewBorder(welcome,
		container.NewVBox(picks, buttons, u.status, u.errorMsg, u.audioWarn),
		nil, nil, u.text)
	right := container.NewBorder(
		widget.NewCard("Latency", "", u.panel.box), nil, nil, nil,
		container.NewBorder(widget.NewLabelWithStyle("History", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), nil, nil, nil, u.history.list))
	split := container.NewHSplit(container.NewPadded(left), container.NewPadded(right))
	split.Offset = 0.52
	u.content = container.NewBorder(container.NewVBox(container.NewPadded(top), widget.NewSeparator()), nil, nil, nil, split)
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
	w.Canvas().AddShortcut(speakShortcut, func(fyne.Shortcut) { u.Speak() })
	w.Canvas().AddShortcut(&desktopEnter, func(fyne.Shortcut) { u.Speak() })
	w.Canvas().SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape {
			u.Stop()
		}
	})
}

// Start loads the first model in the background and starts the ticker
// that refreshes the latency panel about ten times a second.
func (u *UI) Start() {
	go u.tick()
	if len(u.cfg.Models) > 0 {
		u.model.SetSelectedIndex(0) // triggers selectModel
	} else {
		u.setStatus("No model installed yet.")
	}
}

// Close stops the ticker and any speech, then closes the engine in the
// background once the utterance has wound down.
func (u *UI) Close() {
	u.closed.Store(true)
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
