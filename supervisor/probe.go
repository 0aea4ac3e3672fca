package supervisor

import (
	"context"
	"net/http"
	"time"
)

// Probe asks a server's readiness URL once, with the test the supervisor
// waits on: nil when it answers 200 with a JSON object whose "status" is
// "ok". It is what a Kubernetes readiness probe runs (`tt-model health`),
// because the /health contract answers 200 while the model is still
// starting, so an HTTP probe alone cannot tell.
func Probe(ctx context.Context, url string, timeout time.Duration) error {
	return probeURL(ctx, &http.Client{Timeout: timeout}, url)
}
