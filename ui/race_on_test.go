//go:build race

package ui

// slowdown scales the UI tests' time limits: the race detector runs code
// several times slower (make test-race-ui), the limits are for a plain build.
const slowdown = 5
