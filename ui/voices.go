package ui

import (
	"fmt"
	"strings"
	"unicode"

	"talkbox/assets"
	"talkbox/engine"
)

// voiceLabel is what the picker shows for a speaker: the name, a short
// description and the dialect when the speaker has one.
func voiceLabel(v engine.Voice, known map[string]assets.VoiceInfo) string {
	desc, dialect := v.Description, humanize(v.Dialect)
	if info, ok := known[strings.ToLower(v.Name)]; ok {
		if desc == "" {
			desc = info.Description
		}
		if info.Dialect != "" {
			dialect = info.Dialect // the curated wording wins over "sichuan_dialect"
		}
	}
	label := displayName(v.Name)
	if desc != "" {
		label += " — " + desc
	}
	if dialect != "" {
		label += " (" + dialect + ")"
	}
	return label
}

// displayName turns "uncle_fu" into "Uncle Fu".
func displayName(name string) string {
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' || r == ' ' })
	for i, p := range parts {
		r := []rune(p)
		r[0] = unicode.ToUpper(r[0])
		parts[i] = string(r)
	}
	return strings.Join(parts, " ")
}

// humanize turns an identifier like "sichuan_dialect" into "Sichuan dialect".
func humanize(id string) string {
	s := strings.TrimSpace(strings.ReplaceAll(id, "_", " "))
	if s == "" {
		return ""
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// languageLabel shows "auto" as "Auto" and capitalises the rest.
func languageLabel(lang string) string {
	if strings.EqualFold(lang, "auto") {
		return "Auto"
	}
	return displayName(lang)
}

// pickList keeps the labels shown by a Select and the values behind them.
type pickList struct {
	labels []string
	values map[string]string
}

func (p *pickList) value(label string) (string, error) {
	v, ok := p.values[label]
	if !ok {
		return "", fmt.Errorf("no entry %q", label)
	}
	return v, nil
}

func (p *pickList) labelOf(value string) string {
	for _, l := range p.labels {
		if strings.EqualFold(p.values[l], value) {
			return l
		}
	}
	return ""
}

func voicePicks(voices []engine.Voice, known map[string]assets.VoiceInfo) pickList {
	p := pickList{values: map[string]string{}}
	for _, v := range voices {
		l := voiceLabel(v, known)
		if _, dup := p.values[l]; dup {
			continue
		}
		p.labels = append(p.labels, l)
		p.values[l] = v.Name
	}
	return p
}

// languagePicks keeps the engine's order but makes sure "auto" comes first.
func languagePicks(langs []string) pickList {
	p := pickList{values: map[string]string{}}
	add := func(l string) {
		label := languageLabel(l)
		if _, dup := p.values[label]; dup {
			return
		}
		p.labels = append(p.labels, label)
		p.values[label] = l
	}
	add("auto")
	for _, l := range langs {
		add(l)
	}
	return p
}
