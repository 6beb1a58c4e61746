package assets

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

func TestVoicesListsTheNineSpeakers(t *testing.T) {
	v, err := Voices()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"serena", "vivian", "uncle_fu", "ryan", "aiden", "ono_anna", "sohee", "eric", "dylan"} {
		if v[name].Description == "" {
			t.Errorf("voice %q has no description", name)
		}
	}
	if v["eric"].Dialect != "Sichuan dialect" || v["dylan"].Dialect != "Beijing dialect" {
		t.Errorf("dialects: eric %q dylan %q", v["eric"].Dialect, v["dylan"].Dialect)
	}
	if len(v) != 9 {
		t.Errorf("%d voices, want 9", len(v))
	}
}

// The committed icon is what DrawIcon renders (regenerate with
// `go run ./assets/genicon`).
func TestIconMatchesGenerator(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(IconPNG()))
	if err != nil {
		t.Fatalf("icon.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() != IconSize || b.Dy() != IconSize {
		t.Fatalf("icon is %v, want %d px square", b, IconSize)
	}
	want := DrawIcon(IconSize)
	got := image.NewNRGBA(img.Bounds())
	for y := 0; y < IconSize; y++ {
		for x := 0; x < IconSize; x++ {
			got.Set(x, y, img.At(x, y))
		}
	}
	if !bytes.Equal(got.Pix, want.Pix) {
		t.Fatal("assets/icon.png differs from DrawIcon; run go run ./assets/genicon")
	}
	// The corners are transparent and the centre is opaque.
	if want.NRGBAAt(0, 0).A != 0 || want.NRGBAAt(IconSize/2, IconSize/2).A != 255 {
		t.Fatal("icon corner/centre alpha unexpected")
	}
}
