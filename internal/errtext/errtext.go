// Package errtext bounds the text of errors that quote their input. A JSON
// decoder's error quotes the literal it rejected, which a bad file can make
// as long as the file; an error wrapped for a user or a log keeps Max bytes
// of it.
package errtext

import "unicode/utf8"

// Max is the most bytes of an error's text Brief keeps.
const Max = 240

// Brief is err's text cut to Max bytes on a rune boundary, the cut marked
// with "…".
func Brief(err error) string {
	s := err.Error()
	if len(s) <= Max {
		return s
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
