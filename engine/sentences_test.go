package engine

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitSentences(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   \n ", nil},
		{"Hello world", []string{"Hello world"}},
		{"Hello. How are you? Fine!", []string{"Hello.", "How are you?", "Fine!"}},
		{"Pi is 3.14 today. Yes.", []string{"Pi is 3.14 today.", "Yes."}},
		{`He said "stop." Then left.`, []string{`He said "stop."`, "Then left."}},
		{"Really?! Yes…  ok", []string{"Really?!", "Yes…", "ok"}},
		{"你好。今天天气很好！你呢？好", []string{"你好。", "今天天气很好！", "你呢？", "好"}},
		{"「走吧。」他说。", []string{"「走吧。」", "他说。"}},
		{"Title line\n\nBody text", []string{"Title line", "Body text"}},
		{"one line\nsame sentence", []string{"one line\nsame sentence"}},
	}
	for _, tc := range cases {
		if got := SplitSentences(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitSentences(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A run-on text without stops is still cut into bounded pieces at spaces,
// and nothing is lost.
func TestSplitSentencesBoundsRunOns(t *testing.T) {
	in := strings.Repeat("word ", 300)
	got := SplitSentences(in)
	if len(got) < 3 {
		t.Fatalf("got %d pieces, want the 1500-rune run-on cut into >= 3", len(got))
	}
	for _, s := range got {
		if n := utf8.RuneCountInString(s); n > maxSentenceRunes {
			t.Errorf("piece of %d runes exceeds %d", n, maxSentenceRunes)
		}
		if strings.HasPrefix(s, "ord") || strings.HasSuffix(s, "wor") {
			t.Errorf("piece %q splits a word", s[:10])
		}
	}
	if strings.Join(got, " ") != strings.TrimSpace(in) {
		t.Error("joined pieces differ from the input")
	}
	cjk := strings.Repeat("长", 1000)
	if got := SplitSentences(cjk); len(got) != 3 || strings.Join(got, "") != cjk {
		t.Errorf("CJK run-on: %d pieces", len(got))
	}
}

// The window sends each piece as one Request, so no piece may exceed what
// prepare accepts, even for text far over MaxTextRunes.
func TestSplitSentencesFitOneRequest(t *testing.T) {
	if maxSentenceRunes > MaxTextRunes {
		t.Fatalf("maxSentenceRunes %d > MaxTextRunes %d", maxSentenceRunes, MaxTextRunes)
	}
	long := strings.Repeat("x", MaxTextRunes+500) + ". " + strings.Repeat("长", MaxTextRunes+1)
	got := SplitSentences(long)
	total := 0
	for _, s := range got {
		n := utf8.RuneCountInString(s)
		if n > MaxTextRunes {
			t.Errorf("piece of %d runes exceeds MaxTextRunes %d", n, MaxTextRunes)
		}
		total += n
	}
	if want := utf8.RuneCountInString(long) - 1; total != want { // the one space goes
		t.Errorf("pieces hold %d runes, want %d", total, want)
	}
}

// SentenceSpans points at exactly the pieces SplitSentences returns, in
// order and without overlap, also for run-ons cut at spaces.
func TestSentenceSpansMatchPieces(t *testing.T) {
	for _, in := range []string{
		"", "  Hello. How are you?  Fine!\n\nNew paragraph here.  ",
		"「走吧。」他说。", strings.Repeat("word ", 300) + "end. " + strings.Repeat("长", 1000),
		" \u00a0Non-breaking. Spaces\u3000around. ",
	} {
		spans, pieces := SentenceSpans(in), SplitSentences(in)
		if len(spans) != len(pieces) {
			t.Fatalf("%q: %d spans, %d pieces", in, len(spans), len(pieces))
		}
		prev := 0
		for i, s := range spans {
			if s.Start < prev || s.End <= s.Start || in[s.Start:s.End] != pieces[i] {
				t.Fatalf("%q: span %d %v (after %d) is %q, piece is %q", in, i, s, prev, in[s.Start:s.End], pieces[i])
			}
			prev = s.End
		}
	}
}
