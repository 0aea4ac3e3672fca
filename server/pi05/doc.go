// Package pi05 is pi0.5's HTTP layer in tt-model-server: the original package's POST /predict,
// SGLang's action API (JSON or msgpack-numpy, and its realtime websocket) and OpenPI's policy
// websocket, on the serving engine of models/pi05/serving. Model plugs into the server core
// (package server) as a server.Model; its routes are the pi05 table of server/api, bound by name.
// The core knows no model: what this package shares with other models (bodies read into the
// memory budget, errors, the environment report, metrics) it takes from package server.
//
// The package imports models/pi05 under the same name, as html/template imports text/template:
// in this package pi05.X is always the model's code.
package pi05
