package pi05

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
)

// testObservation is one observation sent every way the server takes it: JSON (HxWx3 lists),
// msgpack-numpy (SGLang's envelope or a bare OpenPI observation).
type testObservation struct {
	names  []string  // camera names (the tiny checkpoint has none: slots by name order)
	frames [][]uint8 // HxWx3
	h, w   []int
	task   string
	state  []float32
	noise  []float32 // 10 x 32
}

func newTestObservation(t testing.TB) testObservation {
	t.Helper()
	o := testObservation{names: []string{"base", "wrist"}, task: "open the drawer", state: []float32{0.3, -0.7}}
	for i, size := range [][2]int{{33, 21}, {16, 16}} {
		_, arr := pi05Frame(t, size[0], size[1], 3+6*i)
		pix := make([]uint8, 0, 3*size[0]*size[1])
		for _, row := range arr {
			for _, px := range row {
				pix = append(pix, uint8(px[0]), uint8(px[1]), uint8(px[2]))
			}
		}
		o.frames, o.h, o.w = append(o.frames, pix), append(o.h, size[1]), append(o.w, size[0])
	}
	for i := range 10 * 32 {
		o.noise = append(o.noise, float32(float64(i%7-3)/3))
	}
	return o
}

func (o testObservation) noiseRows() [][]float32 {
	var rows [][]float32
	for r := range 10 {
		rows = append(rows, o.noise[r*32:(r+1)*32])
	}
	return rows
}

// jsonBody is the SGLang JSON request with frames as nested lists.
func (o testObservation) jsonBody(runtimeJSON string) string {
	images := map[string]any{}
	for i, n := range o.names {
		rows := make([][][3]int, o.h[i])
		for y := range rows {
			rows[y] = make([][3]int, o.w[i])
			for x := range rows[y] {
				p := o.frames[i][(y*o.w[i]+x)*3:]
				rows[y][x] = [3]int{int(p[0]), int(p[1]), int(p[2])}
			}
		}
		images[n] = rows
	}
	body := map[string]any{"input": map[string]any{"task": o.task, "observation": map[string]any{"images": images, "state": o.state, "noise": o.noiseRows()}}}
	b, _ := json.Marshal(body)
	if runtimeJSON != "" {
		b = append(b[:len(b)-1], []byte(`, "runtime": `+runtimeJSON+`}`)...)
	}
	return string(b)
}

func (o testObservation) images() map[string]any {
	images := map[string]any{}
	for i, n := range o.names {
		images[n] = npArray{"|u1", []int{o.h[i], o.w[i], 3}, o.frames[i]}
	}
	return images
}

// msgpackEnvelope is the SGLang request in msgpack-numpy.
func (o testObservation) msgpackEnvelope(t testing.TB, runtime map[string]any) []byte {
	body := map[string]any{"input": map[string]any{"task": o.task, "observation": map[string]any{
		"images": o.images(),
		"state":  float32Array(o.state, len(o.state)),
		"noise":  float32Array(o.noise, 10, 32),
	}}}
	if runtime != nil {
		body["runtime"] = runtime
	}
	return mustPack(t, body)
}

// bareObservation is the same observation as an OpenPI client sends it (SGLang's adapter keys).
func (o testObservation) bareObservation(t testing.TB, extra map[string]any) map[string]any {
	obs := map[string]any{"task": o.task, "observation.state": float32Array(o.state, len(o.state)),
		"noise": float32Array(o.noise, 10, 32)}
	for i, n := range o.names {
		obs["observation.images."+n] = npArray{"|u1", []int{o.h[i], o.w[i], 3}, o.frames[i]}
	}
	for k, v := range extra {
		obs[k] = v
	}
	return obs
}

