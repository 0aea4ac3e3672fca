package pi05

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
	"github.com/ttmodel/tt-model/server"
)

// The one entry point of every pi0.5 protocol (JSON routes, and any other that decodes a
// pi05.Request): infer takes a decoded request and its robot, and returns the answer or an
// *APIError with the HTTP status and Retry-After a websocket maps to its frames.

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
func (m *Model) infer(ctx context.Context, start time.Time, robot string, req *pi05.Request, fieldName func(string) string, mem *server.Reservation, rec server.Recorder) (*inference, *server.APIError) {
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-ctx.Done():
		return nil, &server.APIError{Status: server.StatusClientClosed}
	}
	p, _ := m.current()
	eng := m.running()
	prep, err := p.Prepare(req)
	if err != nil {
		var re *pi05.RequestError
		if errors.As(err, &re) {
			return nil, &server.APIError{Status: http.StatusBadRequest, Detail: fieldName(re.Field) + ": " + re.Msg}
		}
		return nil, &server.APIError{Status: http.StatusBadRequest, Detail: err.Error()}
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
			return nil, &server.APIError{Status: server.StatusClientClosed}
		}
		m.log.Error("pi05 inference failed", "err", err)
		return nil, &server.APIError{Status: http.StatusInternalServerError, Detail: fmt.Sprintf("inference failed: %s: %v", server.ErrorKind(err), err)}
	}
	res := ans.Result
	for r, row := range res.Actions {
		if !server.Finite(row) {
			return nil, &server.APIError{Status: http.StatusInternalServerError, Detail: fmt.Sprintf("inference failed: NonFiniteOutput: action row %d contains NaN or Inf", r)}
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
// route decodes it), inside the request's reservation mem (server.RequestMemory), which the caller gives
// back once the request is answered.
func readPI05Body(w http.ResponseWriter, r *http.Request, mem *server.Reservation) ([]byte, *server.APIError) {
	body, berr := server.ReadBody(w, r, MaxBodyBytes, fmt.Sprintf("%d bytes (64 MiB)", MaxBodyBytes), mem)
	switch {
	case berr == nil:
		return body, nil
	case berr.Budget != nil:
		return nil, berr.Budget
	case berr.ClientGone:
		return nil, &server.APIError{Status: server.StatusClientClosed}
	}
	return nil, &server.APIError{Status: berr.Status, Detail: berr.Detail}
}

// engineRefusal is the answer to a request the serving engine did not take (nil: err is not a
// refusal).
func engineRefusal(err error) *server.APIError {
	var se *serving.Error
	if !errors.As(err, &se) {
		return nil
	}
	return &server.APIError{Status: se.Status, Detail: se.Msg, RetryAfter: time.Duration(se.RetryAfterSeconds()) * time.Second}
}

// refuseEarly is the 503 a JSON request would get from the engine (a new robot beyond capacity,
// a draining or hung server), found before its body is decoded so that the refusal does not wait
// on the frames. The robot is the body's top-level robot_id (found by skipping the values, ~1 ms
// for three frames, wherever the key stands), else the X-Robot-Id header, as the routes resolve it.
// A body that does not split is left to the decoder and its error.
func (m *Model) refuseEarly(r *http.Request, body []byte) *server.APIError {
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
func decodeObject(body []byte, v any) *server.APIError {
	if err := json.Unmarshal(body, v); err != nil {
		return &server.APIError{Status: http.StatusBadRequest, Detail: "invalid JSON body: " + err.Error()}
	}
	return nil
}

// robotID is the request's robot: robot_id in the body (a string or an integer), else the
// X-Robot-Id header, else "" (an anonymous robot of one request).
func robotID(raw json.RawMessage, r *http.Request) (string, *server.APIError) {
	id, aerr := robotIDValue(raw)
	if id == "" && aerr == nil {
		id = robotHeader(r)
	}
	return id, aerr
}

// robotIDValue reads a JSON robot_id: a non-empty string or an integer ("" when absent).
func robotIDValue(raw json.RawMessage) (string, *server.APIError) {
	if len(raw) == 0 || server.IsNull(raw) {
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
	return "", &server.APIError{Status: http.StatusBadRequest, Detail: "robot_id: want a non-empty string or an integer"}
}

// robotHeader is the X-Robot-Id header (header names are case-insensitive: X-Robot-ID too).
func robotHeader(r *http.Request) string { return strings.TrimSpace(r.Header.Get("X-Robot-Id")) }

// answerHeaders tells the client where its request ran.
func answerHeaders(w http.ResponseWriter, inf *inference) {
	w.Header().Set("X-TT-Device", strconv.Itoa(inf.device))
	w.Header().Set("X-TT-Batched-As", strconv.Itoa(inf.res.BatchedAs))
}
