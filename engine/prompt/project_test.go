package prompt

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// fakeProjector stands in for the GPU: it records every call and answers
// with the CPU MLP of the builder it serves, plus offset, or with err.
type fakeProjector struct {
	p      *projector
	offset float32
	err    error
	short  bool // return one value too few

	mu    sync.Mutex
	calls int
	xs    [][]float32 // x of each call
	textH []int
}

func (f *fakeProjector) ProjectText(x []float32, rows, textH int) ([]float32, error) {
	f.mu.Lock()
	f.calls++
	f.xs = append(f.xs, slices.Clone(x))
	f.textH = append(f.textH, textH)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if len(x) != rows*textH {
		return nil, errors.New("fake: x does not hold rows x textH values")
	}
	y := f.p.mlp(slices.Clone(x), rows)
	for i := range y {
		y[i] += f.offset
	}
	if f.short {
		y = y[:len(y)-1]
	}
	return y, nil
}

// freshBuilder opens its own builder (builderFor's are shared with the golden
// tests, which must stay on the CPU path).
func freshBuilder(t *testing.T, name string) *Builder {
	t.Helper()
	m, err := model.Load(golden.Checkpoint(t, name), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cpuPrompt is r built by a builder of its own that never had a projector.
func cpuPrompt(t *testing.T, name string, r Request) backend.Prompt {
	t.Helper()
	p, err := freshBuilder(t, name).Build(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A request with a repeated text id, an instruction (1.7B CustomVoice embeds
// it) and enough ids for several row tiles on the GPU.
func projectorRequest() Request {
	return Request{TextIDs: wrapText(9707, 1879, 0, 9707, 358, 1079, 264, 1273, 11, 1879, 13),
		Speaker: "ryan", InstructIDs: wrapInstruct(40, 41, 42)}
}

// distinctIDs are the ids Build projects, in its order, each once.
func distinctIDs(b *Builder, r Request) []int {
	v, err := b.resolve(r)
	if err != nil {
		panic(err)
	}
	text, _ := b.content("text", r.TextIDs, 5)
	var out []int
	for _, id := range slices.Concat(v.instruct, r.TextIDs[:3], v.ref, text) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestTextProjectorIsUsed(t *testing.T) {
	for _, name := range []string{"qwen3-tts-tiny-customvoice", "qwen3-tts-tiny-customvoice-1b7"} {
		t.Run(name, func(t *testing.T) {
			r := projectorRequest()
			want := cpuPrompt(t, name, r)
			b := freshBuilder(t, name)
			f := &fakeProjector{p: &b.proj}
			b.SetTextProjector(f)
			got, err := b.Build(r)
			if err != nil {
				t.Fatal(err)
			}
			if f.calls != 1 {
				t.Fatalf("Build called the projector %d times, want once", f.calls)
			}
			// The projector got the embedding rows of each distinct id, in order.
			ids := distinctIDs(b, r)
			th := b.cfg.Talker.TextHiddenSize
			x := make([]float32, len(ids)*th)
			for k, id := range ids {
				b.proj.emb.addRow(id, x[k*th:(k+1)*th])
			}
			if f.textH[0] != th || !slices.Equal(f.xs[0], x) {
				t.Fatalf("projector input: %d values of width %d, want the %d embedding rows of %v (width %d)",
					len(f.xs[0]), f.textH[0], len(ids), ids, th)
			}
			// Answering with the CPU's rows gives the CPU's prompt, bit for bit.
			if !slices.Equal(flat(got.Prefill), flat(want.Prefill)) || !slices.Equal(flat(got.Trailing), flat(want.Trailing)) ||
				!slices.Equal(got.TTSPad, want.TTSPad) {
				t.Error("a projector that returns the CPU rows changed the prompt")
			}
			// Its answer is what lands in the prompt: shift it and the rows move.
			f.offset = 0.5
			shifted, err := b.Build(r)
			if err != nil {
				t.Fatal(err)
			}
			moved := 0
			for i, row := range shifted.Prefill {
				if math.Abs(float64(row[0]-want.Prefill[i][0])-0.5) < 1e-3 {
					moved++
				}
			}
			// Instruct (1.7B), role and text rows carry P; the tag rows do not.
			text, _ := b.content("text", r.TextIDs, 5)
			wantMoved := instructRows(b, r) + 3 + len(text) // non-streaming: P(text) + C(pad) rows
			if moved != wantMoved || moved == 0 {
				t.Errorf("%d prefill rows follow the projector's answer, want %d", moved, wantMoved)
			}
			if !slices.Equal(shifted.TTSPad, want.TTSPad) {
				t.Error("P(tts_pad) changed: New computes it on the CPU before any projector is set")
			}
			// Unset, Build is back on the CPU.
			b.SetTextProjector(nil)
			again, err := b.Build(r)
			if err != nil {
				t.Fatal(err)
			}
			if f.calls != 2 || !slices.Equal(flat(again.Prefill), flat(want.Prefill)) {
				t.Errorf("after SetTextProjector(nil): %d calls (want 2), prompt equal to the CPU's: %v",
					f.calls, slices.Equal(flat(again.Prefill), flat(want.Prefill)))
			}
		})
	}
}

func instructRows(b *Builder, r Request) int {
	v, _ := b.resolve(r)
	return len(v.instruct)
}

// A failing projector costs speed, not correctness: Build falls back to the
// CPU, gives the same prompt, and logs why.
func TestTextProjectorFailureFallsBack(t *testing.T) {
	r := projectorRequest()
	want := cpuPrompt(t, "qwen3-tts-tiny-customvoice", r)
	var log bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	defer slog.SetDefault(prev)
	b := freshBuilder(t, "qwen3-tts-tiny-customvoice")
	for _, f := range []*fakeProjector{
		{p: &b.proj, err: errors.New("device lost")},
		{p: &b.proj, short: true},
	} {
		log.Reset()
		b.SetTextProjector(f)
		got, err := b.Build(r)
		if err != nil {
			t.Fatalf("Build failed instead of falling back: %v", err)
		}
		if f.calls != 1 {
			t.Errorf("projector called %d times, want once", f.calls)
		}
		if !slices.Equal(flat(got.Prefill), flat(want.Prefill)) || !slices.Equal(flat(got.Trailing), flat(want.Trailing)) {
			t.Error("the fallback rows differ from the CPU builder's")
		}
		msg := "device lost"
		if f.short {
			msg = "wrong size"
		}
		if !strings.Contains(log.String(), msg) {
			t.Errorf("the fallback was not logged with %q: %q", msg, log.String())
		}
	}
}

// SetTextProjector may race with Build (the engine sets it once, but the
// contract allows any time); run under -race.
func TestSetTextProjectorWhileBuilding(t *testing.T) {
	r := projectorRequest()
	want := cpuPrompt(t, "qwen3-tts-tiny-customvoice", r)
	b := freshBuilder(t, "qwen3-tts-tiny-customvoice")
	f := &fakeProjector{p: &b.proj}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				p, err := b.Build(r)
				if err != nil || !slices.Equal(flat(p.Prefill), flat(want.Prefill)) {
					t.Errorf("concurrent Build: %v", err)
					return
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if i%2 == 0 {
			b.SetTextProjector(f)
		} else {
			b.SetTextProjector(nil)
		}
	}
	wg.Wait()
}
