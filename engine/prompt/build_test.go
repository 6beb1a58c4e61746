package prompt

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
)

// Template ids as in the released tokenizer (the golden case files use them).
const (
	imStart, imEnd, assistantID, userID, nl = 151644, 151645, 77091, 872, 198
)

func wrapText(body ...int) []int {
	return slices.Concat([]int{imStart, assistantID, nl}, body, []int{imEnd, nl, imStart, assistantID, nl})
}

func wrapInstruct(body ...int) []int {
	return slices.Concat([]int{imStart, userID, nl}, body, []int{imEnd, nl})
}

func wrapRef(body ...int) []int {
	return slices.Concat([]int{imStart, assistantID, nl}, body, []int{imEnd, nl})
}

func TestBadRequests(t *testing.T) {
	cv := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	base := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-base"))
	vd := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-voicedesign-1b7"))
	hello := wrapText(9707, 1879, 0)
	xvec := make([]float32, 64)
	cases := []struct {
		name string
		b    *Builder
		r    Request
		want error
		msg  string // must appear in the message
	}{
		{"unknown voice", cv, Request{TextIDs: hello, Speaker: "nobody"}, ErrUnknownVoice, `"nobody" (valid: aiden, dylan (beijing_dialect), eric (sichuan_dialect), ono_anna, ryan, serena, sohee, uncle_fu, vivian)`},
		{"no voice", cv, Request{TextIDs: hello}, ErrUnknownVoice, "ryan"},
		{"unknown language", cv, Request{TextIDs: hello, Speaker: "ryan", Language: "Klingon"}, ErrUnknownLanguage, `"Klingon" (valid: auto, chinese, english`},
		{"dialect is no language", cv, Request{TextIDs: hello, Speaker: "eric", Language: "sichuan_dialect"}, ErrUnknownLanguage, "sichuan_dialect"},
		{"empty text", cv, Request{TextIDs: wrapText(), Speaker: "ryan"}, ErrEmptyText, ""},
		{"no text", cv, Request{Speaker: "ryan"}, ErrEmptyText, ""},
		{"raw ids", cv, Request{TextIDs: []int{9707, 1879, 0, 1, 2, 3, 4, 5, 6}, Speaker: "ryan"}, ErrUnsupported, "chat template"},
		{"id out of range", cv, Request{TextIDs: wrapText(151936), Speaker: "ryan"}, ErrUnsupported, "151936"},
		{"x-vector to CustomVoice", cv, Request{TextIDs: hello, Speaker: "ryan", XVector: xvec}, ErrUnsupported, "only Base"},
		{"speaker to VoiceDesign", vd, Request{TextIDs: hello, Speaker: "ryan"}, ErrUnsupported, `"ryan"`},
		{"speaker to Base", base, Request{TextIDs: hello, Speaker: "ryan", XVector: xvec}, ErrUnsupported, `"ryan"`},
		{"instruct to Base", base, Request{TextIDs: hello, XVector: xvec, InstructIDs: wrapInstruct(40)}, ErrUnsupported, "Base models take none"},
		{"Base without x-vector", base, Request{TextIDs: hello}, ErrUnsupported, "0 values, this model needs 64"},
		{"x-vector width", base, Request{TextIDs: hello, XVector: make([]float32, 32)}, ErrUnsupported, "32 values, this model needs 64"},
		{"x-vector NaN", base, Request{TextIDs: hello, XVector: append(make([]float32, 63), float32(nanF()))}, ErrUnsupported, "value 63"},
		{"ICL code too big", base, Request{TextIDs: hello, XVector: xvec, RefTextIDs: wrapRef(40), RefCodes: []backend.Codes{{}, {5: 2048}}}, ErrUnsupported, "2048 at frame 1, group 5"},
		{"ICL negative code", base, Request{TextIDs: hello, XVector: xvec, RefTextIDs: wrapRef(40), RefCodes: []backend.Codes{{0: -1}}}, ErrUnsupported, "-1 at frame 0, group 0"},
		{"ICL without transcript", base, Request{TextIDs: hello, XVector: xvec, RefCodes: []backend.Codes{{}}}, ErrUnsupported, "chat template"},
		{"ICL empty transcript", base, Request{TextIDs: hello, XVector: xvec, RefTextIDs: wrapRef(), RefCodes: []backend.Codes{{}}}, ErrUnsupported, "transcript"},
		{"transcript without codes", base, Request{TextIDs: hello, XVector: xvec, RefTextIDs: wrapRef(40)}, ErrUnsupported, "without reference codes"},
		{"too long", cv, Request{TextIDs: wrapText(make([]int, 40000)...), Speaker: "ryan"}, ErrUnsupported, "32768"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.b.Build(c.r)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v, want %v containing %q", err, c.want, c.msg)
			}
		})
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func nanF() float64 { z := 0.0; return z / z }

