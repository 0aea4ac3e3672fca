// Package api is tt-model-server's route table: every endpoint the server
// answers for each model it serves, with its method, path, metrics name and
// a one-line description. It is the one place a route is declared: the
// server builds its dispatch table from it (each model binds a handler to
// every route of its own by name, and the server refuses a route without a
// handler or a handler without a route), GET /info lists it, and the builder
// prints it as the endpoint table of the model card. Adding a route here,
// with its handler, is the whole change for all three.
//
// The package imports nothing but the standard library, so the builder
// (tt-model, built without cgo) reads the same table the server runs.
package api

import (
	"fmt"
	"net/http"
)

// Model kinds the server can serve (tt-model-server --model, a manifest's
// runtime.model).
const (
	KindRFDETR = "rf-detr"
	KindPI05   = "pi05"
)

// Kinds lists the model kinds, in a fixed order.
func Kinds() []string {
	var kinds []string
	for _, t := range modelTables() {
		kinds = append(kinds, t.kind)
	}
	return kinds
}

// Route is one endpoint.
type Route struct {
	Method string // GET, POST, …; a GET route answers HEAD too
	Path   string // exact path, e.g. /predict
	// Name labels the route's metrics and is the key a model binds its
	// handler to, e.g. "predict".
	Name string
	// What says in one line what the route does (the card's "what" column).
	What string
	// Counts marks requests that count as predictions for the server's fault
	// switch.
	Counts bool
	// Stream marks a websocket: its handler serves many requests on one
	// connection, so the server does not hold its one-request-at-a-time lock
	// for it (the model serializes each inference). A Stream route may share
	// its method and path with one plain route: websocket upgrades go to the
	// stream, every other request to the plain route (pi0.5's / is both the
	// console and OpenPI's websocket).
	Stream bool
	// Prefix makes Path a folder: the route answers every path under it that
	// no exact route claims (Path ends in "/").
	Prefix bool
	// Open routes answer without the server's API key (its health checks:
	// probes and supervisors carry no key).
	Open bool
}

// Common are the routes every model's server answers, whatever the model.
func Common() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/health", Name: "health", Open: true, What: "`{\"status\": \"ok\" | \"starting\"}` (pi0.5 also `degraded`, and `hung` with a 503), else 200"},
		{Method: http.MethodGet, Path: "/info", Name: "info", What: "the model, its settings and weights, and this list of routes"},
		{Method: http.MethodGet, Path: "/v1/models", Name: "models", What: "the served model id (OpenAI's list shape)"},
		{Method: http.MethodGet, Path: "/metrics", Name: "metrics", What: "Prometheus metrics: requests by code (499: the client left), latency, stage times, load time; pi0.5 per device"},
		{Method: http.MethodGet, Path: "/", Name: "console", What: "the web console (HTML): status, latency per minute, and a form that tries the model"},
		{Method: http.MethodGet, Path: "/console/status", Name: "console_status", What: "the console's status section alone (HTML), which the page reloads every few seconds"},
		{Method: http.MethodGet, Path: "/console/stats", Name: "console_stats", What: "JSON: uptime, model requests by status code, and per minute over the last hour their p50/p99 latency and mean stage times"},
		{Method: http.MethodGet, Path: "/console/", Name: "console_assets", Prefix: true, What: "files under it: the console's stylesheet, scripts and sample picture, embedded in the binary"},
	}
}

// modelTable is one model kind's routes, beyond Common.
type modelTable struct {
	kind   string
	routes []Route
}

// modelTables are the route tables of the model kinds, in Kinds' order: a model the server
// serves is one entry here (and one in tt-model-server's registry of models).
func modelTables() []modelTable {
	return []modelTable{
		{KindPI05, []Route{
			{Method: http.MethodPost, Path: "/predict", Name: "predict", Counts: true, What: "camera images, prompt and state in (JSON), an action chunk out"},
			{Method: http.MethodPost, Path: "/v1/actions/generations", Name: "actions_generations", Counts: true, What: "SGLang's action API (JSON or msgpack-numpy): observation in, actions out; real-time chunking, prefix cache"},
			{Method: http.MethodGet, Path: "/v1/actions/metadata", Name: "actions_metadata", What: "SGLang's action API metadata: cameras and robot camera keys, image size, state and action dims, horizon, websocket capabilities"},
			{Method: http.MethodGet, Path: "/v1/actions/realtime", Name: "actions_realtime", Stream: true, Counts: true, What: "SGLang's realtime websocket (msgpack): metadata first, one action.generation per request, in order"},
			{Method: http.MethodGet, Path: "/openpi/policy", Name: "openpi_policy", Stream: true, Counts: true, What: "OpenPI's policy websocket (msgpack-numpy): metadata first, observation in, actions out"},
			{Method: http.MethodGet, Path: "/", Name: "openpi_policy_root", Stream: true, Counts: true, What: "the OpenPI policy websocket where stock OpenPI clients connect (ws://host:port)"},
			{Method: http.MethodGet, Path: "/healthz", Name: "openpi_healthz", Open: true, What: "OpenPI's health check: `OK`"},
		}},
		{KindRFDETR, []Route{
			{Method: http.MethodPost, Path: "/predict", Name: "predict", Counts: true, What: "one PNG or JPEG in (base64 JSON, the file as the body, or multipart field `image`), scored boxes with COCO labels out"},
		}},
	}
}

// ModelRoutes are the routes of one model kind, beyond Common; an error for
// a kind this server does not serve.
func ModelRoutes(kind string) ([]Route, error) {
	for _, t := range modelTables() {
		if t.kind == kind {
			return t.routes, nil
		}
	}
	return nil, fmt.Errorf("model %q: the server serves %v", kind, Kinds())
}

// Table is every route the server answers for kind: Common, then the
// model's own, in the order the card lists them.
func Table(kind string) ([]Route, error) {
	own, err := ModelRoutes(kind)
	if err != nil {
		return nil, err
	}
	return append(Common(), own...), nil
}
