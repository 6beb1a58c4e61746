package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTextRunes bounds one request. Longer text should be cut with
// SplitSentences (the window does) so audio starts early and memory stays
// bounded; its pieces are always within this limit.
const MaxTextRunes = 4000

// maxSentenceRunes bounds one piece of SplitSentences: a run-on "sentence"
// longer than this is cut at the last space or comma before it, so the first
// audio of a long paragraph never waits for the whole paragraph. It must not
// exceed MaxTextRunes (the test checks).
const maxSentenceRunes = 400

// SplitSentences cuts text into sentences for streaming one after another,
// each a valid Request.Text length (at most MaxTextRunes runes).
// It splits after . ! ? … and the CJK 。！？ (with any closing quotes or
// brackets that follow), and at blank lines. Latin . ! ? end a sentence only
// when followed by space or the end of text, so "3.14" and "e.g.x" stay
// whole. Empty pieces are dropped; the text of the pieces joined with single
// spaces is the input modulo whitespace. The pieces are
// text[s.Start:s.End] for the spans of SentenceSpans.
func SplitSentences(text string) []string {
	spans := SentenceSpans(text)
	if len(spans) == 0 {
		return nil
	}
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = text[s.Start:s.End]
	}
	return out
}

// Span is a sentence's place in its text: the bytes text[Start:End], with
// no leading or trailing white space.
type Span struct{ Start, End int }

// SentenceSpans is where SplitSentences cuts text, as byte offsets, so a
// reader can show which part of the text is being spoken.
func SentenceSpans(text string) []Span {
	var out []Span
	emit := func(start, end int) {
		start, end = trimSpan(text, start, end)
		for start < end && utf8.RuneCountInString(text[start:end]) > maxSentenceRunes {
			cut := start + softCut(text[start:end], maxSentenceRunes)
			if s, e := trimSpan(text, start, cut); s < e {
				out = append(out, Span{s, e})
			}
			start, end = trimSpan(text, cut, end)
		}
		if start < end {
			out = append(out, Span{start, end})
		}
	}
	start := 0
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		end := i + size
		switch {
		case r == '\n' && strings.HasPrefix(strings.TrimLeft(text[end:], " \t\r"), "\n"):
			emit(start, end)
			start = end
		case isCJKStop(r) || isLatinStop(r):
			// Take closing quotes/brackets and repeated stops ("?!", "……").
			for end < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[end:])
				if !isCloser(r2) && !isCJKStop(r2) && !isLatinStop(r2) {
					break
				}
				end += s2
			}
			if isCJKStop(r) || end == len(text) || startsWithSpace(text[end:]) {
				emit(start, end)
				start = end
			}
		}
		i = end
	}
	emit(start, len(text))
	return out
}

// trimSpan narrows text[start:end] to leave out white space at both ends,
// as strings.TrimSpace does.
func trimSpan(text string, start, end int) (int, int) {
	s := text[start:end]
	lead := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	trail := len(s) - len(strings.TrimRightFunc(s, unicode.IsSpace))
	if lead == len(s) {
		return start, start
	}
	return start + lead, end - trail
}

func isCJKStop(r rune) bool   { return r == '。' || r == '！' || r == '？' || r == '；' }
func isLatinStop(r rune) bool { return r == '.' || r == '!' || r == '?' || r == '…' }
func isCloser(r rune) bool {
	return r == '"' || r == '\'' || r == ')' || r == ']' || r == '”' || r == '’' || r == '」' || r == '』' || r == '）'
}

func startsWithSpace(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// softCut returns a byte offset at most limit runes into s, preferring the
// last space or comma so words are not split.
func softCut(s string, limit int) int {
	byteLimit, n := len(s), 0
	for i := range s {
		if n == limit {
			byteLimit = i
			break
		}
		n++
	}
	best := -1
	for i, r := range s[:byteLimit] {
		if unicode.IsSpace(r) || r == ',' || r == '，' || r == '、' {
			best = i + utf8.RuneLen(r)
		}
	}
	if best <= 0 {
		return byteLimit
	}
	return best
}
