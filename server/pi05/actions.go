package pi05

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/server"
)

// SGLang's action API (POST /v1/actions/generations, the /v1/actions/realtime websocket, GET
// /v1/actions/metadata), read from SGLang's entrypoints (action_api.py, action_utils.py): one decoded
// actionRequest whatever the wire format, one envelope or raw payload back.

// actionRequest is one decoded action API request.
type actionRequest struct {
	model          string
	req            pi05.Request
	horizon, adim  int    // parameters.action_horizon / action_dim (0 = not given)
	outputFormat   string // "list" | "numpy" ("" = the wire's default)
	responseFormat string // "envelope" | "raw" ("" = envelope)
	returnTiming   bool
	prefixCache    bool   // the request allows the prefix cache (SGLang's default "auto": yes)
	msgpackOut     bool   // the reply is msgpack (numpy actions possible)
	robot          string // robot_id of the body ("" = none: the header's, the connection's, or anonymous)
	field          func(string) string
	mem            *server.Reservation // the request's share of the memory budget (body, frames)
}

// sglangField maps canonical field names to the SGLang request's keys.
func sglangField(f string) string {
	switch {
	case f == "images" || f == "state" || f == "noise":
		return "input.observation." + f
	case f == "tokens":
		return "input.tokens"
	case f == "prompt":
		return "input.task"
	case f == "num_steps":
		return "parameters.num_inference_steps"
	case f == "prompt_bucket":
		return "parameters.prompt_bucket"
	case strings.HasPrefix(f, "rtc."):
		return "parameters." + f
	}
	return f
}

// generationsBody is SGLang's POST /v1/actions/generations request in JSON.
type generationsBody struct {
	Model   string          `json:"model"`
	RobotID json.RawMessage `json:"robot_id"`
	Input   struct {
		Task        *string         `json:"task"`
		Prompt      *string         `json:"prompt"`
		Tokens      json.RawMessage `json:"tokens"`
		Observation struct {
			Images json.RawMessage `json:"images"`
			State  json.RawMessage `json:"state"`
			Noise  json.RawMessage `json:"noise"`
		} `json:"observation"`
	} `json:"input"`
	Parameters struct {
		NumInferenceSteps int      `json:"num_inference_steps"`
		ActionHorizon     int      `json:"action_horizon"`
		ActionDim         int      `json:"action_dim"`
		Seed              *uint64  `json:"seed"`
		PromptBucket      int      `json:"prompt_bucket"`
		RTC               *rtcBody `json:"rtc"`
	} `json:"parameters"`
	Runtime struct {
		ReturnTiming   *bool           `json:"return_timing"`
		OutputFormat   string          `json:"output_format"`
		ResponseFormat string          `json:"response_format"`
		PrefixCache    json.RawMessage `json:"prefix_cache"` // true, false or "auto"
		// cuda_graph is accepted and has no effect: there is no graph capture on the CPU (the
		// metadata says so).
	} `json:"runtime"`
	// frames is input.observation.images already split by splitGenerations (nil: not split).
	frames *splitFrames
}

// rtcBody is real-time chunking in a JSON request: lerobot's keyword arguments.
type rtcBody struct {
	PrevChunkLeftOver json.RawMessage `json:"prev_chunk_left_over"`
	InferenceDelay    *int            `json:"inference_delay"`
	ExecutionHorizon  int             `json:"execution_horizon"`
	MaxGuidanceWeight float32         `json:"max_guidance_weight"`
}

