//go:build !unix

package hub

const lockName = ".talkbox-pull.lock"

// lockDir is a no-op where flock is missing; concurrent pulls of one model
// then race on the .part files.
func lockDir(dir string) (unlock func(), err error) { return func() {}, nil }

// diskFree is unknown here; the pull fails on ENOSPC instead of up front.
func diskFree(dir string) (int64, bool) { return 0, false }
