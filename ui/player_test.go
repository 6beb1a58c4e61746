package ui

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
	"talkbox/app/settings"
	"talkbox/ui/uitest"
)

// savedSettings collects what the window saves (from background goroutines).
type savedSettings struct {
	mu   sync.Mutex
	list []settings.Settings
}

func (s *savedSettings) save(v settings.Settings) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, v)
	return nil
}

func (s *savedSettings) last(t *testing.T) settings.Settings {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 0 {
		t.Fatal("no settings saved")
	}
	return s.list[len(s.list)-1]
}

// openLog records the options of every model load.
type openLog struct {
	mu     sync.Mutex
	opened []OpenOptions
}

// record makes c's Open log its options.
func (l *openLog) record(c *Config) {
	open := c.Open
	c.Open = func(dir string, o OpenOptions) (Engine, error) {
		l.mu.Lock()
		l.opened = append(l.opened, o)
		l.mu.Unlock()
		return open(dir, o)
	}
}

// list is a copy of the loads so far.
func (l *openLog) list() []OpenOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]OpenOptions(nil), l.opened...)
}

// The remembered volume, speed, Details fold and CPU precision are applied
// at start (to the player, the sliders, the panel and the model load);
// changes apply to the player at once and are saved.
func TestPlayerSettingsRestoredAndSaved(t *testing.T) {
	var saved savedSettings
	var loads openLog
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.3}, nil, func(c *Config) {
		s := settings.Defaults()
		s.Volume, s.Speed, s.Details, s.Precision = 40, 1.5, true, "f32"
		c.Settings, c.SaveSettings = s, saved.save
		loads.record(c)
	})
	h.ready()
	u, p := h.ui, h.player
	if p.Volume() != 0.4 || p.Speed() != 1.5 {
		t.Fatalf("player at volume %v speed %v, want the remembered 0.4 and 1.5", p.Volume(), p.Speed())
	}
	if u.volume.Value != 40 || math.Abs(u.speed.Value-1.5) > 1e-9 || strings.TrimSpace(u.volumeVal.Text) != "40%" || u.speedVal.Text != "1.50×" {
		t.Fatalf("sliders %v %v, labels %q %q", u.volume.Value, u.speed.Value, u.volumeVal.Text, u.speedVal.Text)
	}
	if !u.details.Visible() || u.panel.summary.Visible() {
		t.Fatal("Details remembered open, but the latency panel is folded")
	}
	if opened := loads.list(); len(opened) != 1 || opened[0].Precision != "f32" {
		t.Fatalf("model opened with %+v, want the remembered precision f32", opened)
	}

	u.volume.SetValue(135)
	u.speed.SetValue(0.75)
	if p.Volume() != 1.35 || p.Speed() != 0.75 {
		t.Fatalf("after the sliders moved: volume %v speed %v", p.Volume(), p.Speed())
	}
	u.volume.SetValue(300) // the slider's own bound holds it
	if p.Volume() != 1.5 {
		t.Fatalf("volume past the slider: %v", p.Volume())
	}
	test.Tap(u.detailsBtn)
	if u.details.Visible() || !u.panel.summary.Visible() {
		t.Fatal("Details did not fold")
	}
	u.Close()
	got := saved.last(t)
	if got.Volume != 150 || got.Speed != 0.75 || got.Details || got.Precision != "f32" {
		t.Fatalf("saved volume %d speed %v details %v precision %q", got.Volume, got.Speed, got.Details, got.Precision)
	}
}

// The latency panel starts folded; the toggle unfolds it and the choice is
// saved at once; while folded, a one-line summary of the last utterance
// shows beside the toggle. A speed set with an arrow key is saved too.
func TestDetailsToggle(t *testing.T) {
	var saved savedSettings
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.2}, nil, func(c *Config) {
		c.Settings, c.SaveSettings = settings.Defaults(), saved.save
	})
	h.ready()
	u := h.ui
	if u.details.Visible() {
		t.Fatal("the latency panel is unfolded on a first start")
	}
	u.text.SetText("Short.")
	test.Tap(u.speakBtn)
	h.waitFor("the utterance", func() bool { return h.idle() && strings.HasPrefix(u.status.Text, "Done") })
	if s := u.panel.summary.Text; !strings.HasPrefix(s, "first sound ") || !strings.Contains(s, "RTF") {
		t.Fatalf("folded summary %q", s)
	}
	test.Tap(u.detailsBtn)
	if !u.details.Visible() {
		t.Fatal("Details did not unfold")
	}
	// An arrow key on a slider is saved at once too.
	u.speed.TypedKey(&fyne.KeyEvent{Name: fyne.KeyRight})
	h.waitFor("the speed change to be saved", func() bool {
		saved.mu.Lock()
		defer saved.mu.Unlock()
		return len(saved.list) > 0 && saved.list[len(saved.list)-1].Speed == 1.05
	})
	if !saved.last(t).Details {
		t.Fatal("the Details choice was not saved")
	}
}

