package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// The window's colours. Fyne's default theme (v2.7.1) draws some text below
// the WCAG AA contrast of 4.5:1: in the light variant the placeholder (3.2:1
// on a field), warnings (2.2:1), errors (3.7:1) and success text (1.5:1);
// in both, button labels on the primary colour and links (4.47:1, 4.0:1 in
// dark). So the colours text is drawn in, and the colours it is drawn on,
// are set here for both variants; theme_test.go computes every pair's
// ratio. Everything else comes from the default theme.

// palette maps a colour name to its light and dark values.
var palette = map[fyne.ThemeColorName][2]color.NRGBA{
	//                                    light                   dark
	theme.ColorNameBackground:          {rgb(0xffffff), rgb(0x1c1c21)},
	theme.ColorNameForeground:          {rgb(0x1a1a1e), rgb(0xf2f2f4)},
	theme.ColorNameInputBackground:     {rgb(0xf1f1f4), rgb(0x2a2a31)},
	theme.ColorNameButton:              {rgb(0xe4e4ea), rgb(0x36363f)},
	theme.ColorNamePlaceHolder:         {rgb(0x5c5c66), rgb(0xadadb8)},
	theme.ColorNamePrimary:             {rgb(0x1f56c4), rgb(0x3563d6)},
	theme.ColorNameForegroundOnPrimary: {rgb(0xffffff), rgb(0xffffff)},
	theme.ColorNameWarning:             {rgb(0x8a5300), rgb(0xffb74d)},
	theme.ColorNameError:               {rgb(0xb3261e), rgb(0xff8a80)},
	theme.ColorNameSuccess:             {rgb(0x2e7d32), rgb(0x7bd67f)},
	theme.ColorNameHyperlink:           {rgb(0x1f56c4), rgb(0x8ab4ff)},
	theme.ColorNameSelection:           {rgb(0xcfe0ff), rgb(0x2f4a80)},
}

// textPairs are the text colours and what they are drawn on, for the
// contrast check: labels and warnings on the window, typed text and the
// placeholder in fields, button labels on buttons.
var textPairs = [][2]fyne.ThemeColorName{
	{theme.ColorNameForeground, theme.ColorNameBackground},
	{theme.ColorNameForeground, theme.ColorNameInputBackground},
	{theme.ColorNameForeground, theme.ColorNameButton},
	{theme.ColorNamePlaceHolder, theme.ColorNameInputBackground},
	{theme.ColorNamePlaceHolder, theme.ColorNameBackground},
	{theme.ColorNameForegroundOnPrimary, theme.ColorNamePrimary},
	{theme.ColorNameWarning, theme.ColorNameBackground},
	{theme.ColorNameError, theme.ColorNameBackground},
	{theme.ColorNameSuccess, theme.ColorNameBackground},
	{theme.ColorNameHyperlink, theme.ColorNameBackground},
	{theme.ColorNameForeground, theme.ColorNameSelection}, // selected text, the spoken sentence
}

func rgb(v uint32) color.NRGBA {
	return color.NRGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// Theme choices as remembered in settings ("" follows the desktop).
var themeChoices = []struct{ value, label string }{
	{"", "System"}, {"light", "Light"}, {"dark", "Dark"},
}

// appTheme is the default theme with palette's colours; mode "light" or
// "dark" fixes the variant, "" takes the desktop's.
type appTheme struct{ mode string }

func (t appTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	switch t.mode {
	case "light":
		v = theme.VariantLight
	case "dark":
		v = theme.VariantDark
	}
	if c, ok := palette[n]; ok {
		if v == theme.VariantLight {
			return c[0]
		}
		return c[1]
	}
	return theme.DefaultTheme().Color(n, v)
}

func (appTheme) Font(s fyne.TextStyle) fyne.Resource     { return theme.DefaultTheme().Font(s) }
func (appTheme) Icon(n fyne.ThemeIconName) fyne.Resource { return theme.DefaultTheme().Icon(n) }
func (appTheme) Size(n fyne.ThemeSizeName) float32       { return theme.DefaultTheme().Size(n) }

// applyTheme sets the app's theme for a settings value.
func applyTheme(mode string) {
	if a := fyne.CurrentApp(); a != nil {
		a.Settings().SetTheme(appTheme{mode: mode})
	}
}

// themePicker is the theme choice in the window's top bar; a change
// applies at once and is remembered.
func (u *UI) themePicker() *widget.Select {
	labels := make([]string, len(themeChoices))
	for i, c := range themeChoices {
		labels[i] = c.label
	}
	u.themeSel = widget.NewSelect(labels, nil)
	for i, c := range themeChoices {
		if c.value == u.prefs.Theme {
			u.themeSel.SetSelectedIndex(i)
		}
	}
	u.themeSel.OnChanged = func(string) {
		i := u.themeSel.SelectedIndex()
		if i < 0 || themeChoices[i].value == u.prefs.Theme {
			return
		}
		u.prefs.Theme = themeChoices[i].value
		applyTheme(u.prefs.Theme)
		u.saveSettingsLater()
	}
	return u.themeSel
}
