package prompt

import "errors"

// Sentinel errors; every error the builder returns wraps one of these (or
// model.ErrIncompleteCheckpoint from New) and names the offending value.
var (
	ErrUnknownVoice    = errors.New("unknown voice")
	ErrUnknownLanguage = errors.New("unknown language")
	ErrUnsupported     = errors.New("not supported by this model")
	ErrEmptyText       = errors.New("empty text")
)
