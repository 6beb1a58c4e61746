package main

import (
	"fmt"
	"io"
	"time"

	"talkbox/app/hub"
	"talkbox/engine/audioin"
	"talkbox/engine/codec"
	"talkbox/engine/codesfile"
	"talkbox/engine/model"
	"talkbox/internal/atomicfile"
)

func init() {
	register(verb{name: "encode", summary: "encode a WAV/FLAC file to codec frames as JSON (the inverse of decode)", run: runEncode})
}

func runEncode(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("encode", stderr)
	modelFlag := fs.String("model", "", "model folder or installed name (its speech_tokenizer/ encodes)")
	audioPath := fs.String("audio", "", "WAV or FLAC file (resampled to 24 kHz)")
	out := fs.String("codes-out", "", `output JSON file {"codes": [[16 ints], ...]}`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *audioPath == "" || *out == "" || fs.NArg() > 0 {
		return usageErrorf("talkbox encode --model DIR --audio FILE --codes-out FILE.json")
	}
	clip, m, _, err := openReference(*audioPath, *modelFlag)
	if err != nil {
		return err
	}
	defer m.Close()
	for _, n := range clip.Notices {
		fmt.Fprintln(stderr, "note:", n)
	}
	enc, err := codec.NewEncoder(m)
	if err != nil {
		return err
	}
	start := time.Now()
	codes, err := enc.Encode(clip.Samples)
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(*out, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := codesfile.Write(f, codes); err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d frames from %.2f s of audio (%s) in %.0f ms\n",
		*out, len(codes), clip.Seconds(), clip.Source.Format, float64(time.Since(start).Microseconds())/1e3)
	return nil
}

// openReference reads a reference recording (resampled to 24 kHz) and loads
// the model whose speech tokenizer and speaker encoder will encode it: the
// first steps of both encode and voice add. dir is the model's folder.
func openReference(audioPath, modelFlag string) (clip *audioin.Clip, m *model.Model, dir string, err error) {
	if clip, err = audioin.LoadFile(audioPath); err != nil {
		return nil, nil, "", err
	}
	if dir, err = hub.Resolve(modelFlag); err != nil {
		return nil, nil, "", err
	}
	if m, err = model.Load(dir, model.Options{RequireCodec: true}); err != nil {
		return nil, nil, "", err
	}
	return clip, m, dir, nil
}
