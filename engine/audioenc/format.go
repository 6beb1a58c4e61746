// Package audioenc streams mono audio into the file formats Talkbox hands
// out: WAV, raw 16-bit PCM, FLAC and Ogg/Opus. Every encoder takes float
// samples in [-1, 1] in chunks of any size as they are synthesised and
// writes output as soon as it can, so a file or an HTTP response starts
// before the utterance ends.
package audioenc

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Format is an output container and codec.
type Format int

const (
	WAV  Format = iota + 1 // RIFF/WAVE, 16-bit PCM
	PCM                    // raw signed 16-bit little-endian samples, no header
	FLAC                   // lossless, 16-bit
	Opus                   // Opus in Ogg (RFC 7845)
)

// formats lists every Format with its name, extensions (the first one is the
// one written) and MIME type, so each fact lives in one row.
var formats = []struct {
	f           Format
	name        string
	exts        []string
	contentType string
}{
	{WAV, "wav", []string{".wav"}, "audio/wav"},
	{PCM, "pcm", []string{".pcm"}, "audio/pcm"},
	{FLAC, "flac", []string{".flac"}, "audio/flac"},
	{Opus, "opus", []string{".opus", ".ogg"}, "audio/ogg"},
}

// Formats lists the format names in a stable order ("wav", "pcm", "flac", "opus").
func Formats() []string {
	out := make([]string, len(formats))
	for i, r := range formats {
		out[i] = r.name
	}
	return out
}

// ParseFormat accepts a format name ("wav", "flac", "opus", "pcm"; any case).
func ParseFormat(s string) (Format, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for _, r := range formats {
		if r.name == name {
			return r.f, nil
		}
	}
	return 0, fmt.Errorf("audioenc: unknown format %q (want %s)", s, strings.Join(Formats(), ", "))
}

// FormatFromPath picks the format from a file name's extension (.wav, .flac,
// .ogg or .opus, .pcm; any case).
func FormatFromPath(path string) (Format, error) {
	ext := strings.ToLower(filepath.Ext(path))
	for _, r := range formats {
		for _, e := range r.exts {
			if e == ext {
				return r.f, nil
			}
		}
	}
	var all []string
	for _, r := range formats {
		all = append(all, r.exts...)
	}
	return 0, fmt.Errorf("audioenc: cannot tell the format of %q from its extension (want %s)", filepath.Base(path), strings.Join(all, ", "))
}

func (f Format) row() (int, bool) {
	for i, r := range formats {
		if r.f == f {
			return i, true
		}
	}
	return 0, false
}

// String is the format's name as ParseFormat accepts it.
func (f Format) String() string {
	if i, ok := f.row(); ok {
		return formats[i].name
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ContentType is the MIME type for an HTTP response.
func (f Format) ContentType() string {
	if i, ok := f.row(); ok {
		return formats[i].contentType
	}
	return "application/octet-stream"
}

// Ext is the file extension written for the format, with its dot (".wav").
func (f Format) Ext() string {
	if i, ok := f.row(); ok {
		return formats[i].exts[0]
	}
	return ""
}
