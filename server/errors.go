package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// APIError is a request that got no answer: its HTTP status, detail and, for a 503, when to retry.
// StatusClientClosed means the client is gone: nothing is written.
type APIError struct {
	Status     int
	Detail     string
	RetryAfter time.Duration
}

func (e *APIError) Error() string { return e.Detail }

// BadRequest is a 400 with detail.
func BadRequest(detail string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Detail: detail}
}

// Write answers the error (a Retry-After header with a 503).
func (e *APIError) Write(w http.ResponseWriter) {
	if e.Status == StatusClientClosed {
		return
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((e.RetryAfter+time.Second-1)/time.Second))))
	}
	WriteDetail(w, e.Status, e.Detail)
}

// PanicError is a recovered panic of a model's computation, answered as the failure it is: its
// type names it in a 500's detail ("inference failed: server.PanicError: …", ErrorKind).
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprint(e.Value) }

// FieldError is one schema violation, in the shape FastAPI/pydantic give a
// 422: {"loc": ["body", "threshold"], "msg": "...", "type": "..."}.
type FieldError struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

// WriteJSON writes v with status. Encoding happens before the header is
// sent, so an unencodable value becomes a 500 rather than a torn body.
func WriteJSON(w http.ResponseWriter, status int, v any) {
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

// WriteDetail writes FastAPI's error body {"detail": detail}.
func WriteDetail(w http.ResponseWriter, status int, detail string) {
	WriteJSON(w, status, map[string]string{"detail": detail})
}

// WriteFieldErrors writes a 422 listing every schema violation.
func WriteFieldErrors(w http.ResponseWriter, errs []FieldError) {
	WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
}

// ErrorKind names an error's type the way the original Python servers' 500s name the Python
// exception: the innermost wrapped error's Go type, without package path
// or pointer star (e.g. "native.ForwardError").
func ErrorKind(err error) string {
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
