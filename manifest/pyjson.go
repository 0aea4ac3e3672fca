package manifest

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// pythonJSON renders v as Python's json.dumps does by default (", " and ": "
// separators, non-ASCII escaped), so argv matches the upstream launcher.
// Mapping keys are sorted: YAML order is not kept in a Go map.
func pythonJSON(v any) string {
	var b strings.Builder
	writePythonJSON(&b, v)
	return b.String()
}

func writePythonJSON(b *strings.Builder, v any) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePythonJSON(b, k)
			b.WriteString(": ")
			writePythonJSON(b, t[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writePythonJSON(b, x)
		}
		b.WriteByte(']')
	case string:
		b.WriteString(asciiJSONString(t))
	default:
		out, err := json.Marshal(t)
		if err != nil {
			out = []byte("null")
		}
		b.Write(out)
	}
}

// asciiJSONString quotes s with every non-ASCII rune escaped (ensure_ascii).
func asciiJSONString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	raw := bytes.TrimRight(buf.Bytes(), "\n")
	var b strings.Builder
	for _, r := range string(raw) {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			b.WriteString(jsonEscape(0xD800 + (r >> 10)))
			b.WriteString(jsonEscape(0xDC00 + (r & 0x3FF)))
		default:
			b.WriteString(jsonEscape(r))
		}
	}
	return b.String()
}

func jsonEscape(r rune) string {
	const hex = "0123456789abcdef"
	return string([]byte{'\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF]})
}
