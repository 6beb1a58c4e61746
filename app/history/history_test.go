package history

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const rate = 24000

// tone is n samples of a quiet sine, different per seed.
func tone(n int, seed float64) []float32 {
	pcm := make([]float32, n)
	for i := range pcm {
		pcm[i] = float32(0.3 * math.Sin(float64(i)*0.01*seed))
	}
	return pcm
}

func TestPersistenceAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	texts := []string{"first utterance", "second one", "third, the newest"}
	for i, text := range texts {
		e := Entry{Text: text, Voice: "ryan", Language: "english", Model: "Qwen3-TTS 0.6B CustomVoice",
			Time: base.Add(time.Duration(i) * time.Minute), Outcome: "done",
			Stats: Stats{TTFC: 90 * time.Millisecond, RTF: 0.4, BufferWait: 2 * time.Second}}
		if _, _, err := s.Add(e, tone(rate/2+i, float64(i+1)), rate); err != nil {
			t.Fatal(err)
		}
	}

	again, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := again.Entries()
	if len(got) != 3 {
		t.Fatalf("%d entries after reopening, want 3", len(got))
	}
	for i, e := range got {
		if want := texts[2-i]; e.Text != want {
			t.Fatalf("entry %d is %q, want %q (newest first)", i, e.Text, want)
		}
		if e.Voice != "ryan" || e.Stats.BufferWait != 2*time.Second || e.Stats.RTF != 0.4 || e.Samples != int64(rate/2+2-i) {
			t.Fatalf("entry %d lost fields: %+v", i, e)
		}
	}
	// The audio comes back as it went in, to 16-bit precision (FLAC is lossless at 16 bits).
	pcm, sr, err := again.Audio(got[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	want := tone(rate/2, 1)
	if sr != rate || len(pcm) != len(want) {
		t.Fatalf("audio: %d samples at %d Hz, want %d at %d", len(pcm), sr, len(want), rate)
	}
	for i := range want {
		if d := math.Abs(float64(pcm[i] - want[i])); d > 1.0/32767 {
			t.Fatalf("sample %d: %v, want %v", i, pcm[i], want[i])
		}
	}
	if !strings.HasSuffix(again.AudioFile(got[0].ID), ".flac") {
		t.Fatal("audio not kept as FLAC")
	}
	// A FLAC of a half-second tone is much smaller than its 16-bit WAV.
	if got[0].Bytes <= 0 || got[0].Bytes >= int64(rate/2*2) {
		t.Fatalf("entry takes %d bytes on disk", got[0].Bytes)
	}
}

func TestEmptyAudioNotStored(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Add(Entry{Text: "stopped at once", Outcome: "stopped"}, nil, rate); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Add with no audio: %v, want ErrEmpty", err)
	}
	if n := len(s.Entries()); n != 0 {
		t.Fatalf("%d entries, want 0", n)
	}
	files, _ := os.ReadDir(s.Dir())
	if len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

func TestLimitDropsOldestFirst(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	var sizes []int64
	for i := range 5 {
		e, dropped, err := s.Add(Entry{Text: string(rune('a' + i)), Time: base.Add(time.Duration(i) * time.Second)}, tone(rate, float64(i+2)), rate)
		if err != nil || len(dropped) != 0 {
			t.Fatal(err, dropped)
		}
		sizes = append(sizes, e.Bytes)
	}
	if s.Size() != sizes[0]+sizes[1]+sizes[2]+sizes[3]+sizes[4] {
		t.Fatalf("Size %d does not add up %v", s.Size(), sizes)
	}
	// Room for the newest three only.
	dropped, err := s.SetLimit(sizes[2] + sizes[3] + sizes[4])
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 || dropped[0].Text != "a" || dropped[1].Text != "b" {
		t.Fatalf("dropped %+v, want a then b", dropped)
	}
	var texts []string
	for _, e := range s.Entries() {
		texts = append(texts, e.Text)
	}
	if strings.Join(texts, "") != "edc" {
		t.Fatalf("kept %v, want e d c", texts)
	}
	for _, d := range dropped {
		if _, err := os.Stat(filepath.Join(dir, d.ID+".flac")); !os.IsNotExist(err) {
			t.Fatalf("audio of dropped entry %s still on disk", d.Text)
		}
	}
	// The on-disk total really is under the limit.
	var onDisk int64
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		st, _ := f.Info()
		onDisk += st.Size()
	}
	if onDisk != s.Size() || onDisk > sizes[2]+sizes[3]+sizes[4] {
		t.Fatalf("%d bytes on disk, store says %d", onDisk, s.Size())
	}
	// Adding one more drops the oldest kept one; a reopen with a tiny limit
	// keeps only the newest.
	limit := sizes[2] + sizes[3] + sizes[4]
	if _, dropped, err = s.Add(Entry{Text: "f", Time: base.Add(time.Minute)}, tone(rate, 9), rate); err != nil || len(dropped) == 0 || dropped[0].Text != "c" {
		t.Fatalf("Add over the limit dropped %+v, %v; want c first", dropped, err)
	}
	if s.Size() > limit || s.Entries()[0].Text != "f" {
		t.Fatalf("after Add: %d bytes (limit %d), newest %q", s.Size(), limit, s.Entries()[0].Text)
	}
	s2, err := Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if es := s2.Entries(); len(es) != 1 || es[0].Text != "f" {
		t.Fatalf("with a 1-byte limit kept %+v, want only the newest", es)
	}
}

func TestDeleteAndOrphans(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	keep, _, err := s.Add(Entry{Text: "keep"}, tone(1000, 1), rate)
	if err != nil {
		t.Fatal(err)
	}
	gone, _, err := s.Add(Entry{Text: "delete me", Time: keep.Time.Add(time.Second)}, tone(1000, 2), rate)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(gone.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, _, err := s.Audio(gone.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("audio of deleted entry: %v", err)
	}
	// An audio file without a record (a crash mid-Add) and a damaged record
	// are dropped on the next Open; the good entry stays.
	os.WriteFile(filepath.Join(dir, "20990101T000000.000000000-0001.flac"), []byte("orphan"), 0o644)
	os.WriteFile(filepath.Join(dir, "20990101T000000.000000000-0002.json"), []byte("{broken"), 0o644)
	s2, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if es := s2.Entries(); len(es) != 1 || es[0].ID != keep.ID {
		t.Fatalf("after reopen: %+v", es)
	}
	if _, err := os.Stat(filepath.Join(dir, "20990101T000000.000000000-0001.flac")); !os.IsNotExist(err) {
		t.Fatal("orphan audio not removed")
	}
}
