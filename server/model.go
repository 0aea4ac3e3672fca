// Package server is the model server's HTTP core, shared by every model:
// /health, /info, /v1/models and /metrics (api.Common), the web console's shell, bounded body
// reading inside a request memory budget, per-request panic recovery, JSON errors in FastAPI's
// shape ({"detail": …}), the API key, the test-only fault switch, the start report of the
// environment, and graceful shutdown. It knows no model: each model's HTTP layer is a package of
// its own (server/pi05, server/rfdetr) that plugs in through the Model interface and binds its
// handlers to its kind's route table (BindRoutes); none of them is imported here.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttmodel/tt-model/server/api"
)

// Model is one servable model. The server calls Load once, in the
// background, while /health says "starting" and model routes answer 503;
// after Load returns nil the routes are live.
type Model interface {
	// Name is the display name /health reports, e.g. "RF-DETR-base".
	Name() string
	// Load reads the weights, builds the program and warms it up.
	Load(ctx context.Context, log *slog.Logger) error
	// Device describes where inference runs; "" until loaded.
	Device() string
	// Info is the body of GET /info; it is called while starting too. The
	// server adds "routes": the routes it answers.
	Info() map[string]any
	// ModelCards lists what GET /v1/models reports.
	ModelCards() []ModelCard
	// Routes are the model's own endpoints: a served model's come from its
	// kind's route table (BindRoutes). Their handlers run only once the
	// model is loaded, concurrently: a model serialises (or schedules) its
	// own device use, after a request's body has been read and checked.
	Routes() []Route
	// Close releases the model at shutdown.
	Close() error
}

// ModelCard is one entry of GET /v1/models (OpenAI's list shape).
type ModelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	OwnedBy string `json:"owned_by"`
}

// Route is one model endpoint: its declaration in the route table (package
// api) and the handler that serves it.
type Route struct {
	api.Route
	Handler RouteHandler
}

// PredictionCounter is the Recorder a Stream route's handler gets: each request it answers on its
// connection counts as a prediction for the exit fault switch, as an HTTP request does.
type PredictionCounter interface {
	Recorder
	Predicted()
}

// MetricsSource is a Model with series of its own for /metrics (e.g. a cache's hits).
type MetricsSource interface {
	Collectors() []prometheus.Collector
}

// RouteHandler serves one model route; rec takes the request's stage times.
type RouteHandler func(w http.ResponseWriter, r *http.Request, rec Recorder)

// BindRoutes pairs every route of kind's table (api.ModelRoutes) with the
// handler of the same name. A route without a handler, or a handler without
// a route, is a programming error that would make the card and /info list
// something the server does not serve (or hide something it does): it
// panics, so any test that builds the model fails.
func BindRoutes(kind string, handlers map[string]RouteHandler) []Route {
	table, err := api.ModelRoutes(kind)
	if err != nil {
		panic(err)
	}
	routes, err := bind(table, handlers)
	if err != nil {
		panic(fmt.Sprintf("server: %s: %v", kind, err))
	}
	return routes
}

// bind pairs each route of table with handlers[route.Name]; every handler
// must be used.
func bind(table []api.Route, handlers map[string]RouteHandler) ([]Route, error) {
	var routes []Route
	used := map[string]bool{}
	for _, r := range table {
		h := handlers[r.Name]
		if h == nil {
			return nil, fmt.Errorf("route %s %s (%s) has no handler", r.Method, r.Path, r.Name)
		}
		used[r.Name] = true
		routes = append(routes, Route{Route: r, Handler: h})
	}
	for name := range handlers {
		if !used[name] {
			return nil, fmt.Errorf("handler %q serves no route of the table", name)
		}
	}
	return routes, nil
}

// Recorder lets a handler report where its time went (the stage histogram
// of /metrics).
type Recorder interface {
	Stage(name string, d time.Duration)
}

// NativeMemory is a model whose program holds memory outside the Go heap (packed weights, scratch
// of the C kernels): NativeBytes says how much, once loaded.
type NativeMemory interface {
	NativeBytes() int64
}

// TestWeightsReporter is a model that can tell it was loaded from generated test weights (a random
// checkpoint standing in for the repo, hub.TestWeightsIn): TestWeights is the notice /health,
// /info and the console carry, "" for real weights or before the weights are found.
type TestWeightsReporter interface {
	TestWeights() string
}

// HealthReporter is a model whose devices can fail: /health reports
// Health() ("ok", "degraded" or "hung"; hung answers 503) once loaded, with
// HealthDetail's keys added.
type HealthReporter interface {
	Health() string
	HealthDetail() map[string]any
}

// HangWatcher is a model with a hang watchdog: Exit delivers the exit code
// once a hang makes the process exit (after the model drained); Hung says a
// device is stuck, so the model must not be closed and a stop signal exits
// with HangExitCode.
type HangWatcher interface {
	Exit() <-chan int
	Hung() bool
	HangExitCode() int
}
