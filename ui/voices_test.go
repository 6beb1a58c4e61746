package ui

import (
	"testing"

	"talkbox/assets"
	"talkbox/engine"
)

func TestVoiceLabels(t *testing.T) {
	known, err := assets.Voices()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		v    engine.Voice
		want string
	}{
		// The engine's identifier-style dialect gives way to the curated text.
		{engine.Voice{Name: "eric", Dialect: "sichuan_dialect"}, "Eric — Lively Chengdu male, slightly husky (Sichuan dialect)"},
		{engine.Voice{Name: "uncle_fu"}, "Uncle Fu — Seasoned male, low and mellow"},
		// The engine's own description wins; an unknown dialect is humanised.
		{engine.Voice{Name: "newbie", Description: "Bright", Dialect: "wu_dialect"}, "Newbie — Bright (Wu dialect)"},
		{engine.Voice{Name: "plain"}, "Plain"},
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
