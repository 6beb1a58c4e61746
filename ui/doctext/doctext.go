// Package doctext turns a text or Markdown file into the prose the window
// speaks: Markdown's markup (headings' #, emphasis, list bullets, link
// targets, code fences, tables' bars) is removed, so no symbol is read out,
// and the words stay in order. It has no Fyne in it.
package doctext

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// IsMarkdown reports whether a file name is read as Markdown.
func IsMarkdown(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".md", ".markdown", ".mdown", ".mkd":
		return true
	}
	return false
}

// Load is the text to speak from a file's bytes: Markdown (by its name)
// becomes plain prose, anything else is read as plain text. A byte-order
// mark and CR line ends are dropped; bytes that are not UTF-8 are refused,
// since the text box would show them as replacement marks.
func Load(name string, data []byte) (string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) {
		return "", fmt.Errorf("%s is not UTF-8 text", filepath.Base(name))
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if IsMarkdown(name) {
		return Markdown(s), nil
	}
	return s, nil
}

var (
	reImage     = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	reLink      = regexp.MustCompile(`\[([^\]]+)\]\([^)]*\)`)
	reRefLink   = regexp.MustCompile(`\[([^\]]+)\]\[[^\]]*\]`)
	reRefDef    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*\S+.*$`)
	reAutoLink  = regexp.MustCompile(`<(https?://|mailto:)[^>]*>`)
	reHTML      = regexp.MustCompile(`</?[A-Za-z][^>]*>`)
	reCode      = regexp.MustCompile("`+([^`]*)`+")
	reStrong    = regexp.MustCompile(`(\*\*|__)(\S(?:.*?\S)?)(\*\*|__)`)
	reEmph      = regexp.MustCompile(`(^|[^\w*])[*_](\S(?:[^*_]*?\S)?)[*_]($|[^\w*])`)
	reStrike    = regexp.MustCompile(`~~(.+?)~~`)
	reHeading   = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	reBullet    = regexp.MustCompile(`^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?`)
	reQuote     = regexp.MustCompile(`^\s{0,3}(?:>\s?)+`)
	reRule      = regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`)
	reTableRule = regexp.MustCompile(`^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$`)
	reSetext    = regexp.MustCompile(`^\s{0,3}(=+|-+)\s*$`)
	reEscape    = regexp.MustCompile(`\\([\\` + "`" + `*_{}\[\]()#+\-.!|>~])`)
)

// Markdown converts Markdown source to plain prose: paragraphs joined into
// lines, headings and list items ended as sentences (a full stop added
// where they have no ending punctuation, so speech pauses after them),
// code blocks, front matter, rules and link targets dropped.
func Markdown(src string) string {
	lines := strings.Split(src, "\n")
	// Front matter (YAML between --- lines at the very top) is metadata.
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for i := 1; i < len(lines); i++ {
			if t := strings.TrimSpace(lines[i]); t == "---" || t == "..." {
				lines = lines[i+1:]
				break
			}
		}
	}
	var out []string // paragraphs
	var para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, strings.Join(para, " "))
			para = nil
		}
	}
	block := func(s string) { // a line that is a sentence of its own
		flush()
		if s = sentence(inline(s)); s != "" {
			out = append(out, s)
		}
	}
	fence := ""
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		switch {
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			flush()
			fence = t[:3]
			continue
		case t == "":
			flush()
			continue
		case strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t"):
			if len(para) == 0 { // indented code (not a paragraph's continuation)
				continue
			}
		case reRule.MatchString(line) && (len(para) == 0 || !reSetext.MatchString(line)):
			flush()
			continue
		case reSetext.MatchString(line) && len(para) > 0:
			// The paragraph so far was a heading.
			h := strings.Join(para, " ")
			para = nil
			block(h)
			continue
		case reRefDef.MatchString(line), reTableRule.MatchString(line) && strings.Contains(line, "-"):
			continue
		}
		if m := reHeading.FindStringSubmatch(line); m != nil {
			block(m[1])
			continue
		}
		line = reQuote.ReplaceAllString(line, "")
		if reBullet.MatchString(line) {
			block(reBullet.ReplaceAllString(line, ""))
			continue
		}
		if strings.Count(line, "|") >= 2 { // a table row: cells as a list
			var cells []string
			for _, c := range strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|") {
				if c = strings.TrimSpace(inline(c)); c != "" {
					cells = append(cells, c)
				}
			}
			block(strings.Join(cells, ", "))
			continue
		}
		if s := strings.TrimSpace(inline(line)); s != "" {
			para = append(para, s)
		}
	}
	flush()
	return strings.Join(out, "\n\n")
}

// privateBase starts the Unicode private-use runes that stand for escaped
// ASCII characters inside inline.
const privateBase = 0xE000

// inline removes Markdown's inline markup from one line.
func inline(s string) string {
	// Escaped characters are set aside first (as private-use runes) so the
	// markup rules below do not see them, and put back as plain characters.
	s = reEscape.ReplaceAllStringFunc(s, func(m string) string { return string(rune(privateBase + rune(m[1]))) })
	s = reCode.ReplaceAllString(s, "$1")
	s = reImage.ReplaceAllString(s, "$1")
	s = reLink.ReplaceAllString(s, "$1")
	s = reRefLink.ReplaceAllString(s, "$1")
	s = reAutoLink.ReplaceAllString(s, "")
	s = reHTML.ReplaceAllString(s, "")
	s = reStrike.ReplaceAllString(s, "$1")
	for i := 0; i < 3; i++ { // nested emphasis
		s = reStrong.ReplaceAllString(s, "$2")
		s = reEmph.ReplaceAllString(s, "$1$2$3")
	}
	s = strings.Map(func(r rune) rune {
		if r >= privateBase && r < privateBase+0x80 {
			return r - privateBase
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// sentence ends a heading or list item with a full stop unless it already
// ends in punctuation.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsPunct(r) && r != ')' && r != '"' && r != '\'' {
		return s
	}
	return s + "."
}
