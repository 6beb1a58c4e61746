package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"talkbox/engine/cuda"
	"talkbox/engine/golden"
)

func TestGPUReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("%w: libtalkbox_native.so not found (looked at /x, /y; build it with `make native`)", cuda.ErrUnavailable), "no GPU library (build it with make native)"},
		{fmt.Errorf("%w: /x/lib.so loaded but no CUDA device is visible (no driver or no GPU)", cuda.ErrUnavailable), "no NVIDIA driver or GPU found"},
		{errors.New("cuda: create engine: cudaMalloc weights: out of memory"), "not enough GPU memory for this model"},
		{errors.New("something else"), "something else"},
	} {
		if got := GPUReason(tc.err); got != tc.want {
			t.Errorf("GPUReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Where the automatic choice falls back to the CPU, the engine says why;
// where the CPU was asked for, it says nothing.
func TestGPUNoteOnFallback(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("a GPU is usable here; the fallback note is not shown")
	}
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	e, err := Open(context.Background(), ck, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.GPUNote() == "" {
		t.Fatal("CPU fallback without a reason")
	}
	c, err := Open(context.Background(), ck, Options{Backend: BackendCPU})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.GPUNote() != "" {
		t.Fatalf("explicit CPU gave a note %q", c.GPUNote())
	}
}
