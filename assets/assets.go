// Package assets holds the files the app ships inside its binary: the voice
// preset descriptions and the application icon.
//
// icon.png is rendered by DrawIcon; regenerate it with
// `go run ./assets/genicon` after changing the drawing (a test checks the
// committed file still matches).
package assets

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

//go:embed voices.json
var voicesJSON []byte

//go:embed icon.png
var iconPNG []byte

// IconPNG is the 512 px application icon.
func IconPNG() []byte { return iconPNG }

// VoiceInfo describes one CustomVoice speaker for the voice picker.
type VoiceInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Language    string `json:"language"`
	Dialect     string `json:"dialect"`
}

// Voices parses voices.json, keyed by lower-case speaker name.
func Voices() (map[string]VoiceInfo, error) {
	var doc struct {
		Voices []VoiceInfo `json:"voices"`
	}
	if err := json.Unmarshal(voicesJSON, &doc); err != nil {
		return nil, fmt.Errorf("assets: voices.json: %w", err)
	}
	m := make(map[string]VoiceInfo, len(doc.Voices))
	for _, v := range doc.Voices {
		if v.Name == "" {
			return nil, fmt.Errorf("assets: voices.json: a voice has no name")
		}
		m[strings.ToLower(v.Name)] = v
	}
	return m, nil
}
