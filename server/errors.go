package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// FieldError is one schema violation, in the shape FastAPI/pydantic give a
// 422: {"loc": ["body", "threshold"], "msg": "...", "type": "..."}.
type FieldError struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

// writeJSON writes v with status. Encoding happens before the header is
// sent, so an unencodable value becomes a 500 rather than a torn body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(map[string]string{"detail": "cannot encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeDetail writes FastAPI's error body {"detail": detail}.
func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}

// writeFieldErrors writes a 422 listing every schema violation.
func writeFieldErrors(w http.ResponseWriter, errs []FieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
}

// errorKind names an error's type the way the original Python servers' 500s name the Python
// exception: the innermost wrapped error's Go type, without package path
// or pointer star (e.g. "native.ForwardError").
func errorKind(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	t := strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
	if i := strings.LastIndex(t, "/"); i >= 0 {
		t = t[i+1:]
	}
	return t
}
