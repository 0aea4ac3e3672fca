package pi05

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/ttmodel/tt-model/server"
)

// OpenPI's policy server protocol (openpi src/openpi/serving/websocket_policy_server.py, client
// packages/openpi-client): GET /healthz answers "OK\n"; a websocket gets the metadata as its first
// binary frame, then each binary frame is one msgpack-numpy observation and each reply
// {actions: ndarray [H, D], policy_timing: {infer_ms}, server_timing: {infer_ms, prev_total_ms}}.
// A failed request gets the error as a text frame, then close 1011 with OpenPI's reason.

// openpiCloseReason is WebsocketPolicyServer's close reason after the error frame.
const openpiCloseReason = "Internal server error. Traceback included in previous frame."

// openpi serves the OpenPI websocket (/openpi/policy, and / where stock clients connect).
func (m *Model) openpi(w http.ResponseWriter, r *http.Request, rec server.Recorder) {
	m.serveWebsocket(w, r, rec, wsProtocol{name: "openpi", closeReason: openpiCloseReason, handle: m.openpiFrame})
}

func (m *Model) openpiFrame(ctx context.Context, robot string, frame []byte, prevTotal time.Duration, mem *server.Reservation, rec server.Recorder) ([]byte, *server.APIError) {
	return m.actOnFrame(ctx, robot, frame, mem, rec, func(ar *actionRequest, inf *inference, start time.Time) map[string]any {
		return map[string]any{
			"actions":       actionValues(inf.res.Actions, ar.numpyOut()),
			"policy_timing": map[string]float64{"infer_ms": server.Millis(inf.inferenceTime())},
			"server_timing": serverTiming(time.Since(start), prevTotal),
		}
	})
}

// healthz is OpenPI's health check: 200 "OK\n" once the policy is loaded.
func (m *Model) healthz(w http.ResponseWriter, _ *http.Request, _ server.Recorder) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "OK\n")
}
