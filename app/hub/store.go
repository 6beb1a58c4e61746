package hub

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"talkbox/internal/datadir"

	"talkbox/engine/model"
)

// EnvModels overrides the model folder.
const EnvModels = "TALKBOX_MODELS"

// DefaultModelsDir is $TALKBOX_MODELS, else $XDG_DATA_HOME/talkbox/models,
// else ~/.local/share/talkbox/models. A relative XDG_DATA_HOME is ignored,
// as the XDG spec asks.
func DefaultModelsDir() (string, error) { return datadir.Dir(EnvModels, "models") }

// Installed describes one folder of the model store.
type Installed struct {
	Name     string // folder name, <owner>--<name>
	Repo     string // Hub repository, from the manifest or the folder name
	Alias    string // short name when the repository is a known one
	Dir      string
	Size     int64 // bytes of finished files
	Partial  int64 // bytes in .part files waiting to be resumed
	Complete bool  // loads with the speech tokenizer and has the text tokenizer
	Problem  string
	Type     string // tts_model_type, when config.json is readable
	SizeName string // "0.6B" or "1.7B", when config.json is readable
	// Total is the size of the whole download when a pull has started here
	// (from its manifest), else 0; with Size and Partial it gives Percent.
	Total int64
}

// tokenizerFiles are what the text tokenizer is built from; model.Load does
// not open them, so their absence is checked here.
var tokenizerFiles = []string{"vocab.json", "merges.txt", "tokenizer_config.json"}

// List describes every model folder in the store, sorted by name. A missing
// store is an empty list.
func (s *Store) List() ([]Installed, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the model folder: %w", err)
	}
	var out []Installed
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		out = append(out, Inspect(filepath.Join(s.Dir, e.Name())))
	}
	return out, nil
}

// Inspect sizes a model folder and says whether it is ready to use, and if
// not, why.
func Inspect(dir string) Installed {
	in := Installed{Name: filepath.Base(dir), Dir: dir}
	in.Repo, _ = RepoFromDirName(in.Name)
	var partials []string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		switch {
		case strings.HasSuffix(e.Name(), ".part"):
			in.Partial += info.Size()
			rel, _ := filepath.Rel(dir, strings.TrimSuffix(p, ".part"))
			partials = append(partials, filepath.ToSlash(rel))
		case strings.HasPrefix(e.Name(), ".talkbox-pull"):
		default:
			in.Size += info.Size()
		}
		return nil
	})
	man, _ := readManifest(dir)
	if man != nil && man.Repo != "" {
		in.Repo = man.Repo
		in.Total = man.Total
	}
	in.Alias = aliasFor(in.Repo)
	if cfg, err := model.ReadConfig(dir); err == nil {
		in.Type, in.SizeName = cfg.TTSModelType, cfg.SizeName()
	}
	pullHint := "run: talkbox pull " + cmp.Or(in.Alias, in.Repo, in.Name)

	// An unfinished download explains everything else that is missing.
	var problems []string
	if len(partials) > 0 {
		slices.Sort(partials)
		problems = append(problems, fmt.Sprintf("download interrupted (%s of %s received); %s to resume",
			FormatBytes(in.Partial), strings.Join(partials, ", "), pullHint))
	} else if man != nil && man.Repo != "" && !man.Complete {
		problems = append(problems, "download not finished; "+pullHint)
	} else {
		problems = checkModel(dir)
	}
	in.Complete = len(problems) == 0
	in.Problem = strings.Join(problems, "; ")
	return in
}

// checkModel lists what keeps a folder from loading for synthesis.
func checkModel(dir string) []string {
	var problems, missing []string
	for _, f := range tokenizerFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "text tokenizer files missing: "+strings.Join(missing, ", "))
	}
	m, err := model.Load(dir, model.Options{RequireCodec: true})
	if err != nil {
		return append(problems, err.Error())
	}
	m.Close()
	return problems
}

// Resolve is DefaultStore().Resolve(nameOrPath).
func Resolve(nameOrPath string) (string, error) {
	s, err := DefaultStore()
	if err != nil {
		return "", err
	}
	return s.Resolve(nameOrPath)
}

// Resolve turns a --model value into a model folder:
//   - a directory that exists (a path, relative or absolute) is used as is;
//   - otherwise a name: an alias ("0.6b-customvoice"), a repository
//     ("Qwen/Qwen3-TTS-12Hz-0.6B-Base") or a folder name of the store;
//   - "" picks an installed model: the default one when complete, else the
//     only or first complete one.
//
// It does not check completeness of a named model; model.Load says what is
// wrong with it. Not finding one gives ErrNoModel with the installed names
// and the pull command to run.
func (s *Store) Resolve(nameOrPath string) (string, error) {
	v := strings.TrimSpace(nameOrPath)
	if v == "" {
		return s.resolveDefault()
	}
	if strings.HasPrefix(v, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			v = filepath.Join(home, v[2:])
		}
	}
	if st, err := os.Stat(v); err == nil && st.IsDir() {
		return filepath.Abs(v)
	}
	if filepath.IsAbs(v) || strings.HasPrefix(v, ".") || strings.HasPrefix(nameOrPath, "~") {
		return "", fmt.Errorf("%w: model folder %s does not exist", ErrNoModel, v)
	}
	if repo, err := ParseRepo(v); err == nil {
		dir := s.ModelDir(repo)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir, nil
		}
	}
	// A folder name, or a repository under another spelling.
	installed, _ := s.List()
	for _, in := range installed {
		if strings.EqualFold(in.Name, v) || strings.EqualFold(in.Repo, v) {
			return in.Dir, nil
		}
	}
	return "", s.notFound(v, installed)
}

func (s *Store) resolveDefault() (string, error) {
	installed, err := s.List()
	if err != nil {
		return "", err
	}
	var firstComplete string
	for _, in := range installed {
		if !in.Complete {
			continue
		}
		if strings.EqualFold(in.Repo, DefaultRepo) {
			return in.Dir, nil
		}
		if firstComplete == "" {
			firstComplete = in.Dir
		}
	}
	if firstComplete != "" {
		return firstComplete, nil
	}
	return "", s.notFound("", installed)
}

func (s *Store) notFound(name string, installed []Installed) error {
	var names []string
	for _, in := range installed {
		n := cmp.Or(in.Alias, in.Repo, in.Name)
		if !in.Complete {
			n += " (incomplete)"
		}
		names = append(names, n)
	}
	have := "no models are installed in " + s.Dir
	if len(names) > 0 {
		have = "installed in " + s.Dir + ": " + strings.Join(names, ", ")
	}
	if name == "" {
		return fmt.Errorf("%w: no complete model; %s; get one with: talkbox pull", ErrNoModel, have)
	}
	hint := "give a model folder, or one of the names above"
	if repo, err := ParseRepo(name); err == nil {
		hint = "download it with: talkbox pull " + cmp.Or(aliasFor(repo), repo)
	}
	return fmt.Errorf("%w: %q is neither a folder nor an installed model; %s; %s", ErrNoModel, name, have, hint)
}
