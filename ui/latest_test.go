package ui

import "testing"

// TestLatestOnlyCoalesces: reports offered while a post is queued give one
// post, which shows the newest; a report after it runs posts again.
func TestLatestOnlyCoalesces(t *testing.T) {
	var l latestOnly[int]
	var queue []func()
	post := func(f func()) { queue = append(queue, f) }
	var shown []int
	show := func(v int) { shown = append(shown, v) }
	for v := 1; v <= 3; v++ {
		l.offer(v, post, show)
	}
	if len(queue) != 1 {
		t.Fatalf("%d posts queued for 3 reports, want 1", len(queue))
	}
	queue[0]()
	l.offer(4, post, show)
	if len(queue) != 2 {
		t.Fatalf("report after the post ran: %d posts, want 2", len(queue))
	}
	queue[1]()
	if len(shown) != 2 || shown[0] != 3 || shown[1] != 4 {
		t.Errorf("shown %v, want [3 4]", shown)
	}
}
