package pi05

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tinylib/msgp/msgp"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/server"
)

// msgpack action payloads: SGLang's request ({model?, input: {task | prompt, observation, …},
// parameters, runtime}) or a bare observation, as SGLang's action_utils takes both; the OpenPI
// websocket's observations are bare ones. Observation keys of every family are read
// (pi05.Policy.ResolveCameras for the cameras):
//
//	prompt | task; state | observation.state | observation/state | observation/joint_position +
//	observation/gripper_position (DROID); noise | observation.noise; tokens; camera frames under
//	images.<camera>, observation.images.<camera>, <camera>, or a robot family's keys;
//	per request: num_inference_steps, seed, output_format, enable_pi_prefix_cache, and real-time
//	chunking as prev_chunk_left_over, inference_delay, execution_horizon, max_guidance_weight.

// maxStateValues bounds a state vector before it is stored (max_state_dim is at most 32).
const maxStateValues = 1024

// wireAPIError turns a decoding error into a 400 naming the key (a full memory budget into its
// 503 or 413).
func wireAPIError(err error) *server.APIError {
	if aerr := server.MemoryAPIError(err); aerr != nil {
		return aerr
	}
	return &server.APIError{Status: http.StatusBadRequest, Detail: err.Error()}
}

// decodeActionMsgpack decodes a msgpack action API body (the reply is msgpack too when msgpackOut);
// its frames are reserved from mem.
func (m *Model) decodeActionMsgpack(body []byte, msgpackOut bool, mem *server.Reservation) (*actionRequest, *server.APIError) {
	p, _ := m.current()
	root, err := readMap(body, "", 0)
	if err != nil {
		return nil, wireAPIError(err)
	}
	ar := &actionRequest{returnTiming: true, prefixCache: true, msgpackOut: msgpackOut, mem: mem}
	// robot_id sits at the top of both shapes: the envelope's and a bare observation's.
	if ar.robot, err = readRobotID(root); err != nil {
		return nil, wireAPIError(err)
	}
	input, hasInput, err := root.sub("input", 1)
	if err != nil {
		return nil, wireAPIError(err)
	}
	if !hasInput { // a bare observation
		ar.field = func(f string) string { return observationKey(root, f) }
		if err := decodeObservation(p, root, ar); err != nil {
			return nil, wireAPIError(err)
		}
		return ar, m.checkAction(ar)
	}
	if raw, ok := root.get("model"); ok {
		if ar.model, err = readText(raw, "model"); err != nil {
			return nil, wireAPIError(err)
		}
	}
	if err := decodeParameters(root, ar); err != nil {
		return nil, wireAPIError(err)
	}
	if aerr := m.checkAction(ar); aerr != nil {
		return nil, aerr
	}
	obs, _, err := input.sub("observation", 2)
	if err != nil {
		return nil, wireAPIError(err)
	}
	// SGLang lets task, prompt, images, state and noise sit in input too.
	merged := obs
	for i, k := range input.keys {
		if k != "observation" {
			merged.keys, merged.vals = append(merged.keys, k), append(merged.vals, input.vals[i])
		}
	}
	rtcInParameters := ar.req.RTC != nil
	ar.field = func(f string) string {
		if rtcInParameters && strings.HasPrefix(f, "rtc.") {
			return "parameters." + f
		}
		return observationKey(merged, f)
	}
	if err := decodeObservation(p, merged, ar); err != nil {
		return nil, wireAPIError(err)
	}
	return ar, nil
}

// observationKey names a canonical field by where it was found in an observation (for errors).
func observationKey(obs mpMap, f string) string {
	var candidates []string
	switch f {
	case "state":
		candidates = stateKeys
	case "noise":
		candidates = []string{"noise", "observation.noise"}
	case "prompt":
		candidates = []string{"prompt", "task"}
	case "num_steps":
		candidates = []string{"num_inference_steps"}
	}
	for _, c := range candidates {
		if _, ok := obs.get(c); ok {
			return obs.at(c)
		}
	}
	if strings.HasPrefix(f, "rtc.") { // an observation carries lerobot's keyword arguments as keys
		return obs.at(f[4:])
	}
	return obs.at(f)
}

