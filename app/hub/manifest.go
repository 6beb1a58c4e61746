package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"talkbox/internal/atomicfile"
)

// manifestName is the small record in each model folder of what was pulled
// and verified, so a second pull need not hash gigabytes again.
const manifestName = ".talkbox-pull.json"

type manifest struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"` // as asked for, e.g. "main"
	Commit   string `json:"commit"`   // what it resolved to
	// Complete is set when every listed file was in place and verified.
	Complete bool                      `json:"complete"`
	Files    map[string]manifestRecord `json:"files"`
	// Total is the byte size of every file of Commit, written before the
	// first byte is fetched, so an interrupted download can say how far it
	// got ("Resume, 73% done") after a restart without asking the Hub.
	Total int64 `json:"total,omitempty"`
}

// manifestRecord describes a verified file. The size and modification time
// tie the record to the bytes on disk: if either changes, the file is hashed
// again before it is trusted.
type manifestRecord struct {
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256,omitempty"`  // LFS files
	BlobID  string `json:"blob_id,omitempty"` // git blob id of small files
	ModTime int64  `json:"mtime_ns"`
}

func readManifest(dir string) (*manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, os.ErrNotExist) {
		return &manifest{Files: map[string]manifestRecord{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, manifestName), err)
	}
	m := &manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		// A damaged record only costs a re-hash; start afresh.
		return &manifest{Files: map[string]manifestRecord{}}, nil
	}
	if m.Files == nil {
		m.Files = map[string]manifestRecord{}
	}
	return m, nil
}

// write replaces the manifest atomically.
func (m *manifest) write(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, manifestName), append(b, '\n'))
}

// matches reports whether the record vouches for the file at path as being
// the expected one, without reading it.
func (r manifestRecord) matches(j fileJob, st os.FileInfo) bool {
	return r.Size == j.Size && st.Size() == j.Size && r.ModTime == st.ModTime().UnixNano() &&
		r.SHA256 == j.SHA256 && (j.SHA256 != "" || r.BlobID == j.BlobID)
}

func recordFor(j fileJob, st os.FileInfo) manifestRecord {
	return manifestRecord{Size: j.Size, SHA256: j.SHA256, BlobID: j.BlobID, ModTime: st.ModTime().UnixNano()}
}

// writeFileAtomic writes path through atomicfile (temporary file, sync,
// rename), naming the file in any error.
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
