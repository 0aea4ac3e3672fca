package supervisor

import (
	"encoding/json"
	"net/http"
)

// statusHandler serves the supervisor's Status as JSON on GET / and
// GET /status.
func statusHandler(b *statusBoard) http.Handler {
	mux := http.NewServeMux()
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(b.snapshot()) //nolint:errcheck // the client went away
	}
	mux.HandleFunc("GET /{$}", h)
	mux.HandleFunc("GET /status", h)
	return mux
}
