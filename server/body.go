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
// client that went away (no answer is written); budget is the memory budget's refusal (a 503 with
// Retry-After, or a 413 for a body that could never fit), answered as it is.
type bodyError struct {
	status     int
	detail     string
	clientGone bool
	budget     *apiError
}

// bodyBuffer gathers a body inside the request's reservation: a new buffer's size is reserved
// before it is allocated, and the old one given back once copied, so the budget holds what the
// buffers hold.
type bodyBuffer struct {
	buf   []byte
	limit int
	mem   *reservation
}

// grow makes room for n more bytes, doubling (never past limit: the reader bounds the body).
func (b *bodyBuffer) grow(n int) error {
	need := len(b.buf) + n
	if need <= cap(b.buf) {
		return nil
	}
	return b.resize(min(max(2*cap(b.buf), need), max(b.limit, need)))
}

// resize moves the body into a buffer of size bytes, reserved first.
func (b *bodyBuffer) resize(size int) error {
	if err := b.mem.Reserve(int64(size)); err != nil {
		return err
	}
	old := cap(b.buf)
	b.buf = append(make([]byte, 0, size), b.buf...)
	b.mem.Release(int64(old))
	return nil
}

// readFrom is one Read of r straight into the buffer, which grows by 64 KiB first when full: rerr
// is the budget's refusal (nothing read), err the reader's.
func (b *bodyBuffer) readFrom(r io.Reader) (n int, rerr, err error) {
	if len(b.buf) == cap(b.buf) {
		if rerr := b.grow(64 << 10); rerr != nil {
			return 0, rerr, nil
		}
	}
	n, err = r.Read(b.buf[len(b.buf):cap(b.buf)])
	b.buf = b.buf[:len(b.buf)+n]
	return n, nil, err
}

// readBody reads r's whole body, at most limit bytes (limitText names the limit in errors, e.g.
// "33554432 bytes (32 MiB)"), within the server's BodyLimits, inside mem: a declared
// Content-Length is reserved before a byte is read, a body without one as it arrives (its buffer
// doubling from the first read), so bodies being received count against the memory budget like
// bodies received.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, limitText string, mem *reservation) ([]byte, *bodyError) {
	if r.ContentLength > limit {
		return nil, &bodyError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("request body is %d bytes; the limit is %s", r.ContentLength, limitText)}
	}
	lim, _ := r.Context().Value(bodyLimitsKey{}).(BodyLimits)
	if lim == (BodyLimits{}) {
		lim = DefaultBodyLimits
	}
	out := bodyBuffer{limit: int(limit), mem: mem}
	if r.ContentLength > 0 {
		if err := out.resize(int(r.ContentLength)); err != nil {
			return nil, budgetError(w, err)
		}
	}
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	body := http.MaxBytesReader(w, r.Body, limit)
	start := time.Now()
	for {
		// The deadline bounds this read; without a connection to set it on (a test recorder) the
		// idle bound does not apply.
		_ = rc.SetReadDeadline(time.Now().Add(lim.Idle))
		_, rerr, err := out.readFrom(body)
		if rerr != nil {
			return nil, budgetError(w, rerr)
		}
		if err == nil && r.ContentLength > 0 && int64(len(out.buf)) == r.ContentLength {
			return out.buf, nil // the declared length has arrived: the body ends here (net/http stops it there)
		}
		if errors.Is(err, io.EOF) {
			return out.buf, nil
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				return nil, &bodyError{status: http.StatusRequestEntityTooLarge, detail: "request body exceeds the limit of " + limitText}
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, &bodyError{status: http.StatusRequestTimeout, detail: fmt.Sprintf("request body: no data for %s after %d bytes; send the whole body without pauses", lim.Idle, len(out.buf))}
			case r.Context().Err() != nil:
				return nil, &bodyError{clientGone: true}
			}
			return nil, &bodyError{status: http.StatusBadRequest, detail: "cannot read request body: " + err.Error()}
		}
		if el := time.Since(start); el > lim.Grace && float64(len(out.buf)) < float64(lim.MinRate)*el.Seconds() {
			return nil, &bodyError{status: http.StatusRequestTimeout, detail: fmt.Sprintf("request body: %d bytes in %s is below the minimum rate of %d bytes/s", len(out.buf), el.Round(time.Millisecond), lim.MinRate)}
		}
	}
}

// budgetError is the budget's refusal of a body not read to its end: the connection is closed
// after the answer rather than drained of the rest.
func budgetError(w http.ResponseWriter, err error) *bodyError {
	w.Header().Set("Connection", "close")
	aerr := memoryAPIError(err)
	return &bodyError{status: aerr.status, detail: aerr.detail, budget: aerr}
}

// write answers a body error (nothing when the client is gone).
func (e *bodyError) write(w http.ResponseWriter) {
	switch {
	case e.clientGone:
		return
	case e.budget != nil:
		e.budget.write(w)
		return
	case e.status == http.StatusRequestTimeout:
		w.Header().Set("Connection", "close")
	}
	writeDetail(w, e.status, e.detail)
}
