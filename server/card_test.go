package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server/api"
)

// A route of the table without a handler, a handler for no route, and a
// route declared twice are refused: the card and /info would list what the
// server does not serve, or hide what it does.
func TestRouteTableAndHandlersMustAgree(t *testing.T) {
	h := func(http.ResponseWriter, *http.Request, Recorder) {}
	table := []api.Route{{Method: "POST", Path: "/a", Name: "a"}, {Method: "GET", Path: "/b", Name: "b"}}
	if _, err := bind(table, map[string]RouteHandler{"a": h}); err == nil || !strings.Contains(err.Error(), "GET /b (b) has no handler") {
		t.Errorf("a route without a handler: %v", err)
	}
	if _, err := bind(table, map[string]RouteHandler{"a": h, "b": h, "c": h}); err == nil || !strings.Contains(err.Error(), `handler "c" serves no route`) {
		t.Errorf("a handler without a route: %v", err)
	}
	routes, err := bind(table, map[string]RouteHandler{"a": h, "b": h})
	if err != nil || len(routes) != 2 {
		t.Fatalf("bind: %v, %d routes", err, len(routes))
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "declared twice") {
			t.Errorf("a route declared twice: panic %v", p)
		}
	}()
	New(&tableModel{routes: append(routes, routes[0])}, Options{Log: servertest.DiscardLog()})
}

// tableModel serves given routes and nothing else.
type tableModel struct{ routes []Route }

func (m *tableModel) Name() string { return "table" }

func (m *tableModel) Load(context.Context, *slog.Logger) error { return nil }

func (m *tableModel) Device() string { return "" }

func (m *tableModel) Info() map[string]any { return map[string]any{} }

func (m *tableModel) ModelCards() []ModelCard { return nil }

func (m *tableModel) Routes() []Route { return m.routes }

func (m *tableModel) Close() error { return nil }
