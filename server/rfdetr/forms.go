package rfdetr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/server"
)

// Besides the original server's JSON body, POST /predict takes the picture itself, so that any
// picture can be sent from its file (`curl --data-binary @photo.jpg`, `curl -F image=@photo.jpg`)
// instead of as a base64 argument, which Linux refuses past 128 KiB.

// predictForms says in an error which request bodies POST /predict accepts.
const predictForms = `POST /predict takes a JSON object {"image": "<base64 PNG or JPEG>", "threshold": …}, ` +
	`a PNG or JPEG file as the body (Content-Type image/png or image/jpeg; options as query parameters, ` +
	`?threshold=0.5&max_detections=100&return_raw=false), or multipart/form-data with the file in the field "image" ` +
	`(and the options as fields)`

// Bounds of a multipart body beyond the body limit: its options are a few bytes each.
const (
	maxFormParts      = 16
	maxFormFieldBytes = 1 << 10
)

// rfdetrBody reads a validated request out of a body read whole: JSON (the original contract),
// the picture itself (a body that starts as a PNG or JPEG does, whatever its Content-Type, since
// `curl --data-binary` without -H says application/x-www-form-urlencoded) with the options in the
// query, or multipart/form-data. mem reserves a multipart picture's copy; the reservation of the
// body itself is the caller's.
func rfdetrBody(contentType string, query url.Values, body []byte, mem *server.Reservation) (predictRequest, []server.FieldError, *server.APIError) {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	switch {
	case mediaType == "multipart/form-data":
		return predictMultipart(params["boundary"], body, mem)
	case imagemem.Format(body) != "":
		req, errs := predictQuery(query)
		req.Picture = body
		return req, errs, nil
	case mediaType == "image/png" || mediaType == "image/jpeg":
		return predictRequest{}, nil, &server.APIError{Status: http.StatusBadRequest, Detail: fmt.Sprintf("the body (Content-Type %s) is not a PNG or JPEG file (first bytes % x); %s",
			mediaType, body[:min(len(body), 8)], predictForms)}
	}
	req, errs := parsePredict(body)
	return req, errs, nil
}

// predictQuery reads the options of a raw picture body from the URL's query.
func predictQuery(query url.Values) (predictRequest, []server.FieldError) {
	req := predictRequest{Threshold: defaultThreshold, MaxDetections: defaultMaxDetections}
	fields := map[string]json.RawMessage{}
	for k, v := range query {
		if len(v) > 0 {
			fields[k] = formValue(v[len(v)-1])
		}
	}
	return req, predictOptions(&req, fields, "query")
}

// predictMultipart reads a multipart/form-data body: the picture in the field "image" (a file
// part), the options as fields.
func predictMultipart(boundary string, body []byte, mem *server.Reservation) (predictRequest, []server.FieldError, *server.APIError) {
	req := predictRequest{Threshold: defaultThreshold, MaxDetections: defaultMaxDetections}
	bad := func(format string, args ...any) (predictRequest, []server.FieldError, *server.APIError) {
		return req, nil, &server.APIError{Status: http.StatusBadRequest, Detail: "multipart body: " + fmt.Sprintf(format, args...) + "; " + predictForms}
	}
	if boundary == "" {
		return bad("the Content-Type has no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	fields := map[string]json.RawMessage{}
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return bad("%v", err)
		}
		if n == maxFormParts {
			return bad("more than %d parts", maxFormParts)
		}
		name := part.FormName()
		if name == "image" {
			if req.Picture != nil {
				return bad(`two "image" parts`)
			}
			// A part is at most the body: reserving it keeps the copy inside the request budget.
			if err := mem.Reserve(int64(len(body))); err != nil {
				return req, nil, server.MemoryAPIError(err)
			}
			if req.Picture, err = io.ReadAll(part); err != nil {
				return bad("the image part: %v", err)
			}
			mem.Release(int64(len(body) - len(req.Picture)))
			continue
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFormFieldBytes+1))
		if err != nil {
			return bad("field %q: %v", name, err)
		}
		if len(v) > maxFormFieldBytes {
			return bad("field %q is over %d bytes", name, maxFormFieldBytes)
		}
		fields[name] = formValue(string(v))
	}
	var errs []server.FieldError
	if req.Picture == nil {
		errs = append(errs, server.FieldError{Loc: []string{"body", "image"}, Msg: `Field required (the picture as the file of the field "image")`, Type: "missing"})
	}
	return req, append(errs, predictOptions(&req, fields, "body")...), nil
}

// formValue is a query or form value as the JSON predictOptions checks: a number or boolean as
// itself, anything else a string (which the checks refuse with the field's expected type).
func formValue(v string) json.RawMessage {
	v = strings.TrimSpace(v)
	if _, err := strconv.ParseFloat(v, 64); err == nil && json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	if v == "true" || v == "false" {
		return json.RawMessage(v)
	}
	b, _ := json.Marshal(v)
	return b
}
