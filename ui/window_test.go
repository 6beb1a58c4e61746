package ui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
	"talkbox/app/history"
	"talkbox/engine"
	"talkbox/ui/uitest"
)

// harness runs the window under Fyne's test driver. Post queues work that
// the test goroutine runs in drain, exactly as fyne.Do hands work to the UI
// goroutine, so widgets are only ever touched by one goroutine (-race clean).
type harness struct {
	t      *testing.T
	q      chan func()
	ui     *UI
	fake   *timedEngine
	player *audio.Player
	win    fyne.Window
}

// timedEngine records when each request reached the engine.
type timedEngine struct {
	*uitest.FakeEngine
	mu    sync.Mutex
	start []time.Time
}

func (e *timedEngine) Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error) {
	e.mu.Lock()
	e.start = append(e.start, time.Now())
	e.mu.Unlock()
	return e.FakeEngine.Synthesize(ctx, req)
}

func (e *timedEngine) starts() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.start...)
}

func newHarness(t *testing.T, fake *uitest.FakeEngine, openErr error) *harness {
	t.Helper()
	return newHarnessWith(t, fake, openErr, nil)
}

// newHarnessWith lets a test change the Config before the window is built.
func newHarnessWith(t *testing.T, fake *uitest.FakeEngine, openErr error, change func(*Config)) *harness {
	t.Helper()
	test.NewTempApp(t)
	p, err := audio.Open(audio.Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, q: make(chan func(), 4096), fake: &timedEngine{FakeEngine: fake}, player: p}
	cfg := Config{
		Models: []Model{{Name: "fake model", Dir: "/nowhere"}},
		Open: func(dir string, _ OpenOptions) (Engine, error) {
			if openErr != nil {
				return nil, openErr
			}
			return h.fake, nil
		},
		Player: p,
		Post:   func(f func()) { h.q <- f },
	}
	if change != nil {
		change(&cfg)
	}
	h.ui = New(cfg)
	h.win = test.NewTempWindow(t, h.ui.Content())
	h.win.Resize(fyne.NewSize(1000, 700))
	h.ui.Bind(h.win)
	t.Cleanup(func() {
		h.ui.Close()
		if c := h.ui.cur; c != nil {
			<-c.Done()
		}
		if err := p.Close(); err != nil {
			t.Errorf("player close: %v", err)
		}
	})
	h.ui.Start()
	return h
}

// waitFor runs posted UI work until cond holds; the ticker posts ten times
// a second while speaking, so this wakes on real events, not sleeps.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(15 * time.Second)
	for !cond() {
		select {
		case f := <-h.q:
			f()
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s (status %q, error %q)", what, h.ui.status.Text, h.ui.errorMsg.Text)
		}
	}
}

func (h *harness) ready() {
	h.t.Helper()
	h.waitFor("the model to load", func() bool { return !h.ui.speakBtn.Disabled() || h.ui.errorMsg.Visible() })
}

func (h *harness) idle() bool { return h.ui.cur == nil }

// historyN waits until the history lists n entries (they are kept on a
// background goroutine) and returns them, newest first.
func (h *harness) historyN(n int) []history.Entry {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d history entries", n), func() bool { return len(h.ui.history.entries) >= n })
	return h.ui.history.entries
}

func labelFor(t *testing.T, u *UI, name string) string {
	t.Helper()
	l := u.voices.labelOf(name)
	if l == "" {
		t.Fatalf("no voice %q among %q", name, u.voices.labels)
	}
	return l
}

func TestPickersFilledFromModel(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.3}, nil)
	h.ready()
	u := h.ui
	if got := u.device.Text; got != "Device: Fake engine (RTF 0.30)" {
		t.Errorf("device label %q", got)
	}
	if len(u.voice.Options) != 9 {
		t.Fatalf("voice options %q, want the 9 speakers", u.voice.Options)
	}
	if got := labelFor(t, u, "eric"); got != "Eric — Lively Chengdu male, slightly husky (Sichuan dialect)" {
		t.Errorf("eric label %q", got)
	}
	if got := labelFor(t, u, "dylan"); !strings.HasSuffix(got, "(Beijing dialect)") {
		t.Errorf("dylan label %q lacks the dialect", got)
	}
	if u.lang.Options[0] != "Auto" || u.lang.Selected != "Auto" {
		t.Errorf("language options %q selected %q, want Auto first and selected", u.lang.Options, u.lang.Selected)
	}
	if u.instructR.Visible() {
		t.Error("style field shown for a model without instruct support")
	}
	if !u.audioWarn.Visible() || u.audioWarn.Text != audio.NoDeviceMessage {
		t.Errorf("null backend: warning visible=%v text %q", u.audioWarn.Visible(), u.audioWarn.Text)
	}
}