// devicePlayer is the null player with a stand-in list of devices: listed
// ones open unless broken, as audio.Player.UseOutput does with real ones.
type devicePlayer struct {
	*audio.Player
	mu     sync.Mutex
	list   []audio.Output
	broken map[string]bool
	cur    string
	used   []string
}

func (d *devicePlayer) Outputs() ([]audio.Output, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]audio.Output(nil), d.list...), nil
}

func (d *devicePlayer) plugIn(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, audio.Output{Name: name})
}

func (d *devicePlayer) UseOutput(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.used = append(d.used, name)
	if _, err := audio.FindOutput(d.list, name); err != nil { // d.mu is held
		return err
	}
	if d.broken[name] {
		d.cur = ""
		return errors.New("device busy")
	}
	d.cur = name
	return nil
}

func (d *devicePlayer) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

// A remembered device that has been unplugged: playback stays on the
// system default, the window says so, and the choice stays remembered for
// when it is back: the refresh button, once it is plugged in, takes it
// back. Picking a device moves playback there and remembers it; one that
// fails to open puts the picker back on the default.
func TestOutputDeviceFallbackAndChoice(t *testing.T) {
	var saved savedSettings
	var dp *devicePlayer
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.2}, nil, func(c *Config) {
		dp = &devicePlayer{Player: c.Player.(*audio.Player),
			list:   []audio.Output{{Name: "Speakers", Default: true}, {Name: "HDMI"}},
			broken: map[string]bool{"HDMI": true}}
		c.Player = dp
		s := settings.Defaults()
		s.OutputDevice = "USB headset"
		c.Settings, c.SaveSettings = s, saved.save
	})
	u := h.ui
	h.waitFor("the device list", func() bool { return !u.output.Disabled() })
	if !u.outputNote.Visible() || !strings.Contains(u.outputNote.Text, `"USB headset" is not connected`) {
		t.Fatalf("no note about the missing device: %q (visible %v)", u.outputNote.Text, u.outputNote.Visible())
	}
	if u.output.Selected != systemDefault || strings.Join(u.output.Options, "|") != systemDefault+"|Speakers|HDMI" {
		t.Fatalf("picker on %q with %q", u.output.Selected, u.output.Options)
	}
	if dp.Output() != "" {
		t.Fatalf("playing on %q, want the system default", dp.Output())
	}
	if got := u.currentSettings().OutputDevice; got != "USB headset" {
		t.Fatalf("the missing device was forgotten: %q", got)
	}

	dp.plugIn("USB headset")
	test.Tap(u.outputRefresh)
	h.waitFor("the refreshed list", func() bool { return len(u.output.Options) == 4 })
	if dp.Output() != "USB headset" || u.output.Selected != "USB headset" || u.outputNote.Visible() {
		t.Fatalf("after plugging the headset in and refreshing: playing on %q, picker %q, note %v",
			dp.Output(), u.output.Selected, u.outputNote.Visible())
	}

	u.output.SetSelected("Speakers")
	h.waitFor("the switch", func() bool { return u.status.Text == "Playing on Speakers." })
	if dp.Output() != "Speakers" || u.outputNote.Visible() || u.currentSettings().OutputDevice != "Speakers" {
		t.Fatalf("after picking Speakers: playing on %q, note %v, remembered %q", dp.Output(), u.outputNote.Visible(), u.prefs.OutputDevice)
	}

	u.output.SetSelected("HDMI")
	h.waitFor("the failed switch", func() bool { return u.outputNote.Visible() })
	if !strings.Contains(u.outputNote.Text, `"HDMI" could not be opened`) || u.output.Selected != systemDefault || u.prefs.OutputDevice != "" {
		t.Fatalf("after HDMI failed: note %q, picker %q, remembered %q", u.outputNote.Text, u.output.Selected, u.prefs.OutputDevice)
	}
	u.Close()
	if got := saved.last(t).OutputDevice; got != "" {
		t.Fatalf("saved device %q after the fall back to the default", got)
	}
}

