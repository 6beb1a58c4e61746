//go:build talkbox_engine

// Wiring of the real engine into the window. It is behind the talkbox_engine
// tag until engine.Open lands in the root package; then the lead drops the
// tag so the default build loads real models.
package main

import (
	"talkbox/engine"
	"talkbox/ui"
)

func init() {
	openRealEngine = func(dir string) (ui.Engine, error) {
		e, err := engine.Open(dir, engine.Options{})
		if err != nil {
			return nil, err
		}
		return realEngine{e}, nil
	}
}

// realEngine adapts *engine.Engine to ui.Engine; only Voices differs.
type realEngine struct{ *engine.Engine }

func (r realEngine) Voices() []ui.Voice {
	vs := r.Engine.Voices()
	out := make([]ui.Voice, len(vs))
	for i, v := range vs {
		out[i] = ui.Voice{Name: v.Name, Description: v.Description, Dialect: v.Dialect}
	}
	return out
}
