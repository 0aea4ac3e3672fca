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

// BodyError is a body that could not be read, with the status to answer; clientGone marks a
// client that went away (no answer is written); budget is the memory budget's refusal (a 503 with
// Retry-After, or a 413 for a body that could never fit), answered as it is.
type BodyError struct {
	Status     int
	Detail     string
	ClientGone bool
	Budget     *APIError
}

// BodyBuffer gathers a body inside the request's reservation: a new buffer's size is reserved
// before it is allocated, and the old one given back once copied, so the budget holds what the
// buffers hold.
type BodyBuffer struct {
	buf   []byte
	limit int
	mem   *Reservation
}

// NewBodyBuffer is an empty buffer for a body of at most limit bytes, reserved in mem.
func NewBodyBuffer(limit int, mem *Reservation) *BodyBuffer {
	return &BodyBuffer{limit: limit, mem: mem}
}

// Bytes is what was read so far.
func (b *BodyBuffer) Bytes() []byte { return b.buf }

// Grow makes room for n more bytes, doubling (never past limit: the reader bounds the body).
func (b *BodyBuffer) Grow(n int) error {
	need := len(b.buf) + n
	if need <= cap(b.buf) {
		return nil
	}
	return b.resize(min(max(2*cap(b.buf), need), max(b.limit, need)))
}

// resize moves the body into a buffer of size bytes, reserved first.
func (b *BodyBuffer) resize(size int) error {
	if err := b.mem.Reserve(int64(size)); err != nil {
		return err
	}
	old := cap(b.buf)
	b.buf = append(make([]byte, 0, size), b.buf...)
	b.mem.Release(int64(old))
	return nil
}

// ReadChunk is one Read of r straight into the buffer, which grows by 64 KiB first when full: rerr
// is the budget's refusal (nothing read), err the reader's.
func (b *BodyBuffer) ReadChunk(r io.Reader) (n int, rerr, err error) {
	if len(b.buf) == cap(b.buf) {
		if rerr := b.Grow(64 << 10); rerr != nil {
			return 0, rerr, nil
		}
	}
	n, err = r.Read(b.buf[len(b.buf):cap(b.buf)])
	b.buf = b.buf[:len(b.buf)+n]
	return n, nil, err
}

// ReadBody reads r's whole body, at most limit bytes (limitText names the limit in errors, e.g.
// "33554432 bytes (32 MiB)"), within the server's BodyLimits, inside mem: a declared
// Content-Length is reserved before a byte is read, a body without one as it arrives (its buffer
// doubling from the first read), so bodies being received count against the memory budget like
// bodies received.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64, limitText string, mem *Reservation) ([]byte, *BodyError) {
	if r.ContentLength > limit {
		return nil, &BodyError{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf("request body is %d bytes; the limit is %s", r.ContentLength, limitText)}
	}
	lim, _ := r.Context().Value(bodyLimitsKey{}).(BodyLimits)
	if lim == (BodyLimits{}) {
		lim = DefaultBodyLimits
	}
	out := NewBodyBuffer(int(limit), mem)
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
		_, rerr, err := out.ReadChunk(body)
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
				return nil, &BodyError{Status: http.StatusRequestEntityTooLarge, Detail: "request body exceeds the limit of " + limitText}
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, &BodyError{Status: http.StatusRequestTimeout, Detail: fmt.Sprintf("request body: no data for %s after %d bytes; send the whole body without pauses", lim.Idle, len(out.buf))}
			case r.Context().Err() != nil:
				return nil, &BodyError{ClientGone: true}
			}
			return nil, &BodyError{Status: http.StatusBadRequest, Detail: "cannot read request body: " + err.Error()}
		}
		if el := time.Since(start); el > lim.Grace && float64(len(out.buf)) < float64(lim.MinRate)*el.Seconds() {
			return nil, &BodyError{Status: http.StatusRequestTimeout, Detail: fmt.Sprintf("request body: %d bytes in %s is below the minimum rate of %d bytes/s", len(out.buf), el.Round(time.Millisecond), lim.MinRate)}
		}
	}
}

// budgetError is the budget's refusal of a body not read to its end: the connection is closed
// after the answer rather than drained of the rest.
func budgetError(w http.ResponseWriter, err error) *BodyError {
	w.Header().Set("Connection", "close")
	aerr := MemoryAPIError(err)
	return &BodyError{Status: aerr.Status, Detail: aerr.Detail, Budget: aerr}
}

// Write answers a body error (nothing when the client is gone).
func (e *BodyError) Write(w http.ResponseWriter) {
	switch {
	case e.ClientGone:
		return
	case e.Budget != nil:
		e.Budget.Write(w)
		return
	case e.Status == http.StatusRequestTimeout:
		w.Header().Set("Connection", "close")
	}
	WriteDetail(w, e.Status, e.Detail)
}
