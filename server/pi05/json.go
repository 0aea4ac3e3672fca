package pi05

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/server"
)

// quoteNonFinite rewrites the bare NaN, Infinity and -Infinity tokens that Python's json.dumps
// writes (outside strings) as the strings "NaN", "Infinity", "-Infinity", so the body parses and a
// NaN in the state is reported as such instead of as a syntax error.
func quoteNonFinite(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			switch c {
			case '\\':
				if i+1 < len(b) {
					i++
					out = append(out, b[i])
				}
			case '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			out = append(out, c)
			continue
		}
		matched := false
		for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				out = append(out, '"')
				out = append(out, tok...)
				out = append(out, '"')
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, c)
		}
	}
	return out
}

// jsonFloat is a JSON number, or one of the strings "NaN", "Infinity", "-Infinity" (so that the
// validation, not the parser, reports a non-finite value with its index).
type jsonFloat float32

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN":
			*f = jsonFloat(math.NaN())
		case "Infinity":
			*f = jsonFloat(math.Inf(1))
		case "-Infinity":
			*f = jsonFloat(math.Inf(-1))
		default:
			return fmt.Errorf("%q is not a number", s)
		}
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 32)
	if err != nil {
		return fmt.Errorf("%s is not a number", b)
	}
	*f = jsonFloat(v)
	return nil
}

// floatList decodes a JSON list of numbers; null or absent gives nil.
func floatList(raw json.RawMessage) ([]float32, error) {
	if len(raw) == 0 || server.IsNull(raw) {
		return nil, nil
	}
	var v []jsonFloat
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("want a list of numbers: %v", err)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out, nil
}

// floatMatrix decodes a JSON list of equally long lists of numbers into a flat row-major slice.
func floatMatrix(raw json.RawMessage) (vals []float32, rows, cols int, err error) {
	var v [][]jsonFloat
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, 0, 0, fmt.Errorf("want a list of lists of numbers: %v", err)
	}
	if len(v) == 0 {
		return nil, 0, 0, fmt.Errorf("is empty")
	}
	cols = len(v[0])
	vals = make([]float32, 0, len(v)*cols)
	for i, row := range v {
		if len(row) != cols {
			return nil, 0, 0, fmt.Errorf("row %d has %d values, row 0 has %d", i, len(row), cols)
		}
		for _, x := range row {
			vals = append(vals, float32(x))
		}
	}
	return vals, len(v), cols, nil
}

// intList decodes a JSON list of integers.
func intList(raw json.RawMessage) ([]int, error) {
	var v []int
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("want a list of integers: %v", err)
	}
	return v, nil
}

// imageValue decodes one camera frame: a base64 PNG/JPEG string, or an HxWx3 array of 0..255
// integers (what numpy's uint8 .tolist() gives). The frame's RGB bytes are reserved from mem (a
// picture's decode too, while it runs).
func imageValue(raw json.RawMessage, mem *server.Reservation) (pi05.RGB, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return pi05.RGB{}, err
		}
		return pi05.DecodeBase64Image(s, mem)
	}
	img, err := parseUint8Image(raw)
	return img, reserveFrame(img, err, mem)
}

// parseUint8Image reads [[[r,g,b], ...], ...] without building a tree of interfaces (a 224x224
// frame is 150k numbers).
func parseUint8Image(b []byte) (pi05.RGB, error) {
	if img, ok := parsePlainUint8Image(b); ok {
		return img, nil
	}
	p := &arrayScanner{b: b}
	var img pi05.RGB
	if err := p.expect('['); err != nil {
		return img, err
	}
	for row := 0; ; row++ {
		if p.peek() == ']' && row == 0 {
			return img, fmt.Errorf("image array is empty")
		}
		if err := p.expect('['); err != nil {
			return img, err
		}
		w := 0
		for {
			if err := p.expect('['); err != nil {
				return img, err
			}
			for c := 0; c < 3; c++ {
				v, err := p.uint8()
				if err != nil {
					return img, fmt.Errorf("pixel [%d][%d][%d]: %w", row, w, c, err)
				}
				img.Pix = append(img.Pix, v)
				sep := byte(']')
				if c < 2 {
					sep = ','
				}
				if err := p.expect(sep); err != nil {
					return img, fmt.Errorf("pixel [%d][%d]: want 3 channels: %w", row, w, err)
				}
			}
			w++
			if more, err := p.next(); err != nil {
				return img, err
			} else if !more {
				break
			}
		}
		if row == 0 {
			img.W = w
		} else if w != img.W {
			return img, fmt.Errorf("image row %d has %d pixels, row 0 has %d", row, w, img.W)
		}
		img.H++
		if more, err := p.next(); err != nil {
			return img, err
		} else if !more {
			break
		}
	}
	if p.skip(); p.pos != len(p.b) {
		return img, fmt.Errorf("data after the image array at byte %d", p.pos)
	}
	return pi05.NewRGB(img.H, img.W, img.Pix)
}

