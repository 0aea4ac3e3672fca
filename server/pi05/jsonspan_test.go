package pi05

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/pi05"
)

// The splitter's grammar is encoding/json's: the same documents are valid, including at the
// nesting limit.
func TestSkipJSONValueMatchesEncodingJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, doc := range []string{
		`0`, `-0`, `-0.5e+3`, `1E9`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `"a\u00e9\n"`, `"\x"`, `"\u12"`, "\"a\tb\"",
		`true`, `nul`, `[1,2,]`, `[,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `{"a":[{"b":null}]}`, ` [ 1 , { } ] `, `[] x`,
		`{"a":1}{`, `"unterminated`, ``, ` `, deep(10000), deep(10001),
	} {
		end, ok := skipJSONValue([]byte(doc), 0, 0)
		got := ok && skipSpace([]byte(doc), end) == len(doc)
		if want := json.Valid([]byte(doc)); got != want {
			t.Errorf("%.40q: splitter says valid=%v, encoding/json %v", doc, got, want)
		}
	}
}

func FuzzSkipJSONValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c"}]}`, `[-0.1e5, true, null]`, `"\u00e9"`, `{"a" :1 , "b":[ ]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := skipJSONValue(b, 0, 0)
		if got := ok && skipSpace(b, end) == len(b); got != json.Valid(b) {
			t.Fatalf("%q: splitter valid=%v, encoding/json %v", b, got, !got)
		}
	})
}

// A body the splitter takes is decoded exactly as encoding/json decodes it, frames included; one
// it declines is left to encoding/json.
func checkSplitGenerations(t *testing.T, body []byte) (taken bool) {
	t.Helper()
	got, ok := splitGenerations(body)
	if !ok {
		return false
	}
	var want generationsBody
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("%.200q: split, but encoding/json says %v", body, err)
	}
	frames := got.frames
	got.frames = nil
	if !reflect.DeepEqual(normalizeRaw(got), normalizeRaw(want)) {
		t.Fatalf("%.200q:\nsplit         %+v\nencoding/json %+v", body, got, want)
	}
	if frames != nil {
		checkDecodedFrames(t, body, frames)
		var list []json.RawMessage
		var byCam map[string]json.RawMessage
		if raw := want.Input.Observation.Images; raw[0] == '[' {
			if json.Unmarshal(raw, &list) != nil || !reflect.DeepEqual(frames.list, list) || frames.byCam != nil {
				t.Fatalf("%.200q: frames %q, encoding/json %q", body, frames.list, list)
			}
		} else if json.Unmarshal(raw, &byCam) != nil || !reflect.DeepEqual(frames.byCam, byCam) || frames.list != nil {
			t.Fatalf("%.200q: frames %q, encoding/json %q", body, frames.byCam, byCam)
		}
	}
	return true
}

// checkDecodedFrames: a frame decoded while splitting is what parseUint8Image reads from its span.
func checkDecodedFrames(t *testing.T, body []byte, f *splitFrames) {
	t.Helper()
	if len(f.listImg) != len(f.list) {
		t.Fatalf("%.200q: %d frames, %d decode slots", body, len(f.list), len(f.listImg))
	}
	check := func(at string, img *pi05.RGB, raw []byte) {
		if img == nil {
			return
		}
		want, err := parseUint8Image(raw)
		if err != nil || !reflect.DeepEqual(*img, want) {
			t.Fatalf("%.200q: frame %s decoded while splitting as %dx%d, parseUint8Image says %dx%d, %v", body, at, img.H, img.W, want.H, want.W, err)
		}
	}
	for i, img := range f.listImg {
		check(fmt.Sprint(i), img, f.list[i])
	}
	for k, img := range f.camImg {
		check(k, img, f.byCam[k])
	}
}

