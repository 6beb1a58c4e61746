package ui

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Chinese, Japanese and Korean text. Fyne draws text in its bundled Noto
// Sans, which has no CJK glyphs, and falls back to the system's fonts for
// the characters it lacks; so CJK text shows when a CJK font such as Noto
// Sans CJK is installed, and as empty boxes when none is. The window says
// so once, with the Debian package to install, the first time CJK text
// appears in the text box.

// cjkPackage is Debian's (and Ubuntu's) package of Noto Sans/Serif CJK.
const cjkPackage = "fonts-noto-cjk"

// cjkNote is what the window says when CJK text meets a system without a
// CJK font.
const cjkNote = "Chinese, Japanese and Korean characters need a CJK font and none is installed: " +
	"sudo apt install " + cjkPackage + ", then restart Talkbox."

// cjkFontNames are parts of the file names (lower case, without spaces,
// dashes or underscores) of fonts with CJK glyphs that Debian ships:
// fonts-noto-cjk, fonts-wqy-*, fonts-arphic-*, fonts-ipafont-*,
// fonts-nanum, fonts-droid-fallback, and Adobe's Source Han.
var cjkFontNames = []string{"notosanscjk", "notoserifcjk", "wqy", "uming", "ukai", "ipag", "ipam", "nanum", "droidsansfallback", "sourcehan"}

// cjkFontDirs lists the folders searched for fonts; tests replace it.
var cjkFontDirs = func() []string {
	dirs := []string{"/usr/share/fonts", "/usr/local/share/fonts"}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		dirs = append(dirs, filepath.Join(d, "fonts"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, ".local", "share", "fonts"), filepath.Join(h, ".fonts"))
	}
	return dirs
}

// hasCJK reports whether s has a Han, kana or Hangul character.
func hasCJK(s string) bool {
	for _, r := range s {
		if r >= 0x1100 && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
			return true
		}
	}
	return false
}

// findCJKFont returns the first CJK font file under dirs, "" if none.
func findCJKFont(dirs []string) string {
	found := ""
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil // unreadable folders are skipped, not fatal
			}
			name := strings.NewReplacer(" ", "", "-", "", "_", "").Replace(strings.ToLower(d.Name()))
			for _, n := range cjkFontNames {
				if strings.Contains(name, n) {
					found = path
					return fs.SkipAll
				}
			}
			return nil
		})
		if found != "" {
			return found
		}
	}
	return ""
}

// watchCJK checks the fonts the first time CJK text is in the text box and
// says once what to install when there is no CJK font.
func (u *UI) watchCJK() {
	u.text.OnChanged = u.checkCJK
}

// checkCJK looks for a CJK font the first time s (text for the window) has
// CJK in it.
func (u *UI) checkCJK(s string) {
	if u.cjkChecked || !hasCJK(s) {
		return
	}
	u.cjkChecked = true
	dirs := cjkFontDirs()
	go func() {
		if findCJKFont(dirs) == "" {
			u.post(func() { u.setStatus(cjkNote) })
		}
	}()
}