// Volume and speed changed while an utterance plays: it plays to the end
// (no error, nothing dropped from what was synthesised) and the history
// keeps the audio as synthesised, not as played.
func TestVolumeAndSpeedDuringPlayback(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.1}, nil)
	h.ready()
	u := h.ui
	u.text.SetText("One sentence of some length. And another one after it.")
	test.Tap(u.speakBtn)
	h.waitFor("sound to start", func() bool { return u.panel.firstSound.Text != "–" })
	u.speed.SetValue(2)
	u.volume.SetValue(50)
	u.speed.SetValue(0.5)
	u.speed.SetValue(1.25)
	h.waitFor("the end", h.idle)
	if !strings.HasPrefix(u.status.Text, "Done") {
		t.Fatalf("status %q, error %q", u.status.Text, u.errorMsg.Text)
	}
	e := h.historyN(1)[0]
	frames := h.fake.FramesFor("One sentence of some length.") + h.fake.FramesFor("And another one after it.")
	if want := int64(frames * uitest.FakeFrameSamples); e.Samples != want {
		t.Fatalf("history keeps %d samples, want the %d synthesised", e.Samples, want)
	}
}

// The Settings dialog says there is no global shortcut, and a precision
// picked there is remembered and used by the next model load.
func TestSettingsDialogPrecision(t *testing.T) {
	var loads openLog
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.2}, nil, loads.record)
	h.ready()
	u := h.ui
	content := u.settingsContent()
	if !containsText(content, "No global shortcut is available on this platform") {
		t.Fatal("the Settings dialog does not say that there is no global shortcut")
	}
	if !u.setPrecision("f32") || u.setPrecision("f32") {
		t.Fatal("setPrecision did not report the change once")
	}
	if got := u.currentSettings().Precision; got != "f32" {
		t.Fatalf("remembered precision %q", got)
	}
	u.reloadModel()
	h.ready()
	h.waitFor("the reload", func() bool { return len(loads.list()) == 2 })
	if opened := loads.list(); opened[0].Precision != "" || opened[1].Precision != "f32" {
		t.Fatalf("loads with %+v, want the default then f32", opened)
	}
}

// containsText reports whether a label under o holds text.
func containsText(o fyne.CanvasObject, text string) bool {
	switch v := o.(type) {
	case *widget.Label:
		return strings.Contains(v.Text, text)
	case *fyne.Container:
		for _, c := range v.Objects {
			if containsText(c, text) {
				return true
			}
		}
	}
	return false
}

// At a higher speed the audio is played faster than it was measured to be
// made, so the prebuffer policy holds some back where at speed 1 it would
// start at once.
func TestSpeedCountsInPrebuffer(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u := h.ui
	u.text.SetText("A sentence long enough to need a prebuffer when played fast.")
	for _, c := range []struct {
		speed float64
		hold  bool
	}{{1, false}, {2, true}} {
		u.lastRTF = 0.6
		u.speed.SetValue(c.speed)
		test.Tap(u.speakBtn)
		if got := strings.Contains(u.status.Text, "holding"); got != c.hold {
			t.Errorf("speed %v after an RTF of 0.6: status %q, want holding %v", c.speed, u.status.Text, c.hold)
		}
		test.Tap(u.stopBtn)
		h.waitFor("the stop", h.idle)
	}
}

// Once the app is stopping, nothing more reaches the widgets: Fyne would
// run it on the poster's goroutine after its loop has ended.
func TestQuittingDropsPosts(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	ran := false
	h.ui.post(func() { ran = true })
	h.ui.Quitting()
	h.ui.post(func() { ran = true })
	for len(h.q) > 0 {
		(<-h.q)()
	}
	if ran {
		t.Fatal("work posted before and after Quitting ran")
	}
}
