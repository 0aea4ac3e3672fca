package supervisor

import (
	"context"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ttmodel/tt-model/internal/readiness"
)

// waitURL polls url every interval until it is ready (readiness.Probe) and
// owned says the answer came from the supervised server (then closes ready),
// or ctx ends.
func waitURL(ctx context.Context, client *http.Client, url string, interval time.Duration, owned func() bool, ready chan<- struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if readiness.Probe(ctx, client, url) == nil && owned() {
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

// pump copies a server's output from src to w (a readiness stream) until
// src reaches EOF (every writer, orphans included, closed it). A failing
// write to the log does not stop it: the server must never block on a full
// pipe.
func pump(w io.Writer, src *os.File) {
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			w.Write(buf[:n]) //nolint:errcheck // a closed log must not stop the server
		}
		if err != nil {
			return
		}
	}
}
