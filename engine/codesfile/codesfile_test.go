package codesfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"talkbox/engine/backend"
)

func TestRoundTrip(t *testing.T) {
	var codes []backend.Codes
	for f := 0; f < 5; f++ {
		var c backend.Codes
		for g := range c {
			c[g] = int32(f*100 + g)
		}
		codes = append(codes, c)
	}
	var buf bytes.Buffer
	if err := Write(&buf, codes); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[4][15] != 415 {
		t.Fatalf("%v", got)
	}
	// Other keys are skipped, whatever they hold.
	got, err = Read(strings.NewReader(`{"meta": {"a": [1, {"b": null}], "s": "x"}, "codes": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]], "z": 1}`))
	if err != nil || len(got) != 1 || got[0][15] != 15 {
		t.Fatalf("%v %v", got, err)
	}
}

func TestBadDocuments(t *testing.T) {
	row := "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]"
	for _, tc := range []struct{ doc, want string }{
		{``, "unexpected EOF"},
		{`[]`, "want"},
		{`{}`, `no "codes"`},
		{`{"codes": []}`, "no frames"},
		{`{"codes": [` + row + `,[1,2]]}`, "frame 1 has 2 codes"},
		{`{"codes": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]}`, "frame 0 has more than 16"},
		{`{"codes": [[-1,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}`, "out of range"},
		{`{"codes": [[1.5,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}`, "not an integer"},
		{`{"codes": [["a",1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}`, "not an integer"},
		{`{"codes": [` + row + `]} trailing`, "after the JSON"},
		{`{"codes": [` + row + `], "codes": [` + row + `]}`, "twice"},
		{`{"codes": [` + row, "unexpected EOF"},
		{`{"x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nested deeper"},
	} {
		_, err := Read(strings.NewReader(tc.doc))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// endless produces {"codes": [ followed by rows without end: a file far
// larger than memory should hold.
type endless struct{ head bool }

func (e *endless) Read(p []byte) (int, error) {
	if !e.head {
		e.head = true
		return copy(p, `{"codes": [`), nil
	}
	row := "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],\n"
	n := 0
	for n+len(row) <= len(p) {
		n += copy(p[n:], row)
	}
	return n, nil
}

// decode used to read the whole file and decode it at once (a 100 MB file
// grew to 8.9 GB); now a stream of rows stops at MaxFrames with an error that
// states the limit, and memory stays near the frames kept.
func TestFrameCapStreamed(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Read(&endless{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "more than 22500 frames") {
		t.Fatalf("got %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("reading allocated %d MB", grew>>20)
	}
}

func TestByteCap(t *testing.T) {
	// One endless string value: the byte cap stops it.
	r := io.MultiReader(strings.NewReader(`{"x": "`), &zeros{})
	_, err := Read(r)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "more than 67108864 bytes") {
		t.Fatalf("got %v", err)
	}
	p := filepath.Join(t.TempDir(), "big.json")
	f, _ := os.Create(p)
	f.Truncate(MaxBytes + 1)
	f.Close()
	if _, err := ReadFile(p); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), p) {
		t.Fatalf("big file: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// FuzzRead: no panic, bounded output, and an error for anything that is not
// valid JSON or whose rows break the rules.
func FuzzRead(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/seed/*.json")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"codes": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}`))
	f.Add([]byte(`{"codes": [[1e3,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		codes, err := Read(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON accepted: %q", b)
		}
		if len(codes) == 0 || len(codes) > MaxFrames {
			t.Fatalf("%d frames", len(codes))
		}
		for _, row := range codes {
			for _, c := range row {
				if c < 0 || c > MaxCode {
					t.Fatalf("code %d", c)
				}
			}
		}
		// What was accepted round-trips.
		var buf bytes.Buffer
		Write(&buf, codes)
		again, err := Read(&buf)
		if err != nil || len(again) != len(codes) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
