// Package errtext bounds the text of errors that quote their input. A JSON
// decoder's error quotes the literal it rejected, which a bad file can make
// as long as the file; an error wrapped for a user or a log keeps Max bytes
// of it.
package errtext

import "unicode/utf8"

// Max is the most bytes of an error's text Brief keeps.
const Max = 240

// Brief is err's text cut to Max bytes (Cut).
func Brief(err error) string { return Cut(err.Error(), Max) }

// Cut is s cut to at most max bytes on a rune boundary, the cut marked with
// "…".
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