// When the engine fell back to the CPU, the device line says why.
func TestDeviceLineSaysWhyNoGPU(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.3, NoGPU: "no NVIDIA driver or GPU found"}, nil)
	h.ready()
	if got, want := h.ui.device.Text, "Device: Fake engine (RTF 0.30) · GPU not used: no NVIDIA driver or GPU found"; got != want {
		t.Errorf("device line %q, want %q", got, want)
	}
}

// Type, pick a voice and language, Speak: two sentences are synthesised one
// after the other into one stream, the panel updates live, the history
// records the figures, the WAV saves, and history text copies back.
func TestSpeakUpdatesPanelAndHistory(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.3, Prefill: 20 * time.Millisecond}, nil)
	h.ready()
	u := h.ui
	first, second := "Hello there, this is talkbox.", "How are you?"
	test.Type(u.text, first+" "+second)
	u.voice.SetSelected(labelFor(t, u, "ryan"))
	u.lang.SetSelected("English")
	tapped := time.Now()
	test.Tap(u.speakBtn)
	if u.stopBtn.Disabled() || !strings.HasPrefix(u.status.Text, "Speaking") {
		t.Fatalf("after Speak: stop disabled=%v status %q", u.stopBtn.Disabled(), u.status.Text)
	}
	h.waitFor("live first-sound figure", func() bool { return u.panel.firstSound.Text != "–" || h.idle() })
	if h.idle() {
		t.Fatal("utterance finished before the panel showed a live figure")
	}
	if u.panel.ttfc.Text == "–" {
		t.Error("first sound shown before the first chunk")
	}
	h.waitFor("the utterance to finish", h.idle)

	reqs := h.fake.Requests()
	if len(reqs) != 2 || reqs[0].Text != first || reqs[1].Text != second {
		t.Fatalf("requests %+v, want the two sentences in order", reqs)
	}
	for _, r := range reqs {
		if r.Voice != "ryan" || r.Language != "english" {
			t.Errorf("request voice %q language %q, want ryan/english", r.Voice, r.Language)
		}
	}
	es := h.historyN(1)
	if len(es) != 1 {
		t.Fatalf("%d history entries, want 1", len(es))
	}
	e := es[0].Stats
	if es[0].Outcome != "done" || es[0].Voice != "ryan" || es[0].Language != "english" {
		t.Fatalf("history entry %+v", es[0])
	}
	t.Logf("fake RTF 0.3: TTFC %v, first sound %v, RTF %.2f, %.1f frames/s, %d underruns", e.TTFC, e.FirstSound, e.RTF, e.FramesPerS, e.Underruns)
	if e.TTFC <= 0 || e.FirstSound < e.TTFC || e.Underruns != 0 {
		t.Fatalf("history entry %+v: want done, 0 < TTFC <= first sound, no underruns", e)
	}
	if e.RTF < 0.2 || e.RTF > 0.6 {
		t.Errorf("measured RTF %.2f, want about 0.3", e.RTF)
	}
	frames := h.fake.FramesFor(first) + h.fake.FramesFor(second)
	if len(u.lastPCM) != frames*uitest.FakeFrameSamples {
		t.Errorf("kept %d samples, want %d", len(u.lastPCM), frames*uitest.FakeFrameSamples)
	}
	// Sentence 2 was synthesised while sentence 1 was still playing.
	starts := h.fake.starts()
	end1 := tapped.Add(e.FirstSound + time.Duration(h.fake.FramesFor(first))*80*time.Millisecond)
	if len(starts) != 2 || !starts[1].Before(end1) {
		t.Errorf("sentence 2 started at %v, after sentence 1 finished playing at %v", starts, end1)
	}
	if !strings.HasPrefix(u.status.Text, "Done") || !u.stopBtn.Disabled() || u.saveBtn.Disabled() {
		t.Errorf("after finishing: status %q stop disabled=%v save disabled=%v", u.status.Text, u.stopBtn.Disabled(), u.saveBtn.Disabled())
	}
	if u.panel.firstSound.Text == "–" || !strings.Contains(u.panel.underruns.Text, "0 (") {
		t.Errorf("final panel: first sound %q underruns %q", u.panel.firstSound.Text, u.panel.underruns.Text)
	}

	path := filepath.Join(t.TempDir(), "last")
	u.SaveWAV(path)
	h.waitFor("the WAV to save", func() bool { return strings.HasPrefix(u.status.Text, "Saved") || u.errorMsg.Visible() })
	st, err := os.Stat(path + ".wav")
	if err != nil || st.Size() != int64(44+2*len(u.lastPCM)) {
		t.Fatalf("saved WAV: %v, err %v; want %d bytes", st, err, 44+2*len(u.lastPCM))
	}

	u.text.SetText("")
	u.useEntry(u.history.entries[0])
	if u.text.Text != first+" "+second || u.undoBar.Visible() {
		t.Errorf("history did not copy the text back: %q", u.text.Text)
	}
}

