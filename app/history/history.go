// Package history keeps every utterance the window spoke on disk: its text,
// the settings it was spoken with, its figures and its audio as FLAC (lossless,
// so a replay or a "Save as" is the audio that was heard, about half the size
// of WAV). Entries list newest first across restarts; the folder stays under
// a size limit by dropping the oldest entries.
//
// Each entry is two files, <id>.flac then <id>.json, both written atomically:
// the record is written last, so an entry exists only once its audio is
// complete, and a crash between the two leaves an orphan audio file that
// Open removes.
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"talkbox/internal/datadir"
	"time"

	"talkbox/engine/audioenc"
	"talkbox/internal/atomicfile"
)

// ErrEmpty is returned by Add for an utterance without audio (stopped before
// its first chunk): nothing worth replaying, so nothing is stored.
var ErrEmpty = errors.New("history: no audio to keep")

// ErrNotFound is returned for an id the store does not hold.
var ErrNotFound = errors.New("history: no such entry")

// audioFormat is how entries keep their audio.
const audioFormat = audioenc.FLAC

const (
	recordExt = ".json"
	audioExt  = ".flac"
)

// Stats are the figures shown with an entry.
type Stats struct {
	TTFC       time.Duration `json:"ttfc_ns"`        // -1: no chunk arrived
	FirstSound time.Duration `json:"first_sound_ns"` // -1: nothing was played
	// RTF is synthesis time over audio time; BufferWait is the time the
	// generator spent waiting on a full playback buffer, not counted in RTF.
	RTF        float64       `json:"rtf"`
	BufferWait time.Duration `json:"buffer_wait_ns"`
	FramesPerS float64       `json:"frames_per_s"`
	Underruns  uint64        `json:"underruns"`
	Silent     time.Duration `json:"silent_ns"`
}

// Entry is one kept utterance.
type Entry struct {
	ID       string    `json:"id"`
	Time     time.Time `json:"time"`
	Text     string    `json:"text"`
	Model    string    `json:"model,omitempty"`     // display name
	ModelDir string    `json:"model_dir,omitempty"` // folder it was loaded from
	Voice    string    `json:"voice,omitempty"`
	Language string    `json:"language,omitempty"`
	Instruct string    `json:"instruct,omitempty"`
	Seed     uint64    `json:"seed"`
	Outcome  string    `json:"outcome"` // "done", "stopped" or "failed"
	Stats    Stats     `json:"stats"`

	SampleRate int   `json:"sample_rate"`
	Samples    int64 `json:"samples"`
	Bytes      int64 `json:"bytes"` // both files on disk
}

// Duration is the length of the kept audio.
func (e Entry) Duration() time.Duration {
	if e.SampleRate <= 0 {
		return 0
	}
	return time.Duration(float64(e.Samples) / float64(e.SampleRate) * float64(time.Second))
}

// Store is one history folder. Its methods are safe for concurrent use; Add
// and Audio do file work and belong on a background goroutine.
type Store struct {
	dir string

	mu      sync.Mutex
	limit   int64
	entries []Entry // newest first
	seq     int
}

// EnvHistory overrides the history folder.
const EnvHistory = "TALKBOX_HISTORY"

// DefaultDir is $TALKBOX_HISTORY, else $XDG_DATA_HOME/talkbox/history, else
// ~/.local/share/talkbox/history (beside the model store: data, not settings).
func DefaultDir() (string, error) { return datadir.Dir(EnvHistory, "history") }

// Open reads the folder (creating it), drops records whose audio is gone and
// audio without a record, and applies limit (bytes; <= 0 means no limit).
// Damaged records are skipped, not fatal: the history is a convenience.
func Open(dir string, limit int64) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("history folder: %w", err)
	}
	s := &Store{dir: dir, limit: limit}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("history folder: %w", err)
	}
	records := map[string]bool{}
	for _, n := range names {
		name := n.Name()
		if !strings.HasSuffix(name, recordExt) || strings.HasPrefix(name, ".") {
			continue
		}
		id := strings.TrimSuffix(name, recordExt)
		e, err := s.readRecord(id)
		if err != nil {
			continue
		}
		if _, err := os.Stat(s.audioPath(id)); err != nil {
			os.Remove(s.recordPath(id))
			continue
		}
		records[id] = true
		s.entries = append(s.entries, e)
	}
	for _, n := range names {
		name := n.Name()
		if strings.HasSuffix(name, audioExt) && !strings.HasPrefix(name, ".") && !records[strings.TrimSuffix(name, audioExt)] {
			os.Remove(filepath.Join(dir, name)) // a crash between the audio and its record
		}
	}
	slices.SortFunc(s.entries, newestFirst)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.enforceLocked()
	return s, err
}

func newestFirst(a, b Entry) int {
	if c := b.Time.Compare(a.Time); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

func (s *Store) readRecord(id string) (Entry, error) {
	b, err := os.ReadFile(s.recordPath(id))
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, err
	}
	if e.ID != id {
		return Entry{}, fmt.Errorf("record %s names %s", id, e.ID)
	}
	return e, nil
}

// Dir is the history folder.
func (s *Store) Dir() string { return s.dir }