func (b *rtcBody) decode() (*pi05.RTC, *server.APIError) {
	if b.InferenceDelay == nil {
		return nil, &server.APIError{Status: http.StatusBadRequest, Detail: "parameters.rtc.inference_delay: required with rtc"}
	}
	if len(b.PrevChunkLeftOver) == 0 || server.IsNull(b.PrevChunkLeftOver) {
		return nil, &server.APIError{Status: http.StatusBadRequest, Detail: "parameters.rtc.prev_chunk_left_over: required with rtc"}
	}
	r := &pi05.RTC{InferenceDelay: *b.InferenceDelay, ExecutionHorizon: b.ExecutionHorizon, MaxGuidance: b.MaxGuidanceWeight}
	var err error
	if r.Prev, r.PrevRows, r.PrevCols, err = floatMatrix(b.PrevChunkLeftOver); err != nil {
		return nil, &server.APIError{Status: http.StatusBadRequest, Detail: "parameters.rtc.prev_chunk_left_over: " + err.Error()}
	}
	return r, nil
}

// decodeActionJSON decodes a JSON action request; its frames are reserved from mem.
func (m *Model) decodeActionJSON(body []byte, msgpackOut bool, mem *server.Reservation) (*actionRequest, *server.APIError) {
	b, ok := splitGenerations(body)
	if !ok {
		b = generationsBody{}
		if aerr := decodeObject(body, &b); aerr != nil {
			return nil, aerr
		}
	}
	ar := &actionRequest{model: b.Model, horizon: b.Parameters.ActionHorizon, adim: b.Parameters.ActionDim,
		outputFormat: b.Runtime.OutputFormat, responseFormat: b.Runtime.ResponseFormat, returnTiming: true,
		prefixCache: true, msgpackOut: msgpackOut, field: sglangField, mem: mem}
	var aerr *server.APIError
	if ar.robot, aerr = robotIDValue(b.RobotID); aerr != nil {
		return nil, aerr
	}
	if aerr := m.checkAction(ar); aerr != nil {
		return nil, aerr
	}
	if b.Runtime.ReturnTiming != nil {
		ar.returnTiming = *b.Runtime.ReturnTiming
	}
	if pc := b.Runtime.PrefixCache; len(pc) > 0 && !server.IsNull(pc) {
		var v any
		_ = json.Unmarshal(pc, &v)
		switch v {
		case true, "true":
		case false, "false":
			ar.prefixCache = false
		case "auto":
		default:
			return nil, &server.APIError{Status: http.StatusBadRequest, Detail: fmt.Sprintf("runtime.prefix_cache: %s is not true, false or \"auto\"", pc)}
		}
	}
	task := ""
	switch {
	case b.Input.Task != nil:
		task = *b.Input.Task
	case b.Input.Prompt != nil:
		task = *b.Input.Prompt
	}
	ar.req = pi05.Request{Prompt: task, NumSteps: b.Parameters.NumInferenceSteps, Seed: b.Parameters.Seed, PromptBucket: b.Parameters.PromptBucket}
	if aerr := commonRequest(&ar.req, b.Input.Observation.State, b.Input.Tokens, b.Input.Observation.Noise, sglangField); aerr != nil {
		return nil, aerr
	}
	if b.Parameters.RTC != nil {
		if ar.req.RTC, aerr = b.Parameters.RTC.decode(); aerr != nil {
			return nil, aerr
		}
	}
	p, _ := m.current()
	if ar.req.Images, aerr = observationImages(p, b.Input.Observation.Images, b.frames, mem); aerr != nil {
		return nil, aerr
	}
	return ar, nil
}