// normalizeRaw makes an absent json.RawMessage and an empty one compare equal (encoding/json
// leaves nil; both mean "not given" to the decoder).
func normalizeRaw(b generationsBody) generationsBody {
	for _, r := range []*json.RawMessage{&b.RobotID, &b.Input.Tokens, &b.Input.Observation.Images, &b.Input.Observation.State, &b.Input.Observation.Noise} {
		if len(*r) == 0 {
			*r = nil
		}
	}
	if rtc := b.Parameters.RTC; rtc != nil && len(rtc.PrevChunkLeftOver) == 0 {
		rtc.PrevChunkLeftOver = nil
	}
	if len(b.Runtime.PrefixCache) == 0 {
		b.Runtime.PrefixCache = nil
	}
	return b
}

func TestSplitGenerations(t *testing.T) {
	o := benchObservation()
	for _, c := range []struct {
		name, body string
		taken      bool
	}{
		{"three frames", o.jsonBody(`{"return_timing": false}`), true},
		{"frame list", `{"input":{"task":"t","observation":{"images":[[[[1,2,3]]],"aGk="],"state":[1,2]}}}`, true},
		{"everything", `{"model":"m","robot_id":7,"input":{"prompt":"p","tokens":[1,2],"observation":{"images":{"a":[[[1,2,3]]],"a":"x"},"noise":[[0.5]]}},` +
			`"parameters":{"num_inference_steps":3,"seed":9,"rtc":{"prev_chunk_left_over":[[1]],"inference_delay":2}},"runtime":{"prefix_cache":"auto"},"extra":[{}]}`, true},
		{"python's separators", "{\"input\": {\"observation\": {\"images\": {\"a\": [[[1, 2, 3], [4, 5, 255]],\n [[0, 0, 0], [9, 8, 7]]]}}}}", true},
		{"a frame with a leading zero", `{"input":{"observation":{"images":{"a":[[[01,2,3]]]}}}}`, false},
		{"a frame of floats", `{"input":{"observation":{"images":[[[[1.0,2,3]]]]}}}`, true},
		{"nulls", `{"input":null,"model":null}`, true},
		{"observation null", `{"input":{"observation":null}}`, true},
		{"images a string", `{"input":{"observation":{"images":"x"}}}`, true},
		{"key in another case", `{"Model":"m"}`, false},
		{"repeated field", `{"model":"a","model":"b"}`, false},
		{"repeated input", `{"input":{"task":"a"},"input":{"prompt":"b"}}`, false},
		{"escaped key", `{"mod\u0065l":"m"}`, false},
		{"type error", `{"parameters":{"seed":"x"}}`, false},
		{"input not an object", `{"input":[1]}`, false},
		{"invalid", `{"input":{"observation":{"images":[[[1,2,3]]}}}`, false},
		{"trailing data", `{} {}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkSplitGenerations(t, []byte(c.body)); got != c.taken {
				t.Fatalf("split taken = %v, want %v", got, c.taken)
			}
		})
	}
}

func FuzzSplitGenerations(f *testing.F) {
	for _, s := range []string{
		`{"input":{"task":"t","observation":{"images":{"base_0_rgb":[[[1,2,3]]]},"state":[1]}}}`,
		`{"input":{"observation":{"images":[[[[0,0,0]]]]}},"parameters":{"rtc":{"inference_delay":1}}}`,
		`{"model":"m","robot_id":"r","runtime":{"return_timing":true,"prefix_cache":false},"x":{"input":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSplitGenerations(t, b) })
}

// The digit fast path reads what the float parse reads.
func TestUint8Scanner(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint8
		ok   bool
	}{
		{"0,", 0, true}, {"7]", 7, true}, {"255 ", 255, true}, {"256,", 0, false}, {"1000,", 0, false},
		{"12.0,", 12, true}, {"12.5,", 0, false}, {"-0,", 0, true}, {"-1,", 0, false}, {"3", 3, true},
	} {
		s := &arrayScanner{b: []byte(c.in)}
		got, err := s.uint8()
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: got %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}
