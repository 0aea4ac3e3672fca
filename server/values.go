package server

import (
	"bytes"
	"encoding/json"
	"math"
	"time"
)

// The small value helpers every model's answers use.

// Finite reports whether v holds no NaN or Inf: a model's output is checked before it is answered.
func Finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// IsNull reports whether raw is JSON's null.
func IsNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// Millis is d in milliseconds, rounded to the microsecond (the answers' timing fields).
func Millis(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// NilIfEmpty is s, or nil (JSON null) when s is empty.
func NilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Pin is "repo @ revision", or says the revision is not pinned.
func Pin(repo, revision string) string {
	if revision == "" {
		return repo + " (revision not pinned)"
	}
	return repo + " @ " + revision
}
