package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopSignals are the signals that end a verb cleanly: Ctrl-C, a terminal
// hang-up and a polite kill all cancel the work so temporary files are
// removed and nothing half-written is left behind.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// signalContext is cancelled when one of stopSignals arrives; stop restores
// the default handling (a second signal then ends the program at once).
func signalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, stopSignals...)
}
