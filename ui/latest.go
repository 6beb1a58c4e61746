package ui

import "sync"

// latestOnly hands reports from a worker goroutine (a download, an export)
// to the UI goroutine: only the newest report is kept and at most one post
// is queued at a time, so a fast worker cannot flood the UI queue.
type latestOnly[T any] struct {
	mu     sync.Mutex
	latest T
	queued bool
}

// offer keeps v as the newest report and, unless a post is already queued,
// posts show, which runs on the UI goroutine with the newest report then.
func (l *latestOnly[T]) offer(v T, post func(func()), show func(T)) {
	l.mu.Lock()
	l.latest = v
	queued := l.queued
	l.queued = true
	l.mu.Unlock()
	if queued {
		return
	}
	post(func() {
		l.mu.Lock()
		v := l.latest
		l.queued = false
		l.mu.Unlock()
		show(v)
	})
}
