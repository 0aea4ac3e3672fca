package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/models/pi05/serving"
)

// The one entry point of every pi0.5 protocol (JSON routes, and any other that decodes a
// pi05.Request): infer takes a decoded request and its robot, and returns the answer or an
// *apiError with the HTTP status and Retry-After a websocket maps to its frames.

// apiError is a request that got no answer: its HTTP status, detail and, for a 503, when to retry.
// statusClientClosed means the client is gone: nothing is written.
type apiError struct {
	status     int
	detail     string
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.detail }

func badRequest(detail string) *apiError {
	return &apiError{status: http.StatusBadRequest, detail: detail}
}

// write answers the error (a Retry-After header with a 503).
func (e *apiError) write(w http.ResponseWriter) {
	if e.status == statusClientClosed {
		return
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((e.retryAfter+time.Second-1)/time.Second))))
	}
	writeDetail(w, e.status, e.detail)
}

// inference is one answered request.
type inference struct {
	prep       *pi05.Prepared
	res        *pi05.Result
	device     int           // the device that ran it (pd: the expert device)
	queued     time.Duration // waiting for its device
	preprocess time.Duration
	imageSize  int // the side frames were resized to (224 for pi05_base)
}

// infer validates and pre-processes req, then has the scheduler run it for robot ("" = an
// anonymous robot of one request). start is when the request arrived (its preprocess time runs from
// there); fieldName maps the canonical field names of pi05.RequestError to the API's own keys. At
// most PI05_HTTP_THREADS requests are prepared or run at once. Once pre-processed, the request's
// frames are dropped and their bytes given back to mem while it waits for a device.
func (m *PI05) infer(ctx context.Context, start time.Time, robot string, req *pi05.Request, fieldName func(string) string, mem *reservation, rec Recorder) (*inference, *apiError) {
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-ctx.Done():
		return nil, &apiError{status: statusClientClosed}
	}
	p, _ := m.current()
	eng := m.running()
	prep, err := p.Prepare(req)
	if err != nil {
		var re *pi05.RequestError
		if errors.As(err, &re) {
			return nil, &apiError{status: http.StatusBadRequest, detail: fieldName(re.Field) + ": " + re.Msg}
		}
		return nil, &apiError{status: http.StatusBadRequest, detail: err.Error()}
	}
	var frames int64
	for _, img := range req.Images {
		frames += int64(len(img.Pix))
	}
	req.Images = nil
	mem.Release(frames)
	pre := time.Since(start)
	ans, err := eng.Submit(ctx, robot, prep)
	if err != nil {
		switch {
		case engineRefusal(err) != nil:
			return nil, engineRefusal(err)
		case ctx.Err() != nil:
			return nil, &apiError{status: statusClientClosed}
		}
		m.log.Error("pi05 inference failed", "err", err)
		return nil, &apiError{status: http.StatusInternalServerError, detail: fmt.Sprintf("inference failed: %s: %v", errorKind(err), err)}
	}
	res := ans.Result
	for r, row := range res.Actions {
		if !finite(row) {
			return nil, &apiError{status: http.StatusInternalServerError, detail: fmt.Sprintf("inference failed: NonFiniteOutput: action row %d contains NaN or Inf", r)}
		}
	}
	rec.Stage("preprocess", pre)
	rec.Stage("queue", ans.Queued)
	rec.Stage("vision", res.Timing.Vision)
	rec.Stage("prefix", res.Timing.Prefix)
	rec.Stage("expert", res.Timing.Expert)
	return &inference{prep: prep, res: res, device: ans.Device, queued: ans.Queued, preprocess: pre, imageSize: p.Dims.Image}, nil
}

// readPI05Body reads a request body whole, bounded in size, time and rate (JSON or msgpack; the
// route decodes it), inside the request's reservation mem (requestMemory), which the caller gives
// back once the request is answered.
func readPI05Body(w http.ResponseWriter, r *http.Request, mem *reservation) ([]byte, *apiError) {
	body, berr := readBody(w, r, PI05MaxBodyBytes, fmt.Sprintf("%d bytes (64 MiB)", PI05MaxBodyBytes), mem)
	switch {
	case berr == nil:
		return body, nil
	case berr.budget != nil:
		return nil, berr.budget
	case berr.clientGone:
		return nil, &apiError{status: statusClientClosed}
	}
	return nil, &apiError{status: berr.status, detail: berr.detail}
}

// engineRefusal is the answer to a request the serving engine did not take (nil: err is not a
// refusal).
func engineRefusal(err error) *apiError {
	var se *serving.Error
	if !errors.As(err, &se) {
		return nil
	}
	return &apiError{status: se.Status, detail: se.Msg, retryAfter: time.Duration(se.RetryAfterSeconds()) * time.Second}
}

// refuseEarly is the 503 a JSON request would get from the engine (a new robot beyond capacity,
// a draining or hung server), found before its body is decoded so that the refusal does not wait
// on the frames. The robot is the body's top-level robot_id (found by skipping the values, ~1 ms
// for three frames, wherever the key stands), else the X-Robot-Id header, as the routes resolve it.
// A body that does not split is left to the decoder and its error.
func (m *PI05) refuseEarly(r *http.Request, body []byte) *apiError {
	var raw []byte
	_, ok := walkJSONObject(body, 0, 0, func(key string, i int) (int, bool) {
		end, ok := skipJSONValue(body, i, 1)
		if ok && key == "robot_id" {
			raw = body[i:end]
		}
		return end, ok
	})
	if !ok {
		return nil
	}
	id, aerr := robotID(raw, r)
	if aerr != nil {
		return nil
	}
	return engineRefusal(m.running().Admits(id))
}

// decodeObject decodes a JSON object body, rejecting trailing data.
func decodeObject(body []byte, v any) *apiError {
	if err := json.Unmarshal(body, v); err != nil {
		return &apiError{status: http.StatusBadRequest, detail: "invalid JSON body: " + err.Error()}
	}
	return nil
}

// robotID is the request's robot: robot_id in the body (a string or an integer), else the
// X-Robot-Id header, else "" (an anonymous robot of one request).
func robotID(raw json.RawMessage, r *http.Request) (string, *apiError) {
	id, aerr := robotIDValue(raw)
	if id == "" && aerr == nil {
		id = robotHeader(r)
	}
	return id, aerr
}

// robotIDValue reads a JSON robot_id: a non-empty string or an integer ("" when absent).
func robotIDValue(raw json.RawMessage) (string, *apiError) {
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && s != "" {
		return s, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return strconv.FormatInt(n, 10), nil
	}
	return "", &apiError{status: http.StatusBadRequest, detail: "robot_id: want a non-empty string or an integer"}
}

// robotHeader is the X-Robot-Id header (header names are case-insensitive: X-Robot-ID too).
func robotHeader(r *http.Request) string { return strings.TrimSpace(r.Header.Get("X-Robot-Id")) }

// answerHeaders tells the client where its request ran.
func answerHeaders(w http.ResponseWriter, inf *inference) {
	w.Header().Set("X-TT-Device", strconv.Itoa(inf.device))
	w.Header().Set("X-TT-Batched-As", strconv.Itoa(inf.res.BatchedAs))
}
