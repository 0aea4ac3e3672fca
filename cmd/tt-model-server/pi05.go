package main

import (
	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/models/pi05/pi05native"
	"github.com/ttmodel/tt-model/native"
	"github.com/ttmodel/tt-model/server"
)

// pi05Model builds the pi0.5 policy server from PI05_*, TT_*, HF_MODEL and TT_WEIGHTS_REVISION,
// on the native kernels at precision; a bad setting is an error naming the variable (exit 2).
func pi05Model(env environment, precision native.Precision, fault server.Fault) (server.Model, error) {
	return server.NewPI05(server.PI05Options{
		Getenv:    env.get,
		Environ:   env.list,
		Build:     pi05native.Builder(pi05native.Options{Precision: precision}),
		Precision: string(precision),
		Fault:     fault,
		Version:   version.Version,
	})
}
