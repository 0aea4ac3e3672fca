package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// probeURL asks url once and reports whether it answered 200 with a JSON
// object whose "status" is "ok" (the pi0.5 and RF-DETR /health contract).
func probeURL(ctx context.Context, client *http.Client, url string) error {
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
	if resp.StatusCode != http.StatusOK || health.Status != "ok" {
		return fmt.Errorf("probe %s: HTTP %d, status %q", url, resp.StatusCode, health.Status)
	}
	return nil
}

// waitURL polls url every interval until it answers ready and owned says
// the answer came from the supervised server (then closes ready), or ctx
// ends.
func waitURL(ctx context.Context, client *http.Client, url string, interval time.Duration, owned func() bool, ready chan<- struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if probeURL(ctx, client, url) == nil && owned() {
			close(ready)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lineWatcher copies a server's output to dst and closes seen the first
// time the output contains text, even when the text straddles two reads.
type lineWatcher struct {
	text []byte
	seen chan struct{}
	once sync.Once
}

func newLineWatcher(text string) *lineWatcher {
	return &lineWatcher{text: []byte(text), seen: make(chan struct{})}
}

// copy runs until src reaches EOF (every writer, orphans included, closed it).
func (w *lineWatcher) copy(dst io.Writer, src *os.File) {
	defer src.Close()
	buf := make([]byte, 32<<10)
	var tail []byte // the last len(text)-1 bytes, for a match across reads
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			dst.Write(chunk) //nolint:errcheck // a closed log must not stop the server
			window := append(tail, chunk...)
			if bytes.Contains(window, w.text) {
				w.once.Do(func() { close(w.seen) })
			}
			if keep := len(w.text) - 1; len(window) > keep {
				window = window[len(window)-keep:]
			}
			tail = append(tail[:0], window...)
		}
		if err != nil {
			return
		}
	}
}
