package ui

import (
	"image/color"
	"math"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"

	"talkbox/ui/uitest"
)

// luminance is WCAG 2's relative luminance of an sRGB colour.
func luminance(c color.Color) float64 {
	r, g, b, _ := c.RGBA()
	lin := func(v uint32) float64 {
		s := float64(v) / 0xffff
		if s <= 0.04045 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// contrast is WCAG 2's contrast ratio, 1 to 21.
func contrast(a, b color.Color) float64 {
	la, lb := luminance(a), luminance(b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

func TestContrastFormula(t *testing.T) {
	if r := contrast(color.White, color.Black); math.Abs(r-21) > 1e-9 {
		t.Fatalf("white on black = %v, want 21", r)
	}
	// #767676 on white is the usual example of just passing 4.5:1.
	if r := contrast(rgb(0x767676), color.White); r < 4.5 || r > 4.6 {
		t.Fatalf("#767676 on white = %.3f, want about 4.54", r)
	}
}

// Every text colour of the theme meets WCAG AA (4.5:1) on what it is drawn
// on, in the light and the dark variant and in each fixed mode.
func TestThemeTextContrastAA(t *testing.T) {
	for _, mode := range []string{"", "light", "dark"} {
		th := appTheme{mode: mode}
		for _, v := range []fyne.ThemeVariant{theme.VariantLight, theme.VariantDark} {
			for _, p := range textPairs {
				fg, bg := th.Color(p[0], v), th.Color(p[1], v)
				r := contrast(fg, bg)
				t.Logf("mode %q variant %d: %s on %s = %.2f", mode, v, p[0], p[1], r)
				if r < 4.5 {
					t.Errorf("mode %q variant %d: %s on %s = %.2f:1, below 4.5:1", mode, v, p[0], p[1], r)
				}
			}
		}
	}
	// The fixed modes ignore the desktop's variant.
	if c := (appTheme{mode: "dark"}).Color(theme.ColorNameBackground, theme.VariantLight); c != palette[theme.ColorNameBackground][1] {
		t.Error("dark mode gave the light background")
	}
}

// The picker applies the theme and remembers it.
func TestThemePickerAppliesAndRemembers(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u := h.ui
	u.themeSel.SetSelectedIndex(2) // Dark
	if u.prefs.Theme != "dark" || u.currentSettings().Theme != "dark" {
		t.Fatalf("theme setting %q", u.prefs.Theme)
	}
	if c := fyne.CurrentApp().Settings().Theme().Color(theme.ColorNameBackground, theme.VariantLight); c != palette[theme.ColorNameBackground][1] {
		t.Fatalf("after choosing Dark the background is %v", c)
	}
}
