package main

import (
	"encoding/json"
	"fmt"
	"io"

	"talkbox/app/hub"
	"talkbox/engine/text"
)

func init() {
	register(verb{name: "tokenize", summary: "print the token ids of each text (one JSON array per line)", run: runTokenize})
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", stderr)
	dir := fs.String("model", "", "model folder (holds vocab.json, merges.txt, tokenizer_config.json) or installed name")
	official := fs.Bool("official-regex", false, "split like a local-directory official run (transformers 4.57.3 fix_mistral_regex) instead of the native Qwen2 rule")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: talkbox tokenize --model DIR|NAME [--official-regex] TEXT...")
		fmt.Fprintln(stderr, "Prints the ids of each TEXT as typed (no chat template; control tokens stay literal text).")
		fs.PrintDefaults()
	}
	// Flags come first; a text starting with "-" goes after "--".
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageErrorf("--model is required")
	}
	if fs.NArg() == 0 {
		return usageErrorf("give at least one TEXT")
	}
	modelDir, err := hub.Resolve(*dir)
	if err != nil {
		return err
	}
	tok, err := text.Open(modelDir, text.Options{OfficialRegex: *official})
	if err != nil {
		return err
	}
	defer tok.Close()
	for i, s := range fs.Args() {
		ids, err := tok.Encode(s)
		if err != nil {
			return fmt.Errorf("text %d: %w", i+1, err)
		}
		b, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return err
		}
	}
	return nil
}