func postBody(t testing.TB, url string, body []byte, header ...string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

func unpack(t testing.TB, b []byte) map[string]any {
	t.Helper()
	v, rest, err := msgp.ReadIntfBytes(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("reply is not one msgpack value: %v (%d bytes left)", err, len(rest))
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("reply is %T, not a map", v)
	}
	return m
}

// actionBits returns actions as float32 bits, from a numpy map, nested lists of float32 (msgpack)
// or JSON numbers.
func actionBits(t *testing.T, v any) []uint32 {
	t.Helper()
	var out []uint32
	switch a := v.(type) {
	case map[string]any:
		if a["__ndarray__"] != true || a["dtype"] != "<f4" {
			t.Fatalf("not a float32 ndarray: %v", a)
		}
		data := a["data"].([]byte)
		for i := 0; i < len(data); i += 4 {
			out = append(out, binary.LittleEndian.Uint32(data[i:]))
		}
	case []any:
		for _, row := range a {
			for _, x := range row.([]any) {
				switch f := x.(type) {
				case float32:
					out = append(out, math.Float32bits(f))
				case float64: // JSON: the shortest decimal of a float32 parses back to it
					out = append(out, math.Float32bits(float32(f)))
				default:
					t.Fatalf("action value %T", x)
				}
			}
		}
	default:
		t.Fatalf("actions are %T", v)
	}
	return out
}

func envelopeActions(t *testing.T, env map[string]any) []uint32 {
	t.Helper()
	data, ok := env["data"].([]any)
	if !ok || len(data) != 1 {
		t.Fatalf("envelope without data: %v", env)
	}
	return actionBits(t, data[0].(map[string]any)["action"].(map[string]any)["values"])
}

// The same observation and noise give bit-identical actions over JSON, msgpack with numpy or list
// output, the raw payload, JSON in with msgpack out, and a bare OpenPI-style observation.
func TestPI05MsgpackMatchesJSON(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	url := ts.URL + "/v1/actions/generations"
	o := newTestObservation(t)
	status, jsonOut := postJSON(t, url, o.jsonBody(""))
	if status != http.StatusOK {
		t.Fatalf("JSON: %d %v", status, jsonOut)
	}
	want := envelopeActions(t, jsonOut)
	if len(want) != 10*32 {
		t.Fatalf("%d action values", len(want))
	}
	mp := []string{"Content-Type", "application/msgpack", "Accept", "application/msgpack"}
	for _, tc := range []struct {
		name   string
		body   []byte
		header []string
		raw    bool
	}{
		{"msgpack numpy envelope", o.msgpackEnvelope(t, nil), mp, false},
		{"msgpack list envelope", o.msgpackEnvelope(t, map[string]any{"output_format": "list"}), mp, false},
		{"msgpack raw", o.msgpackEnvelope(t, map[string]any{"response_format": "raw", "return_timing": false}), mp, true},
		{"msgpack body, no Accept", o.msgpackEnvelope(t, nil), mp[:2], false},
		{"JSON in, msgpack out", []byte(o.jsonBody("")), []string{"Content-Type", "application/json", "Accept", "application/msgpack"}, false},
		{"bare observation", mustPack(t, o.bareObservation(t, nil)), mp, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ctype, body := postBody(t, url, tc.body, tc.header...)
			if status != http.StatusOK || ctype != "application/msgpack" {
				t.Fatalf("status %d %s: %s", status, ctype, body)
			}
			out := unpack(t, body)
			got := []uint32(nil)
			if tc.raw {
				got = actionBits(t, out["actions"])
				if out["policy_timing"] != nil {
					t.Error("return_timing false, policy_timing sent")
				}
			} else {
				got = envelopeActions(t, out)
				if out["object"] != "action.generation" || out["timings"] == nil {
					t.Errorf("envelope %v", out)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Error("actions differ from the JSON path's")
			}
		})
	}
	// A JSON reply to a msgpack body when the client asks for JSON only.
	status, ctype, body := postBody(t, url, o.msgpackEnvelope(t, map[string]any{"output_format": "list"}), "Content-Type", "application/msgpack", "Accept", "application/json")
	var env map[string]any
	if status != http.StatusOK || ctype != "application/json" || json.Unmarshal(body, &env) != nil || fmt.Sprint(envelopeActions(t, env)) != fmt.Sprint(want) {
		t.Errorf("msgpack in, JSON out: %d %s", status, ctype)
	}
}

// Bad msgpack bodies over HTTP: 400 naming the key, never a crash or a declared-size allocation;
// the server keeps answering.
func TestPI05MsgpackBadBodies(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	url := ts.URL + "/v1/actions/generations"
	o := newTestObservation(t)
	mp := []string{"Content-Type", "application/msgpack"}
	obs := func(key string, v any) []byte {
		return mustPack(t, o.bareObservation(t, map[string]any{key: v}))
	}
	nanState := []float32{0.1, float32(math.NaN())}
	gigabyte := msgp.AppendMapHeader(nil, 1)
	gigabyte = msgp.AppendString(gigabyte, "observation.images.base")
	gigabyte = append(gigabyte, hugeHeader(0xc6, 1<<30)...)
	deep := append([]byte{0x81, 0xa5, 'i', 'n', 'p', 'u', 't'}, bytes.Repeat([]byte{0x81, 0xa1, 'x'}, 200000)...)
	deep = append(deep, 0xc0)
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"truncated", o.msgpackEnvelope(t, nil)[:500], "truncated msgpack"},
		{"1 GB frame", gigabyte, "observation.images.base: truncated"},
		{"depth bomb", deep, "nested deeper than 32"},
		{"NaN state", obs("observation.state", float32Array(nanState, 2)), "observation.state: state[1] is NaN"},
		{"frame shape", obs("observation.images.base", npArray{"|u1", []int{4, 4}, make([]byte, 16)}), "observation.images.base: shape [4 4]"},
		{"frame dtype", obs("observation.images.base", npArray{"<i4", []int{2, 2, 3}, make([]byte, 48)}), "observation.images.base: dtype <i4"},
		{"float frame out of range", obs("observation.images.base", float32Array([]float32{0, 2, 0}, 1, 1, 3)), "float frames must lie in [0, 1]"},
		{"noise shape", obs("noise", float32Array(o.noise, 320)), "noise: want a [horizon, action_dim] array"},
		// Shapes whose product wraps a uint64 to 0 match empty data unless the product is checked.
		{"frame shape wraps", obs("observation.images.base", npArray{"|u1", []int{1 << 32, 1 << 32, 3}, nil}), "observation.images.base.shape: dimension 1"},
		{"float frame shape wraps", obs("observation.images.base", npArray{"<f4", []int{3, 1 << 32, 1 << 32}, nil}), "observation.images.base.shape: dimension 2"},
		{"huge dimension beside 0", obs("observation.images.base", npArray{"|u1", []int{1 << 62, 0, 3}, nil}), "observation.images.base.shape: dimension 0"},
		{"state shape wraps", obs("observation.state", npArray{"<f4", []int{1 << 32, 1 << 32}, nil}), "observation.state.shape: dimension 1"},
		{"unknown camera", mustPack(t, map[string]any{"task": "x", "images": map[string]any{"cam_high": npArray{"|u1", []int{3, 2, 2}, make([]byte, 12)}, "observation/image": 1}}), ""},
		{"no frames", mustPack(t, map[string]any{"task": "x"}), "images: no camera frame"},
		{"numpy to JSON", mustPack(t, map[string]any{"input": map[string]any{}, "runtime": map[string]any{"output_format": "numpy"}}), ""},
		{"prefix_cache", mustPack(t, map[string]any{"input": map[string]any{}, "runtime": map[string]any{"prefix_cache": "sometimes"}}), "runtime.prefix_cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			status, _, body := postBody(t, url, tc.body, mp...)
			runtime.ReadMemStats(&after)
			var detail struct{ Detail string }
			_ = json.Unmarshal(body, &detail)
			if status != http.StatusBadRequest || !strings.Contains(detail.Detail, tc.want) {
				t.Errorf("status %d %s, want 400 with %q", status, body, tc.want)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("one bad request allocated %d MB", grew>>20)
			}
		})
	}
	if status, _, body := postBody(t, url, o.msgpackEnvelope(t, nil), mp...); status != http.StatusOK {
		t.Errorf("after the bad bodies: %d %s", status, body)
	}
}