var stateKeys = []string{"state", "observation.state", "observation/state"}

// decodeParameters reads SGLang's parameters and runtime maps.
func decodeParameters(root mpMap, ar *actionRequest) error {
	params, _, err := root.sub("parameters", 1)
	if err != nil {
		return err
	}
	ints := []struct {
		key string
		dst *int
	}{{"num_inference_steps", &ar.req.NumSteps}, {"action_horizon", &ar.horizon}, {"action_dim", &ar.adim}, {"prompt_bucket", &ar.req.PromptBucket}}
	for _, f := range ints {
		if raw, ok := params.get(f.key); ok {
			if *f.dst, err = readInt(raw, params.at(f.key)); err != nil {
				return err
			}
		}
	}
	if raw, ok := params.get("seed"); ok {
		if ar.req.Seed, err = readSeed(raw, params.at("seed")); err != nil {
			return err
		}
	}
	if rtc, ok, err := params.sub("rtc", 2); err != nil {
		return err
	} else if ok {
		if ar.req.RTC, err = decodeRTC(rtc); err != nil {
			return err
		}
	}
	runtime, _, err := root.sub("runtime", 1)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"output_format", &ar.outputFormat}, {"response_format", &ar.responseFormat}} {
		if raw, ok := runtime.get(f.key); ok {
			if *f.dst, err = readText(raw, runtime.at(f.key)); err != nil {
				return err
			}
		}
	}
	if raw, ok := runtime.get("return_timing"); ok {
		if ar.returnTiming, err = readBool(raw, runtime.at("return_timing"), true); err != nil {
			return err
		}
	}
	if raw, ok := runtime.get("prefix_cache"); ok {
		if ar.prefixCache, err = readBool(raw, runtime.at("prefix_cache"), true); err != nil {
			return err
		}
	}
	return nil
}

func readSeed(raw []byte, key string) (*uint64, error) {
	v, err := readScalar(raw, key)
	if err != nil {
		return nil, err
	}
	if v < 0 || v != math.Trunc(v) || v > 1<<53 {
		return nil, wireErr(key, "%v is not a non-negative integer", v)
	}
	s := uint64(v)
	return &s, nil
}

// decodeRTC reads real-time chunking from a map of lerobot's keyword arguments (parameters.rtc, or a
// bare observation's own keys).
func decodeRTC(m mpMap) (*pi05.RTC, error) {
	raw, ok := m.get("prev_chunk_left_over")
	if !ok {
		return nil, wireErr(m.at("prev_chunk_left_over"), "required with real-time chunking")
	}
	prev, err := readNumbers(raw, m.at("prev_chunk_left_over"), pi05.MaxActionDim*64)
	if err != nil {
		return nil, err
	}
	r := &pi05.RTC{}
	switch len(prev.shape) {
	case 2:
		r.PrevRows, r.PrevCols = prev.shape[0], prev.shape[1]
	default:
		return nil, wireErr(m.at("prev_chunk_left_over"), "want a [rows, action_dim] array, got shape %v", prev.shape)
	}
	r.Prev = toFloat32(prev.vals)
	raw, ok = m.get("inference_delay")
	if !ok {
		return nil, wireErr(m.at("inference_delay"), "required with real-time chunking")
	}
	if r.InferenceDelay, err = readInt(raw, m.at("inference_delay")); err != nil {
		return nil, err
	}
	if raw, ok := m.get("execution_horizon"); ok {
		if r.ExecutionHorizon, err = readInt(raw, m.at("execution_horizon")); err != nil {
			return nil, err
		}
	}
	if raw, ok := m.get("max_guidance_weight"); ok {
		v, err := readScalar(raw, m.at("max_guidance_weight"))
		if err != nil {
			return nil, err
		}
		r.MaxGuidance = float32(v)
	}
	return r, nil
}