// parsePlainUint8Image is parseUint8Image's loop for what clients send (plain integers 0..255,
// any whitespace), with no call per character; ok=false on anything else, which the scanner below
// then reads again for its error (or its reading of 12.0).
func parsePlainUint8Image(b []byte) (pi05.RGB, bool) {
	img, end, ok := scanPlainUint8Image(b, skipSpace(b, 0))
	return img, ok && skipSpace(b, end) == len(b)
}

// scanPlainUint8Image reads the plain frame that starts at b[i] and returns the index past it.
func scanPlainUint8Image(b []byte, i int) (img pi05.RGB, end int, ok bool) {
	n := len(b)
	// next moves past sep after whitespace (then past more whitespace).
	next := func(i int, sep byte) (int, bool) {
		i = skipSpace(b, i)
		if i >= n || b[i] != sep {
			return i, false
		}
		return skipSpace(b, i+1), true
	}
	if i, ok = next(i, '['); !ok {
		return img, 0, false
	}
	pix := make([]uint8, 0, (n-i)/4+16)
	h, w := 0, -1
	for {
		if i, ok = next(i, '['); !ok { // a row
			return img, 0, false
		}
		rw := 0
		for {
			if i, ok = next(i, '['); !ok { // a pixel
				return img, 0, false
			}
			for c := 0; c < 3; c++ {
				v, d := 0, 0
				for ; i < n && b[i]-'0' <= 9 && d < 4; i, d = i+1, d+1 {
					v = v*10 + int(b[i]-'0')
				}
				sep := byte(',')
				if c == 2 {
					sep = ']'
				}
				if d == 0 || d > 3 || v > 255 || d > 1 && b[i-d] == '0' {
					return img, 0, false
				}
				if i, ok = next(i, sep); !ok {
					return img, 0, false
				}
				pix = append(pix, uint8(v))
			}
			rw++
			if i < n && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i, ok = next(i, ']'); !ok {
				return img, 0, false
			}
			break
		}
		if w < 0 {
			w = rw
		} else if rw != w {
			return img, 0, false
		}
		h++
		if i < n && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i >= n || b[i] != ']' {
			return img, 0, false
		}
		end = i + 1
		break
	}
	img, err := pi05.NewRGB(h, w, pix)
	return img, end, err == nil
}

type arrayScanner struct {
	b   []byte
	pos int
}

func (s *arrayScanner) skip() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *arrayScanner) peek() byte {
	s.skip()
	if s.pos >= len(s.b) {
		return 0
	}
	return s.b[s.pos]
}

// next reads what follows an array element: ',' (another element: true) or ']' (the end: false).
func (s *arrayScanner) next() (bool, error) {
	if s.peek() == ',' {
		s.pos++
		return true, nil
	}
	return false, s.expect(']')
}

func (s *arrayScanner) expect(c byte) error {
	if got := s.peek(); got != c {
		if got == 0 {
			return fmt.Errorf("image array ends early, want %q", c)
		}
		return fmt.Errorf("image array: want %q at byte %d, got %q", c, s.pos, got)
	}
	s.pos++
	return nil
}