// Esc stops at once; Ctrl+Enter speaks again; a Speak during a Speak
// cancels the first.
func TestStopThenSpeakAgain(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.5}, nil)
	h.ready()
	u := h.ui
	u.text.SetText(strings.Repeat("A long sentence that keeps going ", 6) + "and ends.")
	test.Tap(u.speakBtn)
	h.waitFor("sound to start", func() bool { return u.panel.firstSound.Text != "–" })
	esc := time.Now()
	u.text.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	h.waitFor("the stop to finish", h.idle)
	if d := time.Since(esc); d > time.Second {
		t.Errorf("stop took %v", d)
	}
	if got := h.historyN(1)[0].Outcome; got != "stopped" || u.status.Text != "Stopped." {
		t.Fatalf("after Esc: outcome %q status %q", got, u.status.Text)
	}
	if h.fake.Cancelled() < 1 {
		t.Error("the engine stream was not cancelled")
	}
	if u.errorMsg.Visible() {
		t.Errorf("stop showed an error: %q", u.errorMsg.Text)
	}

	u.text.SetText("Short one.")
	u.text.TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyReturn, Modifier: fyne.KeyModifierControl})
	h.waitFor("the second utterance", h.idle)
	if e := h.historyN(2)[0]; e.Outcome != "done" || e.Stats.FirstSound <= 0 || e.Text != "Short one." {
		t.Fatalf("second utterance: %+v", e)
	}

	// A new Speak while one runs cancels the running one.
	u.text.SetText(strings.Repeat("Another long sentence ", 8) + "here.")
	test.Tap(u.speakBtn)
	h.waitFor("the first chunk", func() bool { return u.panel.ttfc.Text != "–" })
	u.text.SetText("Replacement.")
	test.Tap(u.speakBtn)
	h.waitFor("the replacement to finish", func() bool { return h.idle() && len(u.history.entries) == 4 })
	if got := []string{u.history.entries[0].Outcome, u.history.entries[1].Outcome}; got[0] != "done" || got[1] != "stopped" {
		t.Fatalf("outcomes newest first %q, want done then stopped", got)
	}
	if u.history.entries[0].Text != "Replacement." {
		t.Fatalf("newest entry %q", u.history.entries[0].Text)
	}
}

func TestErrorsShowInWindow(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2, FailAfter: 3}, nil)
	h.ready()
	u := h.ui

	test.Tap(u.speakBtn)
	if !u.errorMsg.Visible() || !strings.Contains(u.errorMsg.Text, "Type some text") {
		t.Fatalf("empty text: error visible=%v %q", u.errorMsg.Visible(), u.errorMsg.Text)
	}
	test.Type(u.text, "This will fail.")
	test.Tap(u.speakBtn)
	if u.errorMsg.Visible() {
		t.Fatal("the old error stayed after a valid Speak")
	}
	h.waitFor("the failure", h.idle)
	if !u.errorMsg.Visible() || !strings.Contains(u.errorMsg.Text, "failing after 3 frames") || u.status.Text != "Speech failed." {
		t.Fatalf("engine failure: error %q status %q", u.errorMsg.Text, u.status.Text)
	}
	if e := h.historyN(1)[0]; e.Outcome != "failed" {
		t.Fatalf("history outcome %q, want failed", e.Outcome)
	}
	if len(u.lastPCM) != 3*uitest.FakeFrameSamples {
		t.Errorf("kept %d samples, want the 3 frames before the failure", len(u.lastPCM))
	}

	if got := userMessage(errors.Join(engine.ErrUnknownVoice)); !strings.Contains(got, "does not know this voice") {
		t.Errorf("unknown voice message %q", got)
	}
}

func TestModelLoadErrorShows(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, errors.New("config.json: no such file"))
	h.ready()
	u := h.ui
	if !u.errorMsg.Visible() || !strings.Contains(u.errorMsg.Text, "Could not load model fake model: config.json") {
		t.Fatalf("load error %q", u.errorMsg.Text)
	}
	if !u.speakBtn.Disabled() {
		t.Error("Speak enabled without a model")
	}
	u.Speak()
	if !strings.Contains(u.errorMsg.Text, "No model") {
		t.Errorf("speak without model: %q", u.errorMsg.Text)
	}
}

