package ui

import (
	"errors"
	"fmt"
	"math"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
	"talkbox/app/settings"
)

// The player row under Speak/Pause/Stop: volume, speed and the output
// device. Volume and speed go to the player at once (it applies them
// within one device callback, also to the audio already buffered) and are
// remembered when the slider is let go; the device changes on a
// background goroutine, since opening one can take a while.

// outputChooser is a Player that lists and switches playback devices;
// *audio.Player is one. Without it the device picker is hidden.
type outputChooser interface {
	Outputs() ([]audio.Output, error)
	UseOutput(name string) error
	Output() string // the device in use by name; "" = the system default
}

var _ outputChooser = (*audio.Player)(nil)

// systemDefault is the picker's first entry: the device the system picks.
const systemDefault = "System default"

// keySlider is a slider that passes Esc to the window, like keySelect,
// and Space too (a slider has no use for it), so pausing works while one
// has the focus.
type keySlider struct {
	widget.Slider
	onStop, onSpace func()
}

func newKeySlider(lo, hi, step float64) *keySlider {
	s := &keySlider{}
	s.Min, s.Max, s.Step = lo, hi, step
	s.Orientation = widget.Horizontal
	s.ExtendBaseWidget(s)
	return s
}

func (s *keySlider) TypedKey(k *fyne.KeyEvent) {
	switch {
	case k.Name == fyne.KeyEscape && s.onStop != nil:
		s.onStop()
	case k.Name == fyne.KeySpace && s.onSpace != nil:
		s.onSpace()
	default:
		// An arrow key is a whole change: it is remembered like a drag's end.
		before := s.Value
		s.Slider.TypedKey(k)
		if s.Value != before && s.OnChangeEnded != nil {
			s.OnChangeEnded(s.Value)
		}
	}
}

func volumeText(percent int) string  { return fmt.Sprintf("%3d%%", percent) }
func speedText(speed float64) string { return fmt.Sprintf("%.2f×", speed) }

// buildPlayer makes the volume and speed sliders and the device picker,
// set from the remembered settings, and applies those to the player.
func (u *UI) buildPlayer() fyne.CanvasObject {
	u.volume = newKeySlider(0, settings.MaxVolume, 5)
	u.volume.SetValue(float64(u.prefs.Volume))
	u.volumeVal = widget.NewLabel(volumeText(u.prefs.Volume))
	u.volumeVal.TextStyle = fyne.TextStyle{Monospace: true}
	u.volume.OnChanged = func(v float64) { u.setVolume(int(math.Round(v))) }
	u.volume.OnChangeEnded = func(float64) { u.saveSettingsLater() }

	u.speed = newKeySlider(settings.MinSpeed, settings.MaxSpeed, 0.05)
	u.speed.SetValue(u.prefs.Speed)
	u.speedVal = widget.NewLabel(speedText(u.prefs.Speed))
	u.speedVal.TextStyle = fyne.TextStyle{Monospace: true}
	u.speed.OnChanged = u.setSpeed
	u.speed.OnChangeEnded = func(float64) { u.saveSettingsLater() }
	if !audio.SpeedSupported() {
		// A build without libsonic (-tags nosonic) plays at speed 1 only.
		u.prefs.Speed = 1
		u.speed.SetValue(1)
		u.speed.Disable()
		u.speedVal.SetText(speedText(1) + " (no time-stretch in this build)")
	}
	if p := u.cfg.Player; p != nil {
		p.SetVolume(float64(u.prefs.Volume) / 100)
		p.SetSpeed(u.prefs.Speed)
	}

	u.output = newKeySelect(nil, func(string) { u.outputPicked() })
	u.output.PlaceHolder = systemDefault
	u.output.Disable() // until the devices are listed (Start)
	u.outputNote = widget.NewLabel("")
	u.outputNote.Importance = widget.WarningImportance
	u.outputNote.Wrapping = fyne.TextWrapWord
	u.outputNote.Hide()
	u.outputRefresh = widget.NewButtonWithIcon("", theme.ViewRefreshIcon(), u.listOutputs)
	outputRow := container.NewBorder(nil, nil, widget.NewLabel("Output"), u.outputRefresh, u.output)
	if _, ok := u.cfg.Player.(outputChooser); !ok {
		outputRow.Hide()
	}
	sliders := container.NewGridWithColumns(2,
		container.NewBorder(nil, nil, widget.NewLabel("Volume"), u.volumeVal, u.volume),
		container.NewBorder(nil, nil, widget.NewLabel("Speed"), u.speedVal, u.speed))
	return container.NewVBox(sliders, outputRow, u.outputNote)
}

