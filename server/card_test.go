package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/server/api"
)

// cardRow is one row of a card's endpoint table: `| GET | `/health` | … |`.
var cardRow = regexp.MustCompile("^\\| (GET|HEAD|POST|PUT|PATCH|DELETE) \\| `([^`]+)` \\|")

// cardEndpoints renders the model card of the manifest at path, as `tt-model
// package` does, and returns its endpoint table as "METHOD /path" lines.
func cardEndpoints(t *testing.T, path string) []string {
	t.Helper()
	m, err := manifest.Load(path, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := builder.RenderCard(m.ToWire(manifest.WireInfo{ToolVersion: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	_, using, ok := strings.Cut(text, "## Using it")
	if !ok {
		t.Fatalf("the card of %s has no \"Using it\" section:\n%s", path, text)
	}
	using, _, _ = strings.Cut(using, "\n## ")
	var rows []string
	for _, line := range strings.Split(using, "\n") {
		if m := cardRow.FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1]+" "+m[2])
		}
	}
	if len(rows) == 0 {
		t.Fatalf("the card of %s lists no endpoint:\n%s", path, using)
	}
	return rows
}

// The model card of each model package lists exactly the routes its server
// answers: every row of the card is served (neither 404 nor 405), every
// route the server registered is on the card, and GET /info lists the same.
func TestCardListsExactlyTheServedRoutes(t *testing.T) {
	for _, c := range []struct {
		manifest string
		model    func(t *testing.T) Model
	}{
		{"../models/rf-detr/tt-model.yaml", func(*testing.T) Model { return newRFDETRTestModel(twoLabelOutputs()) }},
		{"../models/pi05/tt-model.yaml", func(t *testing.T) Model { return newPI05TestModel(t, nil) }},
	} {
		t.Run(filepath.Base(filepath.Dir(c.manifest)), func(t *testing.T) {
			card := cardEndpoints(t, c.manifest)
			s := New(c.model(t), Options{Log: discardLog()})
			s.ready.Store(true)
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()

			for _, row := range card {
				method, path, _ := strings.Cut(row, " ")
				req, err := http.NewRequest(method, ts.URL+path, strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
					t.Errorf("the card lists %s, the server answers %d", row, resp.StatusCode)
				}
			}

			var served []string
			for _, r := range s.Routes() {
				served = append(served, r.Method+" "+r.Path)
			}
			sameSet(t, "the server's route table", served, "the card", card)

			resp, err := http.Get(ts.URL + "/info")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var info struct {
				Routes []struct{ Method, Path string } `json:"routes"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, r := range info.Routes {
				listed = append(listed, r.Method+" "+r.Path)
			}
			sameSet(t, "GET /info's routes", listed, "the card", card)

			if resp, err := http.Get(ts.URL + "/v1/actions/unknown"); err != nil || resp.StatusCode != http.StatusNotFound {
				t.Errorf("a path on no card (/v1/actions/unknown): %v %v, want 404", resp.Status, err)
			}
		})
	}
}

func sameSet(t *testing.T, aName string, a []string, bName string, b []string) {
	t.Helper()
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("%s:\n  %s\n%s:\n  %s", aName, strings.Join(a, "\n  "), bName, strings.Join(b, "\n  "))
	}
}

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
	New(&tableModel{routes: append(routes, routes[0])}, Options{Log: discardLog()})
}

// tableModel serves given routes and nothing else.
type tableModel struct{ routes []Route }

func (m *tableModel) Name() string                             { return "table" }
func (m *tableModel) Load(context.Context, *slog.Logger) error { return nil }
func (m *tableModel) Device() string                           { return "" }
func (m *tableModel) Info() map[string]any                     { return map[string]any{} }
func (m *tableModel) ModelCards() []ModelCard                  { return nil }
func (m *tableModel) Routes() []Route                          { return m.routes }
func (m *tableModel) Close() error                             { return nil }
