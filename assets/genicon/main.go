// Command genicon renders assets/icon.png from assets.DrawIcon.
// Run from the repository root: go run ./assets/genicon
package main

import (
	"bytes"
	"fmt"
	"image/png"
	"os"

	"talkbox/assets"
)

func main() {
	out := "assets/icon.png"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	var b bytes.Buffer
	if err := png.Encode(&b, assets.DrawIcon(assets.IconSize)); err != nil {
		fmt.Fprintln(os.Stderr, "genicon:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genicon:", err)
		os.Exit(1)
	}
}