// The prefix cache through the API: a repeat observation hits with bit-identical actions, a request
// may opt out, /metrics counts; without PI05_PREFIX_CACHE_MB nothing is cached and the reply says so.
func TestPI05PrefixCacheHTTP(t *testing.T) {
	ts := newPI05TestServer(t, map[string]string{"PI05_PREFIX_CACHE_MB": "16"})
	url := ts.URL + "/v1/actions/generations"
	o := newTestObservation(t)
	cacheOf := func(env map[string]any) string { return fmt.Sprint(env["cache"]) }
	_, miss := postJSON(t, url, o.jsonBody(""))
	_, hit := postJSON(t, url, o.jsonBody(""))
	_, off := postJSON(t, url, o.jsonBody(`{"prefix_cache": false}`))
	if cacheOf(miss) != "map[available:true enabled:true hit:false]" || cacheOf(hit) != "map[available:true enabled:true hit:true]" ||
		cacheOf(off) != "map[available:true enabled:false hit:false]" {
		t.Fatalf("cache reports: miss %s, hit %s, opted out %s", cacheOf(miss), cacheOf(hit), cacheOf(off))
	}
	if fmt.Sprint(envelopeActions(t, hit)) != fmt.Sprint(envelopeActions(t, miss)) || fmt.Sprint(envelopeActions(t, off)) != fmt.Sprint(envelopeActions(t, miss)) {
		t.Error("a cache hit changed the actions")
	}
	if hit["usage"].(map[string]any)["prefix_cache_hit"] != true || hit["timings"].(map[string]any)["vision_ms"] != 0.0 {
		t.Errorf("hit usage %v timings %v", hit["usage"], hit["timings"])
	}
	for name, want := range map[string]string{"tt_model_pi05_prefix_cache_hits_total": "1", "tt_model_pi05_prefix_cache_misses_total": "1", "tt_model_pi05_prefix_cache_entries": "1"} {
		if got := servertest.MetricValue(t, ts.URL, name); got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
	_, md := servertest.GetJSON(t, ts.URL+"/v1/actions/metadata")
	if md["capabilities"].(map[string]any)["exact_prefix_cache"] != true {
		t.Errorf("metadata capabilities %v", md["capabilities"])
	}

	plain := newPI05TestServer(t, nil)
	_, out := postJSON(t, plain.URL+"/v1/actions/generations", o.jsonBody(`{"prefix_cache": true}`))
	if cacheOf(out) != "map[available:false enabled:false hit:false]" || fmt.Sprint(envelopeActions(t, out)) != fmt.Sprint(envelopeActions(t, miss)) {
		t.Errorf("no cache on the server: %s", cacheOf(out))
	}
}

// Real-time chunking through the API: without it the actions are unchanged; with it the first d
// rows move toward the previous chunk (measured), the rows past the horizon stay near.
func TestPI05RealTimeChunkingHTTP(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	url := ts.URL + "/v1/actions/generations"
	o := newTestObservation(t)
	_, base := postJSON(t, url, o.jsonBody(""))
	prev := make([][]float32, 8) // 8 leftover rows of a constant chunk
	for i := range prev {
		prev[i] = make([]float32, 32)
		for c := range prev[i] {
			prev[i][c] = -0.25
		}
	}
	pj, _ := json.Marshal(prev)
	const d = 3
	body := strings.Replace(o.jsonBody(""), `"input":`, fmt.Sprintf(`"parameters": {"rtc": {"prev_chunk_left_over": %s, "inference_delay": %d, "execution_horizon": 6}}, "input":`, pj, d), 1)
	status, guided := postJSON(t, url, body)
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, guided)
	}
	dist := func(env map[string]any) float64 {
		acts := matrix(t, env["data"].([]any)[0].(map[string]any)["action"].(map[string]any)["values"])
		s := 0.0
		for r := range d {
			for _, v := range acts[r] {
				s += (v + 0.25) * (v + 0.25)
			}
		}
		return math.Sqrt(s / float64(d*32))
	}
	before, after := dist(base), dist(guided)
	t.Logf("first %d rows: RMS distance to the previous chunk %.4f without RTC, %.4f with", d, before, after)
	if after > 0.5*before {
		t.Errorf("RTC moved the first %d rows from %.4f to %.4f of the previous chunk", d, before, after)
	}
	_, again := postJSON(t, url, o.jsonBody(""))
	if fmt.Sprint(envelopeActions(t, again)) != fmt.Sprint(envelopeActions(t, base)) {
		t.Error("actions without RTC changed after an RTC request")
	}
	for _, tc := range []struct{ rtc, want string }{
		{`{"prev_chunk_left_over": [[1, 2]]}`, "parameters.rtc.inference_delay: required"},
		{`{"prev_chunk_left_over": [[1, 2]], "inference_delay": 20}`, "parameters.rtc.inference_delay: 20 is outside 0..10"},
		{`{"prev_chunk_left_over": [[NaN]], "inference_delay": 1}`, "parameters.rtc.prev_chunk_left_over: [0][0] is NaN"},
		// Finite values whose guidance overflows the denoising loop (it was a 500 NonFiniteOutput).
		{`{"prev_chunk_left_over": [[1, 2]], "inference_delay": 1, "max_guidance_weight": 1e38}`, "parameters.rtc.max_guidance_weight: 1e+38 is outside (0, 1000]"},
		{`{"prev_chunk_left_over": [[1, 2]], "inference_delay": 1, "max_guidance_weight": 1000.5}`, "parameters.rtc.max_guidance_weight"},
		{`{"prev_chunk_left_over": [[1, 3e38]], "inference_delay": 1}`, "parameters.rtc.prev_chunk_left_over: [0][1] is 3e+38, outside -10000..10000"},
		{`{"prev_chunk_left_over": [[-10001]], "inference_delay": 1}`, "parameters.rtc.prev_chunk_left_over: [0][0] is -10001"},
	} {
		b := strings.Replace(o.jsonBody(""), `"input":`, `"parameters": {"rtc": `+tc.rtc+`}, "input":`, 1)
		if status, out := postJSON(t, url, b); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["detail"]), tc.want) {
			t.Errorf("%s: %d %v, want %q", tc.rtc, status, out, tc.want)
		}
	}
	// At the bounds, with every step count, the actions are finite.
	for i := range prev {
		for c := range prev[i] {
			prev[i][c] = float32(10000 * (1 - 2*(c%2)))
		}
	}
	pj, _ = json.Marshal(prev)
	for steps := 1; steps <= 10; steps++ {
		b := strings.Replace(o.jsonBody(""), `"input":`, fmt.Sprintf(`"parameters": {"num_inference_steps": %d, "rtc": {"prev_chunk_left_over": %s, "inference_delay": 10, "execution_horizon": 10, "max_guidance_weight": 1000}}, "input":`, steps, pj), 1)
		if status, out := postJSON(t, url, b); status != http.StatusOK {
			t.Errorf("%d steps at the bounds: %d %v", steps, status, out)
		}
	}
}

