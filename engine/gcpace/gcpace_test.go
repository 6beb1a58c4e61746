package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		live, allowance uint64
		want            int
	}{
		{0, 256, 100},            // nothing measured yet: Go's default
		{100, 256, 100},          // a small heap keeps the default
		{1024, 256, 25},          // a quarter of the live heap
		{2560, 256, 10},          // 10%
		{1 << 40, 256 << 20, 10}, // never below the floor
	} {
		if got := Percent(tc.live, tc.allowance); got != tc.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tc.live, tc.allowance, got, tc.want)
		}
	}
}

// TestFitFollowsTheLiveHeap: with a live heap of four allowances, fit sets
// about 25% (the test binary's own heap is small beside 64 MB); GOGC in the
// environment leaves the setting alone.
func TestFitFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const allowance = 16 << 20
	weights := make([]byte, 4*allowance)
	for i := range weights {
		weights[i] = byte(i)
	}
	runtime.GC()
	p := fit(allowance)
	runtime.KeepAlive(weights)
	if p < 20 || p > 25 {
		t.Errorf("Fit with %d MB live = %d%%, want about 25", len(weights)>>20, p)
	}
	if got := debug.SetGCPercent(100); got != p {
		t.Errorf("collector percentage %d, Fit said %d", got, p)
	}
	t.Setenv("GOGC", "50")
	if got := Fit(); got != -1 {
		t.Errorf("Fit with GOGC set = %d, want -1", got)
	}
}
