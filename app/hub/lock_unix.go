//go:build unix

package hub

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockName is the lock file in a model folder. The lock is advisory (flock):
// the kernel drops it when the process dies, so a crash never leaves a stale lock.
const lockName = ".talkbox-pull.lock"

// lockDir takes the model folder's lock without waiting.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// diskFree is the space an unprivileged user may still write under dir.
func diskFree(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