// Arbitrary msgpack action bodies (SGLang's request or a bare observation) never panic the decoder;
// a decoded request's frames are consistent.
func FuzzPI05MsgpackAction(f *testing.F) {
	_, m := startPI05(f, nil)
	o := newTestObservation(f)
	f.Add(o.msgpackEnvelope(f, nil))
	f.Add(mustPack(f, o.bareObservation(f, nil)))
	f.Add(mustPack(f, map[string]any{"prompt": "x", "images": map[string]any{"cam_high": npArray{"|u1", []int{3, 2, 2}, make([]byte, 12)}}, "state": []any{1, 2}}))
	f.Add(mustPack(f, map[string]any{"observation/image": []any{[]any{[]any{1, 2, 3}}}, "prev_chunk_left_over": []any{[]any{0.5}}, "inference_delay": 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ar, aerr := m.decodeActionMsgpack(b, true, nil)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest && aerr.Status != http.StatusNotFound {
				t.Fatalf("status %d for a bad body: %s", aerr.Status, aerr.Detail)
			}
			return
		}
		for _, img := range ar.req.Images {
			if len(img.Pix) != 3*img.H*img.W {
				t.Fatalf("%dx%d frame with %d values", img.H, img.W, len(img.Pix))
			}
		}
	})
}

// Real-time chunking in a msgpack request: under parameters.rtc (SGLang's envelope) or as an
// observation's own keys (OpenPI); a bad value is named where it was sent.
func TestPI05MsgpackRealTimeChunking(t *testing.T) {
	ts := newPI05TestServer(t, nil)
	url := ts.URL + "/v1/actions/generations"
	o := newTestObservation(t)
	prev := make([]float32, 4*32)
	rtc := map[string]any{"prev_chunk_left_over": float32Array(prev, 4, 32), "inference_delay": 2, "execution_horizon": 5}
	env := func(rtc map[string]any) []byte {
		m := map[string]any{"input": map[string]any{"task": o.task, "observation": map[string]any{"images": o.images(),
			"state": float32Array(o.state, len(o.state)), "noise": float32Array(o.noise, 10, 32)}}, "parameters": map[string]any{"rtc": rtc}}
		return mustPack(t, m)
	}
	mp := []string{"Content-Type", "application/msgpack"}
	status, _, a := postBody(t, url, env(rtc), mp...)
	status2, _, b := postBody(t, url, mustPack(t, o.bareObservation(t, rtc)), mp...)
	if status != http.StatusOK || status2 != http.StatusOK || fmt.Sprint(envelopeActions(t, unpack(t, a))) != fmt.Sprint(envelopeActions(t, unpack(t, b))) {
		t.Fatalf("parameters.rtc %d and observation keys %d differ", status, status2)
	}
	bad := map[string]any{"prev_chunk_left_over": float32Array(prev, 4, 32), "inference_delay": 40}
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{env(bad), "parameters.rtc.inference_delay: 40 is outside 0..10"},
		{mustPack(t, o.bareObservation(t, bad)), "inference_delay: 40 is outside 0..10"},
		{env(map[string]any{"inference_delay": 1}), "parameters.rtc.prev_chunk_left_over: required"},
	} {
		status, _, body := postBody(t, url, tc.body, mp...)
		if status != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("status %d %s, want 400 with %q", status, body, tc.want)
		}
	}
}
