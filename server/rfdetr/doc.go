// Package rfdetr is RF-DETR's HTTP layer in tt-model-server: the original package's POST
// /predict (a picture as base64 JSON, as the body, or as a multipart field), validated as FastAPI
// validates it, run one forward at a time on the network models/rfdetr builds. Model plugs into
// the server core (package server) as a server.Model; its route is the rf-detr table of
// server/api, bound by name. What it shares with other models (bodies read into the memory
// budget, errors, the environment report, metrics) it takes from package server.
//
// The package imports models/rfdetr under the same name, as html/template imports text/template:
// in this package rfdetr.X is always the model's code.
package rfdetr