// observationImages decodes input.observation.images of a JSON request: an object camera -> frame
// (slots by camera name, pi05.Policy.ResolveCameras) or a list of frames in slot order. No frame
// is decoded unless the cameras fit the policy's slots. split, when not nil, is raw already split.
func observationImages(p *pi05.Policy, raw json.RawMessage, split *splitFrames, mem *server.Reservation) ([]pi05.RGB, *server.APIError) {
	bad := func(format string, args ...any) *server.APIError {
		return &server.APIError{Status: http.StatusBadRequest, Detail: "input.observation.images" + fmt.Sprintf(format, args...)}
	}
	frameErr := func(at string, err error) *server.APIError {
		if aerr := server.MemoryAPIError(err); aerr != nil {
			return aerr
		}
		return bad("%s: %v", at, err)
	}
	if len(raw) == 0 || server.IsNull(raw) {
		return nil, bad(": missing (an object camera -> HxWx3 uint8 array or base64 PNG/JPEG)")
	}
	if raw = bytes.TrimSpace(raw); raw[0] == '[' {
		var list []json.RawMessage
		if split != nil {
			list = split.list
		} else if err := json.Unmarshal(raw, &list); err != nil {
			return nil, bad(": want a list of frames: %v", err)
		}
		if aerr := checkFrameCount(p, len(list)); aerr != nil {
			aerr.Detail = "input.observation.images: " + aerr.Detail
			return nil, aerr
		}
		var out []pi05.RGB
		for i, v := range list {
			var decoded *pi05.RGB
			if split != nil {
				decoded = split.listImg[i]
			}
			img, err := frameValue(decoded, v, mem)
			if err != nil {
				return nil, frameErr(fmt.Sprintf("[%d]", i), err)
			}
			out = append(out, img)
		}
		return out, nil
	}
	var byCam map[string]json.RawMessage
	if split != nil {
		byCam = split.byCam
	} else if err := json.Unmarshal(raw, &byCam); err != nil {
		return nil, bad(": want an object camera -> image: %v", err)
	}
	names := make([]string, 0, len(byCam))
	for n := range byCam {
		names = append(names, n)
	}
	cams, err := p.ResolveCameras(names)
	if err != nil {
		var re *pi05.RequestError
		if errors.As(err, &re) {
			return nil, bad(": %s", re.Msg)
		}
		return nil, bad(": %v", err)
	}
	out := make([]pi05.RGB, 0, len(cams))
	for _, c := range cams {
		if c.Slot < 0 {
			continue
		}
		var decoded *pi05.RGB
		if split != nil {
			decoded = split.camImg[c.Key]
		}
		img, err := frameValue(decoded, byCam[c.Key], mem)
		if err != nil {
			return nil, frameErr("."+c.Key, err)
		}
		out = append(out, img)
	}
	return out, nil
}

// checkAction checks what a request asks of the server (before its frames are decoded).
func (m *Model) checkAction(ar *actionRequest) *server.APIError {
	p, _ := m.current()
	if ar.model != "" && ar.model != m.srv.HFModel {
		return &server.APIError{Status: http.StatusNotFound, Detail: fmt.Sprintf("model: %q is not served here (this server serves %q)", ar.model, m.srv.HFModel)}
	}
	switch ar.outputFormat {
	case "", "list":
	case "numpy":
		if !ar.msgpackOut {
			return &server.APIError{Status: http.StatusBadRequest, Detail: "runtime.output_format: numpy arrays need a msgpack response (Accept: application/msgpack); use list for JSON"}
		}
	default:
		return &server.APIError{Status: http.StatusBadRequest, Detail: fmt.Sprintf("runtime.output_format: %q is not list or numpy", ar.outputFormat)}
	}
	switch ar.responseFormat {
	case "", "envelope", "raw":
	default:
		return &server.APIError{Status: http.StatusBadRequest, Detail: fmt.Sprintf("runtime.response_format: %q is not envelope or raw", ar.responseFormat)}
	}
	if h := ar.horizon; h != 0 && h != m.srv.ActionHorizon {
		return &server.APIError{Status: http.StatusBadRequest, Detail: fmt.Sprintf("parameters.action_horizon: %d differs from this server's PI05_ACTION_HORIZON %d (presets are fixed at start)", h, m.srv.ActionHorizon)}
	}
	if d := ar.adim; d != 0 && d != p.Dims.ActionDim {
		return &server.APIError{Status: http.StatusBadRequest, Detail: fmt.Sprintf("parameters.action_dim: %d differs from the checkpoint's padded action dimension %d", d, p.Dims.ActionDim)}
	}
	return nil
}