// uint8 reads an integer 0..255 (a trailing ".0" is accepted).
func (s *arrayScanner) uint8() (uint8, error) {
	s.skip()
	start := s.pos
	// The common case, one to three digits: no float parse.
	v, n := 0, 0
	for s.pos < len(s.b) && n < 4 && s.b[s.pos] >= '0' && s.b[s.pos] <= '9' {
		v = v*10 + int(s.b[s.pos]-'0')
		s.pos++
		n++
	}
	if n > 0 && n < 4 && v <= 255 && (s.pos == len(s.b) || s.b[s.pos] != '.' && s.b[s.pos] != '-') {
		return uint8(v), nil
	}
	s.pos = start
	for s.pos < len(s.b) && (s.b[s.pos] >= '0' && s.b[s.pos] <= '9' || s.b[s.pos] == '.' || s.b[s.pos] == '-') {
		s.pos++
	}
	f, err := strconv.ParseFloat(string(s.b[start:s.pos]), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > 255 {
		return 0, fmt.Errorf("%q is not an integer in 0..255", s.b[start:s.pos])
	}
	return uint8(f), nil
}

// splitGenerations fills a generationsBody in one pass over the body (jsonspan.go), the frames
// of input.observation.images split on the way: the camera frames, ~2 MB of numbers, are scanned
// once here and once when they are read, instead of four times by encoding/json. ok=false leaves the body to encoding/json (the reference: invalid JSON,
// type errors, keys in another case or repeated).
func splitGenerations(body []byte) (b generationsBody, ok bool) {
	top := newJSONFields("model", "robot_id", "input", "parameters", "runtime")
	input := newJSONFields("task", "prompt", "tokens", "observation")
	obs := newJSONFields("images", "state", "noise")
	walkInto := func(f *jsonFields, key string, i, depth int, inner func(string, int) (int, bool)) (int, bool) {
		name, ok := f.match(key)
		if !ok || name == "" {
			return f.skipField(body, key, i, depth)
		}
		if end, null := isJSONNull(body, i); null {
			return end, true
		}
		f.spans[name] = nil
		return walkJSONObject(body, i, depth, inner)
	}
	obsField := func(key string, i int) (int, bool) {
		if name, ok := obs.match(key); !ok || name != "images" || i >= len(body) || body[i] != '[' && body[i] != '{' {
			return obs.skipField(body, key, i, 3)
		}
		b.frames = &splitFrames{}
		end, ok := b.frames.walk(body, i, 3)
		if ok {
			obs.spans["images"] = body[i:end]
		}
		return end, ok
	}
	inputField := func(key string, i int) (int, bool) {
		if key == "observation" {
			return walkInto(input, key, i, 2, obsField)
		}
		return input.skipField(body, key, i, 2)
	}
	topField := func(key string, i int) (int, bool) {
		if key == "input" {
			return walkInto(top, key, i, 1, inputField)
		}
		return top.skipField(body, key, i, 1)
	}
	end, ok := walkJSONObject(body, 0, 0, topField)
	if !ok || skipSpace(body, end) != len(body) {
		return generationsBody{}, false
	}
	small := []struct {
		span []byte
		into any
	}{
		{top.spans["model"], &b.Model}, {top.spans["parameters"], &b.Parameters}, {top.spans["runtime"], &b.Runtime},
		{input.spans["task"], &b.Input.Task}, {input.spans["prompt"], &b.Input.Prompt},
	}
	for _, s := range small {
		if s.span != nil && json.Unmarshal(s.span, s.into) != nil {
			return generationsBody{}, false
		}
	}
	b.RobotID, b.Input.Tokens = top.spans["robot_id"], input.spans["tokens"]
	o := &b.Input.Observation
	o.Images, o.State, o.Noise = obs.spans["images"], obs.spans["state"], obs.spans["noise"]
	return b, true
}

// splitFrames is input.observation.images split into its frames' spans in the same pass:
// a list in slot order, or an object camera -> frame (a repeated camera's last frame winning, as
// with encoding/json). A frame of plain integers is decoded on the way (listImg, camImg), which
// spares a second scan of its ~600 KB; any other frame is left to imageValue.
type splitFrames struct {
	list    []json.RawMessage
	listImg []*pi05.RGB
	byCam   map[string]json.RawMessage
	camImg  map[string]*pi05.RGB
}

// walk splits the list or object of frames at b[i] (depth: the containers around it).
func (f *splitFrames) walk(b []byte, i, depth int) (int, bool) {
	frame := func(i int) (int, []byte, *pi05.RGB, bool) {
		if img, end, ok := scanPlainUint8Image(b, i); ok {
			return end, b[i:end], &img, true
		}
		end, ok := skipJSONValue(b, i, depth+1)
		if !ok {
			return 0, nil, nil, false
		}
		return end, b[i:end], nil, true
	}
	switch b[i] {
	case '[':
		f.list = []json.RawMessage{}
		return walkJSONArray(b, i, depth, func(i int) (int, bool) {
			end, span, img, ok := frame(i)
			f.list, f.listImg = append(f.list, span), append(f.listImg, img)
			return end, ok
		})
	case '{':
		f.byCam, f.camImg = map[string]json.RawMessage{}, map[string]*pi05.RGB{}
		return walkJSONObject(b, i, depth, func(key string, i int) (int, bool) {
			end, span, img, ok := frame(i)
			f.byCam[key], f.camImg[key] = span, img
			return end, ok
		})
	}
	return 0, false
}

// frameValue is a frame of observationImages: the one decoded while splitting (its bytes reserved
// from mem as imageValue's are), else imageValue's reading of raw.
func frameValue(decoded *pi05.RGB, raw json.RawMessage, mem *server.Reservation) (pi05.RGB, error) {
	if decoded != nil {
		return *decoded, reserveFrame(*decoded, nil, mem)
	}
	return imageValue(raw, mem)
}