func TestStyleFieldOnlyWhenSupported(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2, Instruct: true}, nil)
	h.ready()
	u := h.ui
	if !u.instructR.Visible() {
		t.Fatal("style field hidden for a model with instruct support")
	}
	u.text.SetText("Hi.")
	u.instruct.SetText("  whisper softly ")
	test.Tap(u.speakBtn)
	h.waitFor("the utterance", h.idle)
	if reqs := h.fake.Requests(); len(reqs) != 1 || reqs[0].Instruct != "whisper softly" || reqs[0].Language != "auto" {
		t.Fatalf("requests %+v, want instruct %q and language auto", reqs, "whisper softly")
	}
}

// Slower than real time: the first utterance (RTF unknown) starts at once
// and underruns; the next one uses the measured RTF to hold audio back and
// plays without gaps.
func TestPrebufferFollowsMeasuredRTF(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 1.3}, nil)
	h.ready()
	u := h.ui
	text := "Fifteen frames!" // 15 runes -> 15 frames, 1.2 s of audio
	u.text.SetText(text)
	test.Tap(u.speakBtn)
	h.waitFor("the first utterance", h.idle)
	first := h.historyN(1)[0].Stats
	if first.Underruns == 0 || first.RTF < 1.1 {
		t.Fatalf("first utterance at RTF 1.3 without prebuffer: %+v, want underruns and RTF > 1.1", first)
	}
	test.Tap(u.speakBtn)
	if !strings.Contains(u.status.Text, "holding") {
		t.Errorf("status %q does not mention the prebuffer", u.status.Text)
	}
	h.waitFor("the second utterance", func() bool { return h.idle() && len(u.history.entries) == 2 })
	second := u.history.entries[0].Stats
	t.Logf("RTF 1.3: without prebuffer %d underruns (%v), first sound %v; with prebuffer %d underruns, first sound %v",
		first.Underruns, first.Silent, first.FirstSound, second.Underruns, second.FirstSound)
	if second.Underruns != 0 || second.FirstSound <= first.FirstSound {
		t.Fatalf("second utterance %+v: want 0 underruns and a later first sound than %v", second, first.FirstSound)
	}
}

// With no model installed the welcome (first-run) panel shows; a model
// added later hides it and loads.
func TestWelcomeUntilModelAdded(t *testing.T) {
	test.NewTempApp(t)
	q := make(chan func(), 64)
	welcome := widget.NewLabel("download a model")
	fake := &uitest.FakeEngine{RTF: 0.2}
	var opened []string
	u := New(Config{
		Open:    func(dir string, _ OpenOptions) (Engine, error) { opened = append(opened, dir); return fake, nil },
		Player:  stubPlayer{},
		Post:    func(f func()) { q <- f },
		Welcome: welcome,
	})
	test.NewTempWindow(t, u.Content())
	u.Start()
	defer u.Close()
	if !welcome.Visible() || !u.speakBtn.Disabled() || !strings.Contains(u.status.Text, "No model") {
		t.Fatalf("no models: welcome visible=%v speak disabled=%v status %q", welcome.Visible(), u.speakBtn.Disabled(), u.status.Text)
	}
	u.AddModel(Model{Name: "new", Dir: "/models/new"})
	select {
	case f := <-q:
		f()
	case <-time.After(5 * time.Second):
		t.Fatal("model never loaded")
	}
	if welcome.Visible() || u.speakBtn.Disabled() || u.model.Selected != "new" || len(opened) != 1 || opened[0] != "/models/new" {
		t.Fatalf("after AddModel: welcome visible=%v speak disabled=%v selected %q opened %q", welcome.Visible(), u.speakBtn.Disabled(), u.model.Selected, opened)
	}
	if u.audioWarn.Visible() {
		t.Error("audio warning shown for a player with a device")
	}
}

// stubPlayer has a device and discards audio; for tests that never speak.
type stubPlayer struct{}

func (stubPlayer) Play(ctx context.Context, ch <-chan engine.Chunk, _ audio.PlayOptions) (audio.Result, error) {
	for range ch {
	}
	return audio.Result{}, nil
}
func (stubPlayer) Stop()             {}
func (stubPlayer) Pause()            {}
func (stubPlayer) Resume()           {}
func (stubPlayer) Paused() bool      { return false }
func (stubPlayer) SetVolume(float64) {}
func (stubPlayer) SetSpeed(float64)  {}
func (stubPlayer) Live() audio.Live  { return audio.Live{} }
func (stubPlayer) NoDevice() bool    { return false }
