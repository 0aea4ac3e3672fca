package supervisor

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the status page's template
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/hangmarker"
	"github.com/ttmodel/tt-model/internal/webui"
)

// The status server (--status-addr) answers machines and people:
//
//	GET /status  the Status as JSON, always (Kubernetes probes, tt-model k8s status, scripts)
//	GET /        the same JSON, unless the client asks for HTML (Accept lists text/html: a
//	             browser) and gets the status page: state, counts, chips, the hang marker and
//	             the timeline, refreshed every few seconds without any JavaScript.
//
// Content negotiation on / rather than a page elsewhere: the address an operator types is
// host:port, and every existing client of / (curl's Accept */*, Go's none, kubelet's */*)
// keeps its JSON.

//go:embed statuspage.html
var statusPageHTML string

// statusHandler serves the board's Status; cfg names the hang marker and
// the server's command line.
func statusHandler(b *statusBoard, cfg Config) http.Handler {
	page := template.Must(template.New("status").Funcs(webui.Funcs()).Funcs(template.FuncMap{
		"since": func(t, now time.Time) string { return webui.Duration(now.Sub(t)) },
		"secs":  func(s float64) string { return webui.Duration(time.Duration(s * float64(time.Second))) },
		"newestFirst": func(ev []Event) []Event {
			out := slices.Clone(ev)
			slices.Reverse(out)
			return out
		},
	}).Parse(statusPageHTML))
	// The page may use its own inline stylesheet and nothing else.
	sum := sha256.Sum256([]byte(webui.Style))
	csp := "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	snapshot := func() Status {
		st := b.snapshot()
		st.HangMarker = markerStatus(cfg.HangMarker)
		return st
	}
	serveJSON := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(snapshot()) //nolint:errcheck // the client went away
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", serveJSON)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept")
		if !wantsHTML(r) {
			serveJSON(w, r)
			return
		}
		refresh := 5
		if v, err := strconv.Atoi(r.URL.Query().Get("refresh")); err == nil && v >= 0 && v <= 3600 {
			refresh = v
		}
		var buf bytes.Buffer
		err := page.Execute(&buf, map[string]any{
			"St": snapshot(), "Now": time.Now(), "Refresh": refresh, "CSS": template.CSS(webui.Style),
			"Argv": strings.Join(cfg.Argv, " "), "Addr": cfg.StatusAddr, "Model": modelName(cfg),
		})
		if err != nil {
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		webui.WritePage(w, csp, buf.Bytes())
	})
	return mux
}

// modelName is what the status page calls the server: the model its
// HF_MODEL names (both models' servers take their weights repo from it),
// else its program.
func modelName(cfg Config) string {
	if m := cfg.Env["HF_MODEL"]; m != "" {
		return m
	}
	if len(cfg.Argv) > 0 {
		return filepath.Base(cfg.Argv[0])
	}
	return "server"
}

// wantsHTML: the client lists text/html among what it accepts (a browser
// does; curl, Go and kubelet send */* or nothing).
func wantsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, t := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(t, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/html") {
				return true
			}
		}
	}
	return false
}

// markerStatus looks at the hang marker now.
func markerStatus(path string) *MarkerStatus {
	m := &MarkerStatus{Path: path}
	if b, err := os.ReadFile(path); err == nil {
		m.Present, m.Content = true, strings.TrimSpace(string(b))
	} else if !os.IsNotExist(err) {
		m.Present, m.Content = hangmarker.Exists(path), "unreadable: "+err.Error()
	}
	return m
}
