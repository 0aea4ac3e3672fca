package rfdetr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/ttmodel/tt-model/server"
)

// Limits of POST /predict (the original server's contract).
const (
	MaxBodyBytes         = 32 << 20 // a larger body is a 400
	defaultThreshold     = 0.5
	defaultMaxDetections = 100
	maxMaxDetections     = 300
)

// predictRequest is a validated POST /predict body.
type predictRequest struct {
	Image         string // base64 text, prefix and whitespace not yet removed
	Picture       []byte // the PNG or JPEG itself, when the body is not JSON (forms.go)
	Threshold     float64
	MaxDetections int
	ReturnRaw     bool
}

// parsePredict validates the JSON body like the original server's pydantic model:
// every violation is reported (422), extra fields are ignored, numbers must
// be JSON numbers (max_detections an integral one) and flags JSON booleans.
func parsePredict(body []byte) (predictRequest, []server.FieldError) {
	req := predictRequest{Threshold: defaultThreshold, MaxDetections: defaultMaxDetections}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		msg := "request body must be a JSON object"
		if err != nil {
			msg = "JSON decode error: " + err.Error()
		}
		return req, []server.FieldError{{Loc: []string{"body"}, Msg: msg + "; " + predictForms, Type: "json_invalid"}}
	}
	if dec.More() {
		return req, []server.FieldError{{Loc: []string{"body"}, Msg: "JSON decode error: data after the object; " + predictForms, Type: "json_invalid"}}
	}
	var errs []server.FieldError
	if raw, ok := fields["image"]; !ok {
		errs = append(errs, server.FieldError{Loc: []string{"body", "image"}, Msg: "Field required", Type: "missing"})
	} else if err := json.Unmarshal(raw, &req.Image); err != nil || server.IsNull(raw) {
		errs = append(errs, server.FieldError{Loc: []string{"body", "image"}, Msg: "Input should be a valid string (base64 PNG or JPEG)", Type: "string_type"})
	}
	return req, append(errs, predictOptions(&req, fields, "body")...)
}

// predictOptions validates the options of a request (threshold, max_detections, return_raw) into
// req; loc is where they came from ("body", "query").
func predictOptions(req *predictRequest, fields map[string]json.RawMessage, loc string) []server.FieldError {
	var errs []server.FieldError
	fail := func(field, typ, format string, args ...any) {
		errs = append(errs, server.FieldError{Loc: []string{loc, field}, Msg: fmt.Sprintf(format, args...), Type: typ})
	}
	if raw, ok := fields["threshold"]; ok {
		switch v, ok := number(raw); {
		case !ok:
			fail("threshold", "float_type", "Input should be a valid number")
		case v < 0:
			fail("threshold", "greater_than_equal", "Input should be greater than or equal to 0")
		case v > 1:
			fail("threshold", "less_than_equal", "Input should be less than or equal to 1")
		default:
			req.Threshold = v
		}
	}
	if raw, ok := fields["max_detections"]; ok {
		switch v, ok := number(raw); {
		case !ok || v != math.Trunc(v):
			fail("max_detections", "int_type", "Input should be a valid integer")
		case v < 1:
			fail("max_detections", "greater_than_equal", "Input should be greater than or equal to 1")
		case v > maxMaxDetections:
			fail("max_detections", "less_than_equal", "Input should be less than or equal to %d", maxMaxDetections)
		default:
			req.MaxDetections = int(v)
		}
	}
	if raw, ok := fields["return_raw"]; ok {
		if err := json.Unmarshal(raw, &req.ReturnRaw); err != nil || server.IsNull(raw) {
			fail("return_raw", "bool_type", "Input should be a valid boolean")
		}
	}
	return errs
}

// number reads a JSON number (not a string, bool or null) as a finite float.
func number(raw json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false // a string, bool, null, array or object
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return 0, false
	}
	v, err := n.Float64()
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// decodeBase64Image strips an optional data: URL prefix and any whitespace
// (wrapped base64), then decodes standard or URL-safe base64, padded or not.
func decodeBase64Image(s string) ([]byte, error) {
	if strings.HasPrefix(s, "data:") {
		header, payload, ok := strings.Cut(s, ",")
		if !ok {
			return nil, fmt.Errorf("image data URL has no ',' before its payload")
		}
		if !strings.HasSuffix(header, ";base64") {
			return nil, fmt.Errorf("image data URL %q is not base64", header)
		}
		s = payload
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\r', '\t':
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	out, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("image is not valid base64: %v", err)
	}
	return out, nil
}