// numpyOut reports whether the actions go out as a numpy array: msgpack replies default to numpy
// (SGLang), unless the request asks for lists.
func (ar *actionRequest) numpyOut() bool { return ar.msgpackOut && ar.outputFormat != "list" }

// act runs a checked request for its robot.
func (m *Model) act(ctx context.Context, start time.Time, ar *actionRequest, rec server.Recorder) (*inference, *server.APIError) {
	p, _ := m.current()
	ar.req.PrefixCache = ar.prefixCache && p.Cache != nil
	return m.infer(ctx, start, ar.robot, &ar.req, ar.field, ar.mem, rec)
}

// actionValues is the action chunk as a list of rows or, for msgpack clients, a numpy array.
func actionValues(acts [][]float32, numpy bool) any {
	if numpy {
		return matrixArray(acts)
	}
	return acts
}

func (m *Model) cacheReport(inf *inference) map[string]any {
	p, _ := m.current()
	return map[string]any{"enabled": inf.prep.PrefixCache, "available": p.Cache != nil, "hit": inf.res.PrefixCacheHit}
}

func (inf *inference) timings(start time.Time) map[string]float64 {
	return map[string]float64{
		"preprocess_ms": server.Millis(inf.preprocess), "vision_ms": server.Millis(inf.res.Timing.Vision), "prefix_ms": server.Millis(inf.res.Timing.Prefix),
		"denoise_ms": server.Millis(inf.res.Timing.Expert), "inference_ms": server.Millis(inf.inferenceTime()), "total_ms": server.Millis(time.Since(start)),
	}
}

// envelope is SGLang's action.generation response.
func (m *Model) envelope(ar *actionRequest, inf *inference, start time.Time) map[string]any {
	numpy := ar.numpyOut()
	acts := inf.res.Actions
	out := map[string]any{
		"id":      "actgen-" + randomID(),
		"object":  "action.generation",
		"created": time.Now().Unix(),
		"model":   m.srv.HFModel,
		"data": []any{map[string]any{
			"index": 0, "input_index": 0, "candidate_index": 0,
			"action": map[string]any{
				"type": "continuous", "values": actionValues(acts, numpy), "shape": []int{len(acts), len(acts[0])},
				"dtype": "float32", "normalized": inf.res.Normalized,
			},
			"num_inference_steps": inf.prep.Steps,
			"prompt_truncated":    inf.prep.Prompt.Truncated,
			"num_tokens":          len(inf.prep.Prompt.Tokens),
			"seed":                inf.prep.Seed,
		}},
		"usage": map[string]any{"action_horizon": len(acts), "action_dim": len(acts[0]), "denoise_steps": inf.prep.Steps,
			"prefix_cache_hit": inf.res.PrefixCacheHit},
		"cache": m.cacheReport(inf),
	}
	if ar.returnTiming {
		out["timings"] = inf.timings(start)
	}
	return out
}

// rawPayload is the policy payload of runtime.response_format "raw".
func (m *Model) rawPayload(ar *actionRequest, inf *inference, start time.Time) map[string]any {
	numpy := ar.numpyOut()
	out := map[string]any{"actions": actionValues(inf.res.Actions, numpy), "normalized": inf.res.Normalized,
		"prompt_truncated": inf.prep.Prompt.Truncated, "cache": m.cacheReport(inf)}
	if ar.returnTiming {
		out["policy_timing"] = inf.timings(start)
	}
	return out
}

