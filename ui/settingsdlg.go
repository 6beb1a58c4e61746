package ui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"
)

// The Settings dialog: what is set once rather than per utterance.

// precisionChoices are the CPU engine's weights as the settings keep them
// ("" is the engine's default, int8) and as the dialog shows them.
var precisionChoices = []struct{ value, label string }{
	{"", "int8 (default): about twice as fast"},
	{"f32", "f32: the exact reference, slower"},
}

// globalShortcutNote is what the window can say about a system-wide key to
// read the clipboard: Fyne (v2.7) registers keys only inside its windows,
// on every platform it runs on.
const globalShortcutNote = "No global shortcut is available on this platform: keys work only while the Talkbox window " +
	"has the focus. Read clipboard (the button by Open…) speaks the clipboard from the window."

// settingsDialog shows the Settings dialog.
func (u *UI) settingsDialog() {
	if u.win == nil {
		return
	}
	d := dialog.NewCustom("Settings", "Close", u.settingsContent(), u.win)
	d.Resize(fyne.NewSize(560, 0))
	d.Show()
}

// settingsContent is the dialog's body; the choices apply when made.
func (u *UI) settingsContent() fyne.CanvasObject {
	labels := make([]string, len(precisionChoices))
	for i, c := range precisionChoices {
		labels[i] = c.label
	}
	precision := widget.NewRadioGroup(labels, nil)
	precision.Required = true
	for _, c := range precisionChoices {
		if c.value == u.prefs.Precision || (c.value == "" && u.prefs.Precision == "int8") {
			precision.SetSelected(c.label)
		}
	}
	reload := widget.NewButton("Reload the model now", u.reloadModel)
	reload.Hide()
	precision.OnChanged = func(label string) {
		for _, c := range precisionChoices {
			if c.label == label && u.setPrecision(c.value) && u.eng != nil {
				reload.Show()
			}
		}
	}
	applies := widget.NewLabel("Used by the CPU engine only (not the GPU), from the next model load on.")
	applies.Wrapping = fyne.TextWrapWord
	shortcut := widget.NewLabel(globalShortcutNote)
	shortcut.Wrapping = fyne.TextWrapWord
	bold := fyne.TextStyle{Bold: true}
	return container.NewVBox(
		widget.NewLabelWithStyle("CPU precision", fyne.TextAlignLeading, bold),
		precision, applies, container.NewHBox(reload),
		widget.NewSeparator(),
		widget.NewLabelWithStyle("Global shortcut", fyne.TextAlignLeading, bold),
		shortcut,
	)
}

// setPrecision remembers the CPU precision for the next model load; it
// reports whether the choice changed.
func (u *UI) setPrecision(v string) bool {
	if v == u.prefs.Precision || (v == "" && u.prefs.Precision == "int8") {
		return false
	}
	u.prefs.Precision = v
	u.saveSettingsLater()
	u.setStatus("CPU precision " + precisionName(v) + ": used from the next model load on.")
	return true
}

func precisionName(v string) string {
	if v == "" {
		return "int8"
	}
	return v
}

// reloadModel loads the current model again (with the settings as they
// are now).
func (u *UI) reloadModel() {
	i := u.modelIdx
	if i < 0 {
		return
	}
	u.modelIdx = -1
	u.selectModel(i)
}