func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// decodeObservation fills ar from an observation map of any key family.
func decodeObservation(p *pi05.Policy, obs mpMap, ar *actionRequest) error {
	var err error
	for _, k := range []string{"prompt", "task"} {
		if raw, ok := obs.get(k); ok {
			if ar.req.Prompt, err = readText(raw, obs.at(k)); err != nil {
				return err
			}
			break
		}
	}
	if raw, ok := obs.get("tokens"); ok {
		toks, err := readNumbers(raw, obs.at("tokens"), pi05.MaxTokenLen*4)
		if err != nil {
			return err
		}
		ar.req.Tokens = make([]int, len(toks.vals))
		for i, v := range toks.vals {
			if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
				return wireErr(obs.at("tokens"), "token %d is %v, not an integer", i, v)
			}
			ar.req.Tokens[i] = int(v)
		}
	}
	if ar.req.State, err = observationState(obs); err != nil {
		return err
	}
	for _, k := range []string{"noise", "observation.noise"} {
		if raw, ok := obs.get(k); ok {
			n, err := readNumbers(raw, obs.at(k), 64*pi05.MaxActionDim)
			if err != nil {
				return err
			}
			if len(n.shape) != 2 {
				return wireErr(obs.at(k), "want a [horizon, action_dim] array, got shape %v", n.shape)
			}
			ar.req.Noise, ar.req.NoiseRows, ar.req.NoiseCols = toFloat32(n.vals), n.shape[0], n.shape[1]
			break
		}
	}
	if ar.req.Images, err = observationFrames(p, obs, ar.mem); err != nil {
		return err
	}
	// Per-request controls a bare observation carries (SGLang's adapter reads the same keys).
	if raw, ok := obs.get("num_inference_steps"); ok {
		if ar.req.NumSteps, err = readInt(raw, obs.at("num_inference_steps")); err != nil {
			return err
		}
	}
	if raw, ok := obs.get("seed"); ok {
		if ar.req.Seed, err = readSeed(raw, obs.at("seed")); err != nil {
			return err
		}
	}
	if raw, ok := obs.get("output_format"); ok {
		if ar.outputFormat, err = readText(raw, obs.at("output_format")); err != nil {
			return err
		}
	}
	if raw, ok := obs.get("enable_pi_prefix_cache"); ok {
		if ar.prefixCache, err = readBool(raw, obs.at("enable_pi_prefix_cache"), true); err != nil {
			return err
		}
	}
	if _, ok := obs.get("prev_chunk_left_over"); ok {
		if ar.req.RTC, err = decodeRTC(obs); err != nil {
			return err
		}
	}
	return nil
}

// observationState reads the state under any family's key; DROID's is joint_position + gripper_position.
func observationState(obs mpMap) ([]float32, error) {
	for _, k := range stateKeys {
		if raw, ok := obs.get(k); ok {
			n, err := readNumbers(raw, obs.at(k), maxStateValues)
			if err != nil {
				return nil, err
			}
			if len(n.shape) > 1 {
				return nil, wireErr(obs.at(k), "want a vector, got shape %v", n.shape)
			}
			return toFloat32(n.vals), nil
		}
	}
	joints, okJ := obs.get("observation/joint_position")
	grip, okG := obs.get("observation/gripper_position")
	if !okJ && !okG {
		return nil, nil
	}
	if !okJ || !okG {
		return nil, wireErr(obs.key, "DROID state needs both observation/joint_position and observation/gripper_position")
	}
	j, err := readNumbers(joints, obs.at("observation/joint_position"), maxStateValues)
	if err != nil {
		return nil, err
	}
	g, err := readNumbers(grip, obs.at("observation/gripper_position"), maxStateValues)
	if err != nil {
		return nil, err
	}
	return toFloat32(append(j.vals, g.vals...)), nil
}

