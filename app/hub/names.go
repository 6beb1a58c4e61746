package hub

import (
	"fmt"
	"regexp"
	"strings"
)

// KnownModel is a Qwen3-TTS-12Hz release Talkbox can run.
type KnownModel struct {
	Repo  string // Hugging Face repository id
	Alias string // short name accepted by pull and --model
	About string // one line for listings
}

// Known lists the released Qwen3-TTS-12Hz checkpoints, default first.
var Known = []KnownModel{
	{"Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", "0.6b-customvoice", "CustomVoice: 9 ready-made voices; 0.6B, the fastest"},
	{"Qwen/Qwen3-TTS-12Hz-0.6B-Base", "0.6b-base", "Base: clone your own voice from a short recording; 0.6B"},
	{"Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "1.7b-customvoice", "CustomVoice: 9 ready-made voices with speaking styles; 1.7B"},
	{"Qwen/Qwen3-TTS-12Hz-1.7B-Base", "1.7b-base", "Base: clone your own voice from a short recording; 1.7B"},
	{"Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign", "1.7b-voicedesign", "VoiceDesign: a new voice described in words; 1.7B"},
}

// DefaultRepo is what `talkbox pull` fetches without an argument.
const DefaultRepo = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"

// extraAliases are shorthands beyond KnownModel.Alias: a bare size means the
// CustomVoice model of that size, the one that speaks without a reference clip.
var extraAliases = map[string]string{
	"0.6b": "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
	"1.7b": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
}

// repoIDPattern is the shape of a Hub model id, owner/name. The Hub's own rules
// are stricter; this only keeps path tricks ("..", extra slashes) out.
var repoIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ParseRepo turns a user's model name into a Hub repository id. It accepts a
// known alias ("0.6b-customvoice", "1.7b"), a known repository in any letter
// case or without its owner ("qwen3-tts-12hz-0.6b-base"), or any other
// "owner/name" id, which passes through unchanged.
func ParseRepo(name string) (string, error) {
	s := strings.TrimSpace(name)
	if s == "" {
		return DefaultRepo, nil
	}
	lower := strings.ToLower(s)
	if repo, ok := extraAliases[lower]; ok {
		return repo, nil
	}
	for _, k := range Known {
		repoLower := strings.ToLower(k.Repo)
		_, short, _ := strings.Cut(repoLower, "/")
		if lower == k.Alias || lower == repoLower || lower == short || lower == strings.ToLower(DirName(k.Repo)) {
			return k.Repo, nil
		}
		// "0.6B-CustomVoice" as printed in the model card tables.
		if strings.TrimPrefix(short, "qwen3-tts-12hz-") == lower {
			return k.Repo, nil
		}
	}
	if repoIDPattern.MatchString(s) && !strings.Contains(s, "..") {
		return s, nil
	}
	return "", fmt.Errorf("unknown model %q: give a Hub repository (owner/name) or one of: %s", name, KnownNames())
}

// KnownNames lists the aliases for messages.
func KnownNames() string {
	names := make([]string, len(Known))
	for i, k := range Known {
		names[i] = k.Alias
	}
	return strings.Join(names, ", ")
}

// DirName is the folder a repository is pulled into: "owner--name", the
// separator Hugging Face's own cache uses, so one folder level holds them all.
func DirName(repo string) string { return strings.ReplaceAll(repo, "/", "--") }

// RepoFromDirName inverts DirName; ok is false for folders not named that way.
func RepoFromDirName(dir string) (repo string, ok bool) {
	owner, name, found := strings.Cut(dir, "--")
	if !found || owner == "" || name == "" {
		return "", false
	}
	return owner + "/" + name, true
}

// aliasFor returns the short alias of a known repository, or "".
func aliasFor(repo string) string {
	for _, k := range Known {
		if strings.EqualFold(k.Repo, repo) {
			return k.Alias
		}
	}
	return ""
}
