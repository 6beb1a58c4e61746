package assets

import (
	"image"
	"image/color"
	"math"
)

// IconSize is the edge of the committed icon in pixels.
const IconSize = 512

// DrawIcon renders the Talkbox icon: a speech bubble holding a sound-wave
// bar graph on a rounded blue-to-teal tile. Shapes are signed distance
// functions sampled 4×4 per pixel, so edges are anti-aliased without any
// graphics library.
func DrawIcon(size int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	const ss = 4
	for py := 0; py < size; py++ {
		for px := 0; px < size; px++ {
			var r, g, b, a float64
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					// Normalised coordinates in [0, 1].
					x := (float64(px) + (float64(sx)+0.5)/ss) / float64(size)
					y := (float64(py) + (float64(sy)+0.5)/ss) / float64(size)
					cr, cg, cb, ca := iconSample(x, y)
					r += cr * ca
					g += cg * ca
					b += cb * ca
					a += ca
				}
			}
			if a == 0 {
				continue
			}
			n := float64(ss * ss)
			img.SetNRGBA(px, py, color.NRGBA{
				R: uint8(math.Round(r / a * 255)),
				G: uint8(math.Round(g / a * 255)),
				B: uint8(math.Round(b / a * 255)),
				A: uint8(math.Round(a / n * 255)),
			})
		}
	}
	return img
}

// iconSample returns the colour (0..1) and opacity at one point.
func iconSample(x, y float64) (r, g, b, a float64) {
	if roundedRect(x, y, 0.5, 0.5, 0.46, 0.46, 0.1) > 0 {
		return 0, 0, 0, 0
	}
	// Tile: diagonal gradient from deep blue to teal.
	t := (x + y) / 2
	r = lerp(0.16, 0.05, t)
	g = lerp(0.27, 0.62, t)
	b = lerp(0.75, 0.66, t)
	a = 1

	// Speech bubble: rounded body plus a tail at the lower left.
	body := roundedRect(x, y, 0.5, 0.45, 0.32, 0.22, 0.09)
	tail := triangle(x, y, 0.27, 0.6, 0.42, 0.6, 0.22, 0.8)
	if math.Min(body, tail) <= 0 {
		r, g, b = 0.98, 0.98, 1
		// Sound-wave bars inside the bubble, tallest in the middle.
		heights := []float64{0.05, 0.1, 0.15, 0.1, 0.05}
		for i, h := range heights {
			cx := 0.33 + float64(i)*0.085
			if roundedRect(x, y, cx, 0.45, 0.026, h, 0.026) <= 0 {
				r, g, b = lerp(0.16, 0.05, float64(i)/4), lerp(0.27, 0.62, float64(i)/4), lerp(0.75, 0.66, float64(i)/4)
			}
		}
	}
	return r, g, b, a
}

// roundedRect is the signed distance to a rectangle centred at (cx, cy) with
// half-sizes (hw, hh) and corner radius rad; negative inside.
func roundedRect(x, y, cx, cy, hw, hh, rad float64) float64 {
	dx := math.Abs(x-cx) - (hw - rad)
	dy := math.Abs(y-cy) - (hh - rad)
	outside := math.Hypot(math.Max(dx, 0), math.Max(dy, 0))
	inside := math.Min(math.Max(dx, dy), 0)
	return outside + inside - rad
}

// triangle is negative inside the triangle (x1,y1)-(x2,y2)-(x3,y3) and
// positive outside (not a true distance; only its sign is used).
func triangle(x, y, x1, y1, x2, y2, x3, y3 float64) float64 {
	e := func(ax, ay, bx, by float64) float64 { return (bx-ax)*(y-ay) - (by-ay)*(x-ax) }
	d1, d2, d3 := e(x1, y1, x2, y2), e(x2, y2, x3, y3), e(x3, y3, x1, y1)
	if (d1 >= 0 && d2 >= 0 && d3 >= 0) || (d1 <= 0 && d2 <= 0 && d3 <= 0) {
		return -1
	}
	return 1
}

func lerp(a, b, t float64) float64 { return a + (b-a)*t }
