// Package server is the model server's HTTP layer, shared by every model:
// /health, /info, /v1/models and /metrics, request serialisation, per-request
// panic recovery, JSON errors in FastAPI's shape ({"detail": …}), graceful
// shutdown. Each model plugs in through the Model interface from its own
// route file (rfdetr_routes.go, …); this file and server.go know no model.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// Info is the body of GET /info; it is called while starting too.
	Info() any
	// ModelCards lists what GET /v1/models reports.
	ModelCards() []ModelCard
	// Routes are the model's own endpoints. Their handlers run only once the
	// model is loaded, one request at a time across all model routes.
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

// Route is one model endpoint.
type Route struct {
	Method string // GET, POST, …
	Path   string // exact path, e.g. /predict
	// Name labels the route's metrics, e.g. "predict".
	Name string
	// Counts marks requests that count as predictions for the fault switch.
	Counts bool
	// Stream marks a websocket: the handler serves many requests on one connection, so the server
	// does not hold its one-request-at-a-time lock for it (the model serializes each inference).
	Stream  bool
	Handler func(w http.ResponseWriter, r *http.Request, rec Recorder)
}

// MetricsSource is a Model with series of its own for /metrics (e.g. a cache's hits).
type MetricsSource interface {
	Collectors() []prometheus.Collector
}

// Recorder lets a handler report where its time went (the stage histogram
// of /metrics).
type Recorder interface {
	Stage(name string, d time.Duration)
}
