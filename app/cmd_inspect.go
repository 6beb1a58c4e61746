package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"talkbox/app/hub"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
	"talkbox/engine/text"
)

func init() {
	register(verb{name: "inspect", summary: "describe a model directory (type, voices, languages, weights) and check it is complete", run: runInspect})
}

// inspection is what inspect reports; it is also the --json document.
type inspection struct {
	Dir             string          `json:"dir"`
	ModelType       string          `json:"model_type,omitempty"` // tts_model_type
	Size            string          `json:"size,omitempty"`       // "0.6B" / "1.7B"
	HiddenSize      int             `json:"hidden_size,omitempty"`
	TalkerLayers    int             `json:"talker_layers,omitempty"`
	Speakers        []inspectVoice  `json:"speakers"`
	Languages       []string        `json:"languages"`
	Instruct        bool            `json:"instruct"`
	Model           *inspectWeights `json:"model_weights,omitempty"`
	SpeechTokenizer *inspectWeights `json:"speech_tokenizer_weights,omitempty"`
	TokenizerTokens int             `json:"tokenizer_tokens,omitempty"` // BPE tokens
	TokenizerAdded  int             `json:"tokenizer_added_tokens,omitempty"`
	Complete        bool            `json:"complete"`
	Problems        []string        `json:"problems,omitempty"`
}

type inspectVoice struct {
	Name    string `json:"name"`
	Dialect string `json:"dialect,omitempty"`
}

type inspectWeights struct {
	File    string `json:"file"`
	Tensors int    `json:"tensors"`
	Bytes   int64  `json:"bytes"`
}

// errIncomplete makes inspect exit non-zero after printing its report.
var errIncomplete = errors.New("checkpoint is not complete")

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: talkbox inspect [--json] DIR")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("give exactly one model directory")
	}
	in := inspect(pos[0])
	if *asJSON {
		b, err := json.MarshalIndent(in, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printInspection(stdout, in)
	}
	if !in.Complete {
		return fmt.Errorf("%w: %s", errIncomplete, strings.Join(in.Problems, "; "))
	}
	return nil
}

// inspect gathers everything it can, noting each problem instead of
// stopping at the first, so an incomplete checkpoint still gets a report.
func inspect(dir string) *inspection {
	in := &inspection{Dir: dir, Speakers: []inspectVoice{}, Languages: []string{}}
	problem := func(err error) { in.Problems = append(in.Problems, err.Error()) }
	cfg, err := model.ReadConfig(dir)
	if err != nil {
		problem(err)
	} else {
		in.ModelType, in.Size = cfg.TTSModelType, cfg.SizeName()
		in.HiddenSize, in.TalkerLayers = cfg.Talker.HiddenSize, cfg.Talker.NumHiddenLayers
		for _, s := range cfg.Speakers() {
			in.Speakers = append(in.Speakers, inspectVoice{Name: s.Name, Dialect: s.Dialect})
		}
		in.Languages = cfg.Languages()
		in.Instruct = cfg.SupportsInstruct()
	}
	if cfg != nil {
		m, err := model.Load(dir, model.Options{RequireCodec: true})
		if err != nil {
			problem(err)
		} else {
			in.Model = weightsOf(m.LM)
			in.SpeechTokenizer = weightsOf(m.CodecFile)
			m.Close()
		}
	}
	// Counts even when Load refused the checkpoint (a truncated file still
	// fails to open, and that is already among the problems).
	if in.Model == nil {
		in.Model = countWeights(filepath.Join(dir, "model.safetensors"))
	}
	if in.SpeechTokenizer == nil {
		in.SpeechTokenizer = countWeights(filepath.Join(dir, "speech_tokenizer", "model.safetensors"))
	}
	tok, err := text.Open(dir, text.Options{})
	if err != nil {
		problem(err)
	} else {
		in.TokenizerTokens, in.TokenizerAdded = tok.VocabSize(), len(tok.AddedTokens())
		tok.Close()
	}
	in.Complete = len(in.Problems) == 0
	return in
}

func weightsOf(f *safetensors.File) *inspectWeights {
	if f == nil {
		return nil
	}
	return &inspectWeights{File: f.Path, Tensors: len(f.Names()), Bytes: f.TotalBytes()}
}

func countWeights(path string) *inspectWeights {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return weightsOf(f)
}

var modelTypeNames = map[string]string{
	model.TypeBase: "Base (voice clone)", model.TypeCustomVoice: "CustomVoice (preset voices)", model.TypeVoiceDesign: "VoiceDesign (voice described in words)",
}

func printInspection(w io.Writer, in *inspection) {
	fmt.Fprintf(w, "model       %s\n", in.Dir)
	if in.ModelType != "" {
		fmt.Fprintf(w, "type        %s %s, hidden %d, %d talker layers\n", in.Size, modelTypeNames[in.ModelType], in.HiddenSize, in.TalkerLayers)
		var voices []string
		for _, s := range in.Speakers {
			v := s.Name
			if s.Dialect != "" {
				v += " (" + s.Dialect + ")"
			}
			voices = append(voices, v)
		}
		if len(voices) == 0 {
			voices = []string{"none"}
		}
		fmt.Fprintf(w, "speakers    %s\n", strings.Join(voices, ", "))
		fmt.Fprintf(w, "languages   %s\n", strings.Join(in.Languages, ", "))
		instruct := "no"
		if in.Instruct {
			instruct = "yes"
		}
		fmt.Fprintf(w, "instruct    %s\n", instruct)
	}
	for _, x := range []struct {
		label string
		wt    *inspectWeights
	}{{"weights", in.Model}, {"codec", in.SpeechTokenizer}} {
		if x.wt != nil {
			fmt.Fprintf(w, "%-11s %d tensors, %s (%d bytes) in %s\n", x.label, x.wt.Tensors, hub.FormatBytes(x.wt.Bytes), x.wt.Bytes, x.wt.File)
		}
	}
	if in.TokenizerTokens > 0 {
		fmt.Fprintf(w, "tokenizer   %d BPE tokens + %d added tokens\n", in.TokenizerTokens, in.TokenizerAdded)
	}
	if in.Complete {
		fmt.Fprintln(w, "complete    yes")
		return
	}
	fmt.Fprintln(w, "complete    NO")
	for _, p := range in.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
}