func TestNamesAreCaseInsensitive(t *testing.T) {
	cv := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	a, err := cv.Build(Request{TextIDs: wrapText(9707), Speaker: "ryan", Language: "english"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cv.Build(Request{TextIDs: wrapText(9707), Speaker: "RYAN", Language: " English "})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(flat(a.Prefill), flat(b.Prefill)) {
		t.Error("upper-case names gave another prompt")
	}
	c, err := cv.Build(Request{TextIDs: wrapText(9707), Speaker: "ryan"}) // "" = auto
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Prefill) != len(a.Prefill)-1 {
		t.Errorf("auto language: %d rows, want one tag row fewer than %d", len(c.Prefill), len(a.Prefill))
	}
}

// The dialect rule: Eric speaks Sichuanese for Chinese and Auto, English for
// English. Row 3+2 is tts_pad + C(language).
func TestDialectRule(t *testing.T) {
	cv := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	for lang, want := range map[string]int{"chinese": 2062, "auto": 2062, "english": 2050} {
		p, err := cv.Build(Request{TextIDs: wrapText(9707), Speaker: "Eric", Language: lang})
		if err != nil {
			t.Fatal(err)
		}
		if exp := add(cv.ttsPad, cv.codecRow(want)); !slices.Equal(p.Prefill[5], exp) {
			t.Errorf("Eric/%s: language row is not tts_pad + C(%d)", lang, want)
		}
	}
}

// 0.6B CustomVoice drops the instruction (the official wrapper does); the
// 1.7B one embeds every instruct id before the role rows.
func TestInstructBySize(t *testing.T) {
	small := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	big := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice-1b7"))
	instr := wrapInstruct(40, 41, 42)
	for _, c := range []struct {
		b     *Builder
		extra int
	}{{small, 0}, {big, len(instr)}} {
		with, err := c.b.Build(Request{TextIDs: wrapText(9707), Speaker: "ryan", InstructIDs: instr})
		if err != nil {
			t.Fatal(err)
		}
		without, err := c.b.Build(Request{TextIDs: wrapText(9707), Speaker: "ryan"})
		if err != nil {
			t.Fatal(err)
		}
		if len(with.Prefill) != len(without.Prefill)+c.extra {
			t.Errorf("instruct rows: %d vs %d, want +%d", len(with.Prefill), len(without.Prefill), c.extra)
		}
		if !slices.Equal(flat(with.Prefill[c.extra:]), flat(without.Prefill)) {
			t.Error("the rows after the instruction changed")
		}
	}
	// An empty instruction counts as none.
	p, err := big.Build(Request{TextIDs: wrapText(9707), Speaker: "ryan", InstructIDs: wrapInstruct()})
	if err != nil || len(p.Prefill) != 3+5+3 { // role, 5 tag rows (auto, speaker), text + eos + pad
		t.Errorf("empty instruction: %d rows, %v; want 11 rows", len(p.Prefill), err)
	}
}

// The returned prompt is the caller's: changing it must not change the next.
func TestPromptIsOwned(t *testing.T) {
	cv := builderFor(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	r := Request{TextIDs: wrapText(9707, 1879), Speaker: "ryan"}
	a, _ := cv.Build(r)
	want := flat(a.Trailing)
	a.TTSPad[0] += 1
	a.Trailing[0][0] += 1
	b, _ := cv.Build(r)
	if !slices.Equal(flat(b.Trailing), want) || b.TTSPad[0] == a.TTSPad[0] {
		t.Error("a caller's edit leaked into the builder's cached rows")
	}
}
