package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// BodyLimits bound how a request body is read, so that a slow or silent client never holds a
// model: handlers read and check the whole body before they queue for a device, and reading gives
// up on a client that stops sending or sends too slowly.
type BodyLimits struct {
	// Idle is the longest gap between two reads that return data.
	Idle time.Duration
	// MinRate is the lowest average rate (bytes/s) a body may arrive at, checked once Grace has
	// passed since the first byte was asked for.
	MinRate int64
	Grace   time.Duration
}

// DefaultBodyLimits: 10 s without a byte, or under 64 KiB/s after 10 s, is a 408. A 15 MB pi0.5
// body at the minimum rate takes 4 minutes, inside the server's 5-minute read timeout.
var DefaultBodyLimits = BodyLimits{Idle: 10 * time.Second, MinRate: 64 << 10, Grace: 10 * time.Second}

type bodyLimitsKey struct{}

// bodyError is a body that could not be read, with the status to answer; clientGone marks a
// client that went away (no answer is written).
type bodyError struct {
	status     int
	detail     string
	clientGone bool
}

// readBody reads r's whole body, at most limit bytes (limitText names the limit in errors, e.g.
// "33554432 bytes (32 MiB)"),
// within the server's BodyLimits.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, limitText string) ([]byte, *bodyError) {
	if r.ContentLength > limit {
		return nil, &bodyError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("request body is %d bytes; the limit is %s", r.ContentLength, limitText)}
	}
	lim, _ := r.Context().Value(bodyLimitsKey{}).(BodyLimits)
	if lim == (BodyLimits{}) {
		lim = DefaultBodyLimits
	}
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	body := http.MaxBytesReader(w, r.Body, limit)
	start := time.Now()
	var out []byte
	if r.ContentLength > 0 {
		out = make([]byte, 0, r.ContentLength)
	}
	buf := make([]byte, 64<<10)
	for {
		// The deadline bounds this read; without a connection to set it on (a test recorder) the
		// idle bound does not apply.
		_ = rc.SetReadDeadline(time.Now().Add(lim.Idle))
		n, err := body.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				return nil, &bodyError{status: http.StatusRequestEntityTooLarge, detail: "request body exceeds the limit of " + limitText}
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, &bodyError{status: http.StatusRequestTimeout, detail: fmt.Sprintf("request body: no data for %s after %d bytes; send the whole body without pauses", lim.Idle, len(out))}
			case r.Context().Err() != nil:
				return nil, &bodyError{clientGone: true}
			}
			return nil, &bodyError{status: http.StatusBadRequest, detail: "cannot read request body: " + err.Error()}
		}
		if el := time.Since(start); el > lim.Grace && float64(len(out)) < float64(lim.MinRate)*el.Seconds() {
			return nil, &bodyError{status: http.StatusRequestTimeout, detail: fmt.Sprintf("request body: %d bytes in %s is below the minimum rate of %d bytes/s", len(out), el.Round(time.Millisecond), lim.MinRate)}
		}
	}
}

// write answers a body error (nothing when the client is gone).
func (e *bodyError) write(w http.ResponseWriter) {
	if e.clientGone {
		return
	}
	if e.status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close")
	}
	writeDetail(w, e.status, e.detail)
}
