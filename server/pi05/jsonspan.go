package pi05

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// A one-pass JSON splitter for the large request bodies (three camera frames as nested lists are
// ~2 MB of numbers): encoding/json scans such a body once to validate it, again for every
// json.RawMessage it fills and once more per nested decode, which costs ~100 ms a request. The
// splitter validates each value with the JSON grammar and hands out spans of the body instead.
//
// It only ever answers "ok" or "not ok": on any doubt (invalid JSON, a key with escapes or
// non-ASCII bytes, a key that matches a struct field only case-insensitively, a repeated field) the
// caller falls back to encoding/json, whose result and error messages stay the reference. A
// success must equal encoding/json's result; the fuzz tests hold the two side by side.

// jsonMaxDepth is encoding/json's nesting limit: deeper values are left to it (and its error).
const jsonMaxDepth = 10000

// skipJSONValue returns the index just past the JSON value that starts at b[i] (after whitespace),
// or ok=false if there is none or it is not valid JSON. depth is the number of containers open
// around it (the nesting limit counts from the document's root).
func skipJSONValue(b []byte, i, depth int) (end int, ok bool) {
	// closers holds the bracket each open container waits for: '}' means a key and a colon come
	// before each of its values.
	var closers []byte
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth+len(closers) == jsonMaxDepth {
				return 0, false
			}
			i++
			close := byte(']')
			if c == '{' {
				close = '}'
			}
			closers = append(closers, close)
			i = skipSpace(b, i)
			if i < len(b) && b[i] == close {
				i++
				closers = closers[:len(closers)-1]
				break
			}
			if close == '}' {
				if i, ok = skipKey(b, i); !ok {
					return 0, false
				}
			}
			continue
		case c == '"':
			if i, ok = skipJSONString(b, i); !ok {
				return 0, false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i, ok = skipJSONNumber(b, i); !ok {
				return 0, false
			}
		default:
			if i, ok = skipJSONLiteral(b, i); !ok {
				return 0, false
			}
		}
		// A value ended: close containers or move to the next element.
		for {
			if len(closers) == 0 {
				return i, true
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			close := closers[len(closers)-1]
			if b[i] == close {
				i++
				closers = closers[:len(closers)-1]
				continue
			}
			if b[i] != ',' {
				return 0, false
			}
			i++
			if close == '}' {
				if i, ok = skipKey(b, skipSpace(b, i)); !ok {
					return 0, false
				}
			}
			break
		}
	}
}

// skipKey skips an object key and its colon.
func skipKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	i, ok := skipJSONString(b, i)
	if !ok {
		return 0, false
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return i + 1, true
}

func skipSpace(b []byte, i int) int {
	// Most bytes are not whitespace: one comparison tells.
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipJSONString skips the string that starts at b[i] == '"'.
func skipJSONString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if i++; i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// skipJSONNumber skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipJSONNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
		return i
	}
	if b[i] == '-' {
		if i++; i >= len(b) {
			return 0, false
		}
	}
	switch {
	case b[i] == '0':
		i++
	case b[i]-'1' <= 8:
		i = digits(i + 1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		start := i + 1
		if i = digits(start); i == start {
			return 0, false
		}
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		if i = digits(start); i == start {
			return 0, false
		}
	}
	return i, true
}

func skipJSONLiteral(b []byte, i int) (int, bool) {
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return 0, false
}

// walkJSONObject walks the object that starts at b[i] (after whitespace), at nesting depth, and
// hands each member's key and the index of its value to field, which consumes the value (skips it
// or walks into it) and returns the index past it. ok=false when the value is not a valid object,
// or a key has escapes or non-ASCII bytes (encoding/json's unescaping is left to it).
func walkJSONObject(b []byte, i, depth int, field func(key string, i int) (int, bool)) (end int, ok bool) {
	if i = skipSpace(b, i); i >= len(b) || b[i] != '{' || depth >= jsonMaxDepth {
		return 0, false
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		kstart := i
		if i, ok = skipKey(b, i); !ok {
			return 0, false
		}
		kend := bytes.LastIndexByte(b[kstart:i], '"') + kstart
		key := b[kstart+1 : kend]
		if bytes.IndexByte(key, '\\') >= 0 || !isASCII(key) {
			return 0, false
		}
		if i, ok = field(string(key), skipSpace(b, i)); !ok {
			return 0, false
		}
		if i = skipSpace(b, i); i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return 0, false
		}
	}
}

// walkJSONArray walks the array that starts at b[i] (after whitespace), handing each element's
// index to elem, which consumes it as walkJSONObject's field does.
func walkJSONArray(b []byte, i, depth int, elem func(i int) (int, bool)) (end int, ok bool) {
	if i = skipSpace(b, i); i >= len(b) || b[i] != '[' || depth >= jsonMaxDepth {
		return 0, false
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		if i, ok = elem(skipSpace(b, i)); !ok {
			return 0, false
		}
		if i = skipSpace(b, i); i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return 0, false
		}
	}
}

// jsonFields records the spans of a struct's fields while an object is walked, as encoding/json
// would match them: a member that names a field in another case (encoding/json matches it
// case-insensitively) or names one twice (encoding/json merges or overwrites) makes the walk give
// up. Unknown members are skipped, as encoding/json skips them.
type jsonFields struct {
	names []string
	spans map[string][]byte
}

func newJSONFields(names ...string) *jsonFields {
	return &jsonFields{names: names, spans: make(map[string][]byte, len(names))}
}

// match returns the field key names ("" for an unknown member), or ok=false where the walk must
// give up.
func (f *jsonFields) match(key string) (name string, ok bool) {
	for _, n := range f.names {
		if key == n {
			if _, dup := f.spans[n]; dup {
				return "", false
			}
			return n, true
		}
		if len(key) == len(n) && strings.EqualFold(key, n) {
			return "", false
		}
	}
	return "", true
}

// skipField records (or, for an unknown member, skips) the value at b[i].
func (f *jsonFields) skipField(b []byte, key string, i, depth int) (int, bool) {
	name, ok := f.match(key)
	if !ok {
		return 0, false
	}
	end, ok := skipJSONValue(b, i, depth)
	if ok && name != "" {
		f.spans[name] = b[i:end]
	}
	return end, ok
}

// isJSONNull reports whether the value at b[i] is null, and the index past it.
func isJSONNull(b []byte, i int) (int, bool) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return i + 4, true
	}
	return i, false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
