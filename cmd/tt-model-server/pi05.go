package main

import (
	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/server"
)

// pi05Model builds the pi0.5 policy server from PI05_*, HF_MODEL, TT_WEIGHTS_REVISION and
// PI05_PRECISION; a bad setting is an error naming the variable (exit 2).
func pi05Model(getenv func(string) string) (server.Model, error) {
	return server.NewPI05(server.PI05Options{Getenv: getenv, Version: version.Version})
}
