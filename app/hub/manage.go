package hub

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"talkbox/engine/model"
)

// DisplayName is the one name a model is shown under everywhere (the
// window's picker, the Models dialog, `talkbox models`): "Qwen3-TTS 0.6B
// CustomVoice" for the known releases, else the repository id, else the
// folder name.
func DisplayName(repo, folder string) string {
	for _, k := range Known {
		if strings.EqualFold(k.Repo, repo) {
			return k.DisplayName()
		}
	}
	return cmp.Or(repo, folder)
}

// DisplayName is "Qwen3-TTS 0.6B CustomVoice" for
// "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice".
func (k KnownModel) DisplayName() string {
	_, short, _ := strings.Cut(k.Repo, "/")
	rest := strings.TrimPrefix(short, "Qwen3-TTS-12Hz-")
	return "Qwen3-TTS " + strings.ReplaceAll(rest, "-", " ")
}

// DisplayName is the installed model's shown name.
func (in Installed) DisplayName() string { return DisplayName(in.Repo, in.Name) }

// TypeLabel says in words what a model type does: "preset voices",
// "voice design" or "voice clone"; "" when unknown.
func TypeLabel(ttsModelType string) string {
	switch ttsModelType {
	case model.TypeCustomVoice:
		return "preset voices"
	case model.TypeVoiceDesign:
		return "voice design"
	case model.TypeBase:
		return "voice clone"
	}
	return ""
}

// Percent is how much of an unfinished download is on disk, 0-100; ok is
// false when the folder does not record the download's total size.
func (in Installed) Percent() (pct int, ok bool) {
	if in.Total <= 0 {
		return 0, false
	}
	have := min(in.Size+in.Partial, in.Total)
	return int(have * 100 / in.Total), true
}

// Plan is what a download would take, shown before it starts.
type Plan struct {
	Repo      string
	Total     int64 // bytes of every file of the model
	Need      int64 // bytes still to fetch (Total less what is on disk)
	Free      int64 // bytes free where the model goes
	FreeKnown bool
}

// Fits reports whether the download fits the free space (true when the free
// space cannot be measured: the pull then fails on a full disk instead).
func (p Plan) Fits() bool { return !p.FreeKnown || p.Free >= p.Need }

// Shortfall is a sentence saying why the download cannot start, or "".
func (p Plan) Shortfall() string {
	if p.Fits() {
		return ""
	}
	return fmt.Sprintf("%s needs %s more disk space, but only %s is free: free %s first",
		DisplayName(p.Repo, ""), FormatBytes(p.Need), FormatBytes(p.Free), FormatBytes(p.Need-p.Free))
}

// Plan asks the Hub for name's file list and measures what is already in
// the store and the free disk space, without writing anything.
func (s *Store) Plan(ctx context.Context, name string) (Plan, error) {
	repo, err := ParseRepo(name)
	if err != nil {
		return Plan{}, err
	}
	info, err := s.Client.Info(ctx, repo, cmp.Or(s.Revision, "main"))
	if err != nil {
		return Plan{}, err
	}
	jobs, err := jobsFrom(info)
	if err != nil {
		return Plan{}, fmt.Errorf("%s: %w", repo, err)
	}
	p := Plan{Repo: repo}
	for _, j := range jobs {
		p.Total += j.Size
	}
	dir := s.ModelDir(repo)
	p.Need = stillNeeded(dir, jobs)
	p.Free, p.FreeKnown = s.free(dir)
	return p, nil
}

// Delete removes an installed model's folder (complete or not). It refuses
// a folder outside the store and one that a pull is writing into.
func (s *Store) Delete(dir string) error {
	store, err := filepath.Abs(s.Dir)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if filepath.Dir(abs) != store || strings.HasPrefix(filepath.Base(abs), ".") {
		return fmt.Errorf("%s is not a model folder of %s; not deleting it", dir, s.Dir)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("deleting model: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a model folder; not deleting it", dir)
	}
	unlock, err := lockDir(abs)
	if err != nil {
		return fmt.Errorf("%w: a download is writing into %s; cancel it first: %v", ErrBusy, abs, err)
	}
	// Move it out of the store's listing first, so a crash halfway through
	// deleting gigabytes never leaves a half model that looks installed.
	trash := filepath.Join(store, ".deleting-"+filepath.Base(abs))
	os.RemoveAll(trash)
	err = os.Rename(abs, trash)
	unlock()
	if err != nil {
		return fmt.Errorf("deleting model: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("deleting model: %w", err)
	}
	return nil
}
