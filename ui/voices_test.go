package ui

import (
	"testing"

	"talkbox/assets"
)

func TestVoiceLabels(t *testing.T) {
	known, err := assets.Voices()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		v    Voice
		want string
	}{
		// The engine's identifier-style dialect gives way to the curated text.
		{Voice{Name: "eric", Dialect: "sichuan_dialect"}, "Eric — Lively Chengdu male, slightly husky (Sichuan dialect)"},
		{Voice{Name: "uncle_fu"}, "Uncle Fu — Seasoned male, low and mellow"},
		// The engine's own description wins; an unknown dialect is humanised.
		{Voice{Name: "newbie", Description: "Bright", Dialect: "wu_dialect"}, "Newbie — Bright (Wu dialect)"},
		{Voice{Name: "plain"}, "Plain"},
	}
	for _, c := range cases {
		if got := voiceLabel(c.v, known); got != c.want {
			t.Errorf("voiceLabel(%+v) = %q, want %q", c.v, got, c.want)
		}
	}
	p := languagePicks([]string{"chinese", "auto", "english"})
	if len(p.labels) != 3 || p.labels[0] != "Auto" || p.values["Chinese"] != "chinese" {
		t.Errorf("language picks %q", p.labels)
	}
}
