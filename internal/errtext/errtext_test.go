package errtext

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBrief(t *testing.T) {
	short := errors.New("bad number")
	if got := Brief(short); got != "bad number" {
		t.Errorf("short error: %q", got)
	}
	long := errors.New("json: cannot unmarshal number " + strings.Repeat("3", 5000) + " into Go value of type int")
	got := Brief(long)
	if len(got) > Max+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "json: cannot unmarshal number 333") {
		t.Errorf("long error cut to %d bytes: %.60q…", len(got), got)
	}
	// A cut inside a multi-byte rune backs up to its start.
	wide := errors.New(strings.Repeat("é", 500))
	if got := Brief(wide); !utf8.ValidString(got) || len(got) > Max+len("…") {
		t.Errorf("cut through a rune: valid %v, %d bytes", utf8.ValidString(got), len(got))
	}
	if got := Cut("abcdef", 4); got != "abcd…" {
		t.Errorf("Cut to 4 bytes: %q", got)
	}
	if got := Cut("aé", 2); got != "a…" {
		t.Errorf("Cut inside é: %q", got)
	}
}