// actionMetadata describes the served policy: GET /v1/actions/metadata, and the first frame of both
// websockets.
func (m *Model) actionMetadata() map[string]any {
	p, _ := m.current()
	stateDim := stateDim(p)
	cache := map[string]any{"enabled": p.Cache != nil}
	if p.Cache != nil {
		cache["limit_bytes"] = p.Cache.Stats().Limit
	}
	prefixDefault := any(false)
	if p.Cache != nil {
		prefixDefault = "auto"
	}
	image := []int{p.Dims.Image, p.Dims.Image}
	return map[string]any{
		"object":             "action.metadata",
		"model":              m.srv.HFModel,
		"policy_family":      "pi05",
		"cameras":            p.Config.Cameras(),
		"num_cameras":        m.srv.NumImages,
		"image_size":         image,
		"state_dim":          stateDim,
		"action_horizon":     m.srv.ActionHorizon,
		"action_dim":         p.Config.ActionDim(),
		"padded_action_dim":  p.Dims.ActionDim,
		"normalized_actions": p.Norm.Action == nil,
		"prompt_buckets":     pi05.PromptBuckets(m.srv.NumImages),
		"token_len":          p.Server.TokenLen,
		"input":              map[string]any{"image_keys": p.Config.Cameras(), "image_size": image, "state_dim": stateDim},
		"output": map[string]any{"action_type": "continuous", "action_horizon": m.srv.ActionHorizon,
			"action_dim": p.Config.ActionDim(), "padded_action_dim": p.Dims.ActionDim, "dtype": "float32"},
		"defaults": map[string]any{"num_inference_steps": m.srv.NumSteps, "action_horizon": m.srv.ActionHorizon,
			"response_format": "envelope", "output_format": map[string]string{"json": "list", "msgpack": "numpy"}, "prefix_cache": prefixDefault, "cuda_graph": false},
		"formats": []string{"application/json", "application/msgpack"},
		"capabilities": map[string]any{"exact_prefix_cache": p.Cache != nil, "cuda_graph": false, "realtime_websocket": true,
			"openpi_websocket": true, "batch_inputs": false, "multiple_candidates": false, "real_time_chunking": true},
		"prefix_cache": cache,
		"real_time_chunking": map[string]any{"fields": []string{"prev_chunk_left_over", "inference_delay", "execution_horizon", "max_guidance_weight"},
			"defaults": map[string]any{"execution_horizon": pi05.DefaultExecutionHorizon, "max_guidance_weight": pi05.DefaultMaxGuidance}, "schedule": "linear"},
		"websocket": map[string]any{
			"realtime": map[string]any{"path": "/v1/actions/realtime", "encoding": "msgpack-numpy",
				"request": "a /v1/actions/generations body", "reply": "action.generation envelope + server_timing"},
			"openpi": map[string]any{"paths": []string{"/openpi/policy", "/"}, "health": "/healthz", "encoding": "msgpack-numpy",
				"reply": "actions, policy_timing, server_timing", "camera_keys": cameraKeys(p),
				"state_keys":  []string{"observation.state", "observation/state", "state", "observation/joint_position + observation/gripper_position"},
				"prompt_keys": []string{"prompt", "task"}},
		},
	}
}

// wantsMsgpack decides the response format of POST /v1/actions/generations as SGLang does: msgpack
// when the body or Accept names msgpack, unless Accept asks for JSON and not msgpack.
func wantsMsgpack(r *http.Request) bool {
	ct, acc := strings.ToLower(r.Header.Get("Content-Type")), strings.ToLower(r.Header.Get("Accept"))
	if strings.Contains(acc, "msgpack") {
		return true
	}
	return strings.Contains(ct, "msgpack") && !strings.Contains(acc, "json")
}

// writeMsgpack writes v as application/msgpack (a value that cannot be encoded is a 500 in JSON).
func writeMsgpack(w http.ResponseWriter, status int, v any) {
	body, err := packMsgpack(v)
	if err != nil {
		server.WriteDetail(w, http.StatusInternalServerError, "cannot encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/msgpack")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// cameraKeys is the camera key mapping as plain maps (msgpack and JSON write them alike).
func cameraKeys(p *pi05.Policy) []any {
	var out []any
	for _, k := range p.CameraKeys() {
		e := map[string]any{"key": k.Key, "family": k.Family, "camera": k.Camera, "slot": k.Slot}
		if k.ChannelsFirst {
			e["channels_first"] = true
		}
		out = append(out, e)
	}
	return out
}
