//go:build !race

package ui

// slowdown scales the UI tests' time limits (see race_on_test.go).
const slowdown = 1
