package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A download interrupted in one run is listed after a "restart" (a new Store
// on the same folder, no Hub contact) with how far it got, and the next pull
// fetches only the rest.
func TestManagerResumeAfterRestart(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	const big = "model.safetensors"
	const cut = 3_000_000
	h.DropAfter(big, cut)
	if _, err := s.Pull(context.Background(), "0.6b-customvoice", nil); err == nil {
		t.Fatal("the dropped pull succeeded")
	}

	restarted := &Store{Dir: s.Dir, Client: s.Client}
	list, err := restarted.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List after restart: %v, %+v", err, list)
	}
	in := list[0]
	if in.Complete || in.Total != h.TotalSize() {
		t.Fatalf("interrupted model: complete=%v total=%d, want incomplete with total %d", in.Complete, in.Total, h.TotalSize())
	}
	pct, ok := in.Percent()
	var before int64
	for p, f := range h.Files {
		if p != big && int64(len(f.Data)) <= int64(len(h.Files[big].Data)) {
			before += int64(len(f.Data)) // pulled smallest first, so these landed
		}
	}
	want := int((before + cut) * 100 / h.TotalSize())
	if !ok || pct != want {
		t.Fatalf("Percent = %d, %v; want %d", pct, ok, want)
	}
	if in.DisplayName() != "Qwen3-TTS 0.6B CustomVoice" {
		t.Fatalf("DisplayName = %q", in.DisplayName())
	}

	plan, err := restarted.Plan(context.Background(), in.Repo)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Total != h.TotalSize() || plan.Need != h.TotalSize()-before-cut || !plan.Fits() {
		t.Fatalf("plan %+v: want total %d, need %d", plan, h.TotalSize(), h.TotalSize()-before-cut)
	}

	h.ResetCounts()
	if _, err := restarted.Pull(context.Background(), in.Repo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, in.Dir)
	if got, size := h.Served(big), int64(len(h.Files[big].Data)); got != size-cut {
		t.Fatalf("resume after restart fetched %d bytes of %s, want %d", got, big, size-cut)
	}
	done := Inspect(in.Dir)
	if !done.Complete {
		t.Fatalf("after resume: %+v", done)
	}
	if pct, ok := done.Percent(); !ok || pct != 100 {
		t.Fatalf("complete model Percent = %d, %v", pct, ok)
	}
}

func TestManagerPlanRefusesShortDisk(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	s.freeSpace = func(string) (int64, bool) { return 1000, true }
	plan, err := s.Plan(context.Background(), "0.6b-customvoice")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Fits() || plan.Need != h.TotalSize() || plan.Free != 1000 {
		t.Fatalf("plan %+v should not fit", plan)
	}
	if msg := plan.Shortfall(); !strings.Contains(msg, "only "+FormatBytes(1000)+" is free") {
		t.Fatalf("shortfall message %q", msg)
	}
	if len(h.FileRequests()) != 0 {
		t.Fatal("Plan downloaded files")
	}
	if _, err := os.Stat(s.ModelDir(testRepo)); err == nil {
		t.Fatal("Plan created the model folder")
	}
}

func TestManagerDelete(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	dir, err := s.Pull(context.Background(), testRepo, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Outside the store: refused, nothing removed.
	other := t.TempDir()
	if err := s.Delete(other); err == nil {
		t.Fatal("Delete of a folder outside the store succeeded")
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("folder outside the store was removed")
	}
	// While a pull holds the folder: refused.
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(dir); !errors.Is(err, ErrBusy) {
		t.Fatalf("Delete during a pull: %v, want ErrBusy", err)
	}
	unlock()
	if err := s.Delete(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("model folder still there: %v", err)
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 0 {
		t.Fatalf("store not empty after delete: %v", entries)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("List after delete: %+v", list)
	}
	// A partial download deletes too.
	h.DropAfter("model.safetensors", 1_000_000)
	if _, err := s.Pull(context.Background(), testRepo, nil); err == nil {
		t.Fatal("dropped pull succeeded")
	}
	if err := s.Delete(filepath.Join(s.Dir, DirName(testRepo))); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("partial model still listed: %+v", list)
	}
}

func TestDisplayNames(t *testing.T) {
	for repo, want := range map[string]string{
		"Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign": "Qwen3-TTS 1.7B VoiceDesign",
		"qwen/qwen3-tts-12hz-0.6b-base":        "Qwen3-TTS 0.6B Base",
		"someone/finetune":                     "someone/finetune",
		"":                                     "my-folder",
	} {
		if got := DisplayName(repo, "my-folder"); got != want {
			t.Errorf("DisplayName(%q) = %q, want %q", repo, got, want)
		}
	}
	if TypeLabel("custom_voice") != "preset voices" || TypeLabel("voice_design") != "voice design" || TypeLabel("base") != "voice clone" {
		t.Error("TypeLabel wording")
	}
}