// setVolume applies a volume in percent from the slider.
func (u *UI) setVolume(percent int) {
	percent = min(max(percent, 0), settings.MaxVolume)
	u.prefs.Volume = percent
	u.volumeVal.SetText(volumeText(percent))
	if u.cfg.Player != nil {
		u.cfg.Player.SetVolume(float64(percent) / 100)
	}
}

// setSpeed applies a speed from the slider, rounded to its step so the
// remembered value is the one shown.
func (u *UI) setSpeed(v float64) {
	v = min(max(math.Round(v*20)/20, settings.MinSpeed), settings.MaxSpeed)
	u.prefs.Speed = v
	u.speedVal.SetText(speedText(v))
	if u.cfg.Player != nil {
		u.cfg.Player.SetSpeed(v)
	}
}

// listOutputs lists the playback devices in the background (at start and
// on the refresh button) and moves playback to the remembered one when it
// is listed and not in use yet. A remembered device that is gone (or fails
// to open) leaves playback on the system default with a note in the
// window; the choice stays remembered, so a refresh once it is plugged in
// again takes it back.
func (u *UI) listOutputs() {
	oc, ok := u.cfg.Player.(outputChooser)
	if !ok {
		return
	}
	want := u.prefs.OutputDevice
	go func() {
		list, err := oc.Outputs()
		var useErr error
		if err == nil && want != "" && oc.Output() != want {
			useErr = oc.UseOutput(want)
		}
		now := oc.Output()
		u.post(func() {
			u.showOutputs(list)
			u.selectOutput(now)
			switch {
			case err != nil:
				u.showOutputNote("Could not list the output devices (" + err.Error() + "); playing on the system default.")
			case useErr != nil:
				u.showOutputNote(outputGoneNote(want, useErr))
			default:
				u.outputNote.Hide()
			}
		})
	}()
}

// outputGoneNote says that the remembered device is not used, and why.
func outputGoneNote(name string, err error) string {
	if errors.Is(err, audio.ErrNoOutput) {
		return fmt.Sprintf("The output device %q is not connected; playing on the system default.", name)
	}
	return fmt.Sprintf("The output device %q could not be opened (%v); playing on the system default.", name, err)
}

// showOutputs fills the picker: the system default first, then the devices.
func (u *UI) showOutputs(list []audio.Output) {
	opts := []string{systemDefault}
	for _, o := range list {
		opts = append(opts, o.Name)
	}
	u.outputGuard = true
	u.output.SetOptions(opts)
	u.output.SetSelectedIndex(0)
	u.outputGuard = false
	u.output.Enable()
}

// selectOutput shows name as the picked device without switching to it.
func (u *UI) selectOutput(name string) {
	u.outputGuard = true
	defer func() { u.outputGuard = false }()
	if name == "" {
		u.output.SetSelectedIndex(0)
		return
	}
	u.output.SetSelected(name)
}

func (u *UI) showOutputNote(msg string) {
	u.outputNote.SetText(msg)
	u.outputNote.Show()
}

// outputPicked moves playback to the device just picked.
func (u *UI) outputPicked() {
	if u.outputGuard {
		return
	}
	oc, ok := u.cfg.Player.(outputChooser)
	if !ok {
		return
	}
	name := u.output.Selected
	if name == systemDefault {
		name = ""
	}
	u.outputSeq++
	seq := u.outputSeq
	u.outputNote.Hide()
	go func() {
		err := oc.UseOutput(name)
		u.post(func() {
			if seq != u.outputSeq {
				return // another device was picked meanwhile
			}
			if err != nil {
				u.showOutputNote(outputGoneNote(name, err))
				u.selectOutput(oc.Output()) // unchanged, or back on the default
				if errors.Is(err, audio.ErrNoOutput) {
					return
				}
				name = ""
			}
			u.prefs.OutputDevice = name
			u.saveSettingsLater()
			if name == "" {
				name = "the system default"
			}
			u.setStatus("Playing on " + name + ".")
		})
	}()
}