// observationFrames finds the camera frames of an observation and decodes them in slot order.
func observationFrames(p *pi05.Policy, obs mpMap, mem *server.Reservation) ([]pi05.RGB, error) {
	raws := map[string][]byte{}
	var keys []string
	for i, k := range obs.keys {
		switch {
		case k == "images":
			imgs, err := readMap(obs.vals[i], obs.at("images"), 2)
			if err != nil {
				return nil, err
			}
			if arr, _ := isNumpyMap(imgs); arr {
				return nil, wireErr(obs.at("images"), "want a map camera -> frame, got one array")
			}
			for j, name := range imgs.keys {
				keys = append(keys, "images/"+name)
				raws["images/"+name] = imgs.vals[j]
			}
		case p.IsCameraKey(k):
			keys = append(keys, k)
			raws[k] = obs.vals[i]
		}
	}
	if len(keys) == 0 {
		return nil, wireErr(obs.at("images"), "no camera frame (send images.<camera>, observation.images.<camera> or a robot's camera keys)")
	}
	cams, err := p.ResolveCameras(keys)
	if err != nil {
		var re *pi05.RequestError
		if errors.As(err, &re) {
			return nil, wireErr(obs.at("images"), "%s", re.Msg)
		}
		return nil, err
	}
	var out []pi05.RGB
	for _, c := range cams {
		if c.Slot < 0 {
			continue
		}
		img, err := readFrame(raws[c.Key], displayKey(obs, c.Key), c.ChannelsFirst, mem)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// displayKey writes a camera key as it sits in the request ("images/cam_high" is images.cam_high).
func displayKey(obs mpMap, key string) string {
	if len(key) > 7 && key[:7] == "images/" {
		return obs.at("images." + key[7:])
	}
	return obs.at(key)
}

// readFrame decodes one camera frame: a numpy array (uint8, or float in [0, 1] scaled as openpi
// does), HxWx3 or 3xHxW (by shape, as openpi's _parse_image; channelsFirst requires it), nested
// lists of 0..255, PNG/JPEG bytes, a base64 string, or SGLang's {b64_json: …}. The frame's RGB
// bytes are reserved from mem (a picture's decode too, while it runs).
func readFrame(raw []byte, key string, channelsFirst bool, mem *server.Reservation) (pi05.RGB, error) {
	switch msgp.NextType(raw) {
	case msgp.StrType:
		s, _ := readText(raw, key)
		img, err := pi05.DecodeBase64Image(s, mem)
		return img, wrapFrame(err, key)
	case msgp.BinType:
		b, _, err := msgp.ReadBytesZC(raw)
		if err != nil {
			return pi05.RGB{}, wireErr(key, "%s", describe(err))
		}
		img, err := pi05.DecodeImage(b, mem)
		return img, wrapFrame(err, key)
	case msgp.MapType:
		m, err := readMap(raw, key, 1)
		if err != nil {
			return pi05.RGB{}, err
		}
		if arr, _ := isNumpyMap(m); arr {
			a, err := readNDArray(m)
			if err != nil {
				return pi05.RGB{}, err
			}
			img, err := arrayFrame(a, key, channelsFirst)
			return img, reserveFrame(img, err, mem)
		}
		for _, k := range []string{"b64_json", "base64"} {
			if v, ok := m.get(k); ok {
				s, err := readText(v, m.at(k))
				if err != nil {
					return pi05.RGB{}, err
				}
				img, err := pi05.DecodeBase64Image(s, mem)
				return img, wrapFrame(err, m.at(k))
			}
		}
		return pi05.RGB{}, wireErr(key, "a map that is neither a numpy array nor {b64_json}")
	case msgp.ArrayType:
		var shape []int
		var pix []uint8
		err := readNested(raw, key, 0, &shape, func(b []byte) ([]byte, error) {
			if len(pix) >= 3*(16<<20) {
				return nil, wireErr(key, "more pixels than a frame may have")
			}
			v, rest, err := msgp.ReadInt64Bytes(b)
			if err != nil || v < 0 || v > 255 {
				return nil, wireErr(key, "pixel %d is not an integer in 0..255", len(pix))
			}
			pix = append(pix, uint8(v))
			return rest, nil
		})
		if err != nil {
			return pi05.RGB{}, err
		}
		img, err := arrayFrame(ndarray{dtype: npDtype{str: "|u1", kind: 'u', size: 1}, shape: shape, data: pix}, key, channelsFirst)
		return img, reserveFrame(img, err, mem)
	}
	return pi05.RGB{}, wireErr(key, "want a camera frame, got %s", msgp.NextType(raw))
}

// reserveFrame reserves the RGB bytes of a frame sent as an array (a picture reserves its own
// while it is decoded), unless err says there is no frame.
func reserveFrame(img pi05.RGB, err error, mem *server.Reservation) error {
	if err != nil {
		return err
	}
	return mem.Reserve(int64(len(img.Pix)))
}

func wrapFrame(err error, key string) error {
	if err == nil || server.MemoryAPIError(err) != nil { // a full budget is answered as such
		return err
	}
	return wireErr(key, "%v", err)
}

// arrayFrame turns a 3-D array into an RGB frame; an HxWx3 uint8 array is used in place.
func arrayFrame(a ndarray, key string, channelsFirst bool) (pi05.RGB, error) {
	if len(a.shape) != 3 || (a.shape[0] != 3 && a.shape[2] != 3) || (channelsFirst && a.shape[0] != 3) {
		want := "HxWx3 or 3xHxW"
		if channelsFirst {
			want = "3xHxW (this camera sends channels first)"
		}
		return pi05.RGB{}, wireErr(key, "shape %v, want %s", a.shape, want)
	}
	if !slices.Contains([]string{"|u1", "<f4", "<f8", ">f4", ">f8"}, a.dtype.str) {
		return pi05.RGB{}, wireErr(key, "dtype %s, want uint8 (|u1) or float in [0, 1] (<f4, <f8)", a.dtype.str)
	}
	chw := a.shape[0] == 3 // openpi's rule: a leading 3 is channels first
	h, w := a.shape[0], a.shape[1]
	if chw {
		h, w = a.shape[1], a.shape[2]
	}
	if h <= 0 || w <= 0 {
		return pi05.RGB{}, wireErr(key, "empty frame of shape %v", a.shape)
	}
	if !chw && a.dtype.str == "|u1" {
		img, err := pi05.NewRGB(h, w, a.data)
		return img, wrapFrame(err, key)
	}
	pix := make([]uint8, h*w*3)
	for y := range h {
		for x := range w {
			for c := range 3 {
				src := (y*w+x)*3 + c
				if chw {
					src = (c*h+y)*w + x
				}
				v, err := pixel(a, src)
				if err != nil {
					return pi05.RGB{}, wireErr(key, "%v", err)
				}
				pix[(y*w+x)*3+c] = v
			}
		}
	}
	img, err := pi05.NewRGB(h, w, pix)
	return img, wrapFrame(err, key)
}

// pixel reads item i as a uint8: as is, or openpi's (255 * x).astype(uint8) of a float in [0, 1]
// (in the array's own precision, truncated).
func pixel(a ndarray, i int) (uint8, error) {
	if a.dtype.kind == 'u' {
		return a.data[i], nil
	}
	v := a.dtype.value(a.data, i)
	if !(v >= 0 && v <= 1) {
		return 0, fmt.Errorf("value %v at item %d: float frames must lie in [0, 1]", v, i)
	}
	if a.dtype.size == 4 {
		return uint8(float32(255) * float32(v)), nil
	}
	return uint8(255 * v), nil
}

// readRobotID reads robot_id of a msgpack request: a string or an integer ("" when absent).
func readRobotID(root mpMap) (string, error) {
	raw, ok := root.get("robot_id")
	if !ok {
		return "", nil
	}
	if s, err := readText(raw, "robot_id"); err == nil && s != "" {
		return s, nil
	}
	n, err := readInt(raw, "robot_id")
	if err != nil {
		return "", wireErr("robot_id", "want a non-empty string or an integer")
	}
	return strconv.Itoa(n), nil
}