func (s *Store) recordPath(id string) string { return filepath.Join(s.dir, id+recordExt) }
func (s *Store) audioPath(id string) string  { return filepath.Join(s.dir, id+audioExt) }

// Entries lists the kept utterances, newest first (a copy).
func (s *Store) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// Size is the bytes the history takes on disk.
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, e := range s.entries {
		n += e.Bytes
	}
	return n
}

// Add keeps an utterance: e's descriptive fields and pcm (mono, at
// sampleRate). It fills ID, Time (when zero), SampleRate, Samples and Bytes,
// and returns the stored entry and the entries dropped to stay under the
// limit. Empty audio gives ErrEmpty and stores nothing.
func (s *Store) Add(e Entry, pcm []float32, sampleRate int) (Entry, []Entry, error) {
	if len(pcm) == 0 {
		return Entry{}, nil, ErrEmpty
	}
	if sampleRate <= 0 {
		return Entry{}, nil, fmt.Errorf("history: sample rate %d", sampleRate)
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	s.mu.Lock()
	s.seq++
	e.ID = fmt.Sprintf("%s-%04d", e.Time.UTC().Format("20060102T150405.000000000"), s.seq%10000)
	s.mu.Unlock()
	e.SampleRate, e.Samples = sampleRate, int64(len(pcm))

	audioBytes, err := writeAudio(s.audioPath(e.ID), pcm, sampleRate)
	if err != nil {
		return Entry{}, nil, err
	}
	// Bytes counts the record too, whose length depends on Bytes: repeat
	// until the figure stops changing (twice at most in practice).
	var rec []byte
	e.Bytes = audioBytes
	for range 4 {
		if rec, err = json.MarshalIndent(e, "", "  "); err != nil {
			break
		}
		n := audioBytes + int64(len(rec)) + 1 // + the trailing newline
		if n == e.Bytes {
			break
		}
		e.Bytes = n
	}
	if err == nil {
		err = atomicfile.WriteFile(s.recordPath(e.ID), append(rec, '\n'), 0o644)
	}
	if err != nil {
		os.Remove(s.audioPath(e.ID))
		return Entry{}, nil, fmt.Errorf("history: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, e)
	slices.SortFunc(s.entries, newestFirst)
	dropped, err := s.enforceLocked()
	return e, dropped, err
}

// writeAudio encodes pcm into path atomically and returns its size.
func writeAudio(path string, pcm []float32, sampleRate int) (int64, error) {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	enc, err := audioenc.New(f, audioFormat, sampleRate)
	if err == nil {
		err = enc.Write(pcm)
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		f.Abort()
		return 0, fmt.Errorf("history: encoding audio: %w", err)
	}
	if err := f.Commit(); err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	return st.Size(), nil
}

// SetLimit changes the size limit (bytes; <= 0: none) and drops the oldest
// entries that no longer fit.
func (s *Store) SetLimit(limit int64) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = limit
	return s.enforceLocked()
}

// enforceLocked drops the oldest entries until the total fits the limit.
// The newest entry is always kept, even alone over the limit, so what was
// just spoken can still be replayed and saved.
func (s *Store) enforceLocked() ([]Entry, error) {
	if s.limit <= 0 {
		return nil, nil
	}
	var total int64
	for _, e := range s.entries {
		total += e.Bytes
	}
	var dropped []Entry
	var errs []error
	for total > s.limit && len(s.entries) > 1 {
		old := s.entries[len(s.entries)-1]
		if err := s.removeFiles(old.ID); err != nil {
			errs = append(errs, err)
			break
		}
		s.entries = s.entries[:len(s.entries)-1]
		total -= old.Bytes
		dropped = append(dropped, old)
	}
	return dropped, errors.Join(errs...)
}

// removeFiles deletes an entry's record, then its audio (the record first,
// so a crash in between leaves an orphan that Open cleans up, never a record
// without audio).
func (s *Store) removeFiles(id string) error {
	if err := os.Remove(s.recordPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("history: %w", err)
	}
	if err := os.Remove(s.audioPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// Delete removes one entry.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.entries, func(e Entry) bool { return e.ID == id })
	if i < 0 {
		return ErrNotFound
	}
	if err := s.removeFiles(id); err != nil {
		return err
	}
	s.entries = slices.Delete(s.entries, i, i+1)
	return nil
}

// Get returns the entry with id.
func (s *Store) Get(id string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// Audio decodes an entry's audio for replay or export.
func (s *Store) Audio(id string) ([]float32, int, error) {
	if _, ok := s.Get(id); !ok {
		return nil, 0, ErrNotFound
	}
	b, err := os.ReadFile(s.audioPath(id))
	if err != nil {
		return nil, 0, fmt.Errorf("history: %w", err)
	}
	d, err := audioenc.Decode(b, audioFormat)
	if err != nil {
		return nil, 0, fmt.Errorf("history: %s: %w", s.audioPath(id), err)
	}
	return d.PCM, d.SampleRate, nil
}

// AudioFile is the path of an entry's FLAC file (a "Save as" FLAC copies it).
func (s *Store) AudioFile(id string) string { return s.audioPath(id) }
