// Package readiness is how tt-model tells that a model server is up, the
// one rule shared by `tt-model serve` (which waits for it before printing
// the ready card) and `tt-model supervise` (which resets and restarts a
// server that does not get there in time): GET on the server's health path
// answers 200 with a JSON object whose "status" is "ok" (the contract of
// tt-model-server's /health and of Tenstorrent's servers), or, for a server
// without such a path, its output shows the manifest's ready line.
package readiness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Probe asks url once and returns nil when it answered 200 with a JSON
// object whose "status" is "ok", else why not.
func Probe(ctx context.Context, client *http.Client, url string) error {
	return probe(ctx, client, url, false)
}

// Serving is Probe that also takes "degraded" (200: a pi0.5 server serving on
// the devices its watchdog did not quarantine) as up: still able to answer,
// so a load balancer keeps sending it requests. "hung" answers 503.
func Serving(ctx context.Context, client *http.Client, url string) error {
	return probe(ctx, client, url, true)
}

func probe(ctx context.Context, client *http.Client, url string, degradedOK bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("probe %s: read body: %w", url, err)
	}
	var health struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &health); err != nil {
		return fmt.Errorf("probe %s: HTTP %d, body is not JSON: %w", url, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || (health.Status != "ok" && !(degradedOK && health.Status == "degraded")) {
		return fmt.Errorf("probe %s: HTTP %d, status %q", url, resp.StatusCode, health.Status)
	}
	return nil
}

// Watcher watches a server's output streams for the ready text and closes
// Seen the first time one of them contains it, even when the text straddles
// two writes.
type Watcher struct {
	text []byte
	seen chan struct{}
	once sync.Once
}

// NewWatcher watches for text ("" never matches).
func NewWatcher(text string) *Watcher {
	return &Watcher{text: []byte(text), seen: make(chan struct{})}
}

// Seen is closed once the ready text has been written to a stream.
func (w *Watcher) Seen() <-chan struct{} { return w.seen }

// Stream returns a writer that passes what is written to it on to dst and
// watches it for the text: one per output stream (stdout, stderr), so each
// is matched in its own order. Safe for concurrent writes.
func (w *Watcher) Stream(dst io.Writer) io.Writer { return &stream{w: w, dst: dst} }

type stream struct {
	w    *Watcher
	dst  io.Writer
	mu   sync.Mutex
	tail []byte // the last len(text)-1 bytes written, for a match across writes
}

// Write passes p to dst and scans it; dst's error is returned, but the scan
// happens regardless, so a closed log does not hide readiness.
func (s *stream) Write(p []byte) (int, error) {
	n, err := s.dst.Write(p)
	text := s.w.text
	if len(text) == 0 {
		return n, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	window := append(s.tail, p...)
	if bytes.Contains(window, text) {
		s.w.once.Do(func() { close(s.w.seen) })
	}
	if keep := len(text) - 1; len(window) > keep {
		window = window[len(window)-keep:]
	}
	s.tail = append(s.tail[:0:0], window...)
	return n, err
}
