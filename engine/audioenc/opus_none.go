//go:build noopus

package audioenc

import "io"

// The noopus build (for hosts without libopus and libopusfile, e.g. GPU
// benchmark machines) has every format but Opus.

func newOpus(io.Writer, int) (Encoder, error) { return nil, ErrNoOpus }

func decodeOpus([]byte) (Decoded, error) { return Decoded{}, ErrNoOpus }
