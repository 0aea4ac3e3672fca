package manifest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ttmodel/tt-model/internal/suggest"
)

// Decode parses the YAML of a tt-model.yaml into a Manifest, rejecting unknown
// keys and wrong types. It reports every problem it finds, with positions;
// semantic rules are checked separately by Validate.
func Decode(file string, data []byte) (*Manifest, ErrorList) {
	c := &collector{file: file, pos: positions{"": {Line: 1, Col: 1}}}
	doc, err := parseSingleDocument(data)
	if err != nil {
		c.addAt(yamlErrorPos(err), "", "not valid YAML: %s", yamlErrorText(err))
		return nil, c.errs
	}
	root := resolveAlias(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		c.addAt(nodePos(root), "", "does not contain a YAML mapping")
		return nil, c.errs
	}
	m := &Manifest{Kind: "vllm-plugin", Image: ImageSettings{Registry: "hf"}}
	d := &decoder{collector: c}
	d.manifest(root, m)
	m.pos = c.pos
	return m, c.errs
}

// parseSingleDocument decodes exactly one YAML document, as yaml.safe_load
// does: a second document is an error.
func parseSingleDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("line %d: expected a single document, found another", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlErrorPos pulls "line N" out of a yaml.v3 error message.
func yamlErrorPos(err error) Pos {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		rest := msg[i+5:]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if n, e := strconv.Atoi(rest[:j]); e == nil {
			return Pos{Line: n, Col: 1}
		}
	}
	return Pos{Line: 1, Col: 1}
}

func yamlErrorText(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func nodePos(n *yaml.Node) Pos {
	if n == nil || n.Line == 0 {
		return Pos{Line: 1, Col: 1}
	}
	return Pos{Line: n.Line, Col: n.Column}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// decoder walks YAML nodes into the manifest types.
type decoder struct {
	*collector
}

// fieldFunc decodes the value of one known key; path is the key's field path.
type fieldFunc func(v *yaml.Node, path string)

// mapping decodes a mapping node whose keys must all be in fields. It records
// each key's position, follows aliases and merge keys (<<) as yaml.safe_load
// does, and reports unknown and duplicate keys.
func (d *decoder) mapping(n *yaml.Node, path string, fields map[string]fieldFunc) bool {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		d.addAt(nodePos(n), path, "must be a mapping, got %s", describe(n))
		return false
	}
	d.eachPair(n, path, func(key, val *yaml.Node, child string) {
		f, ok := fields[key.Value]
		if !ok {
			known := slices.Sorted(maps.Keys(fields))
			hint := ""
			if near := suggest.Near(key.Value, known); len(near) > 0 {
				hint = fmt.Sprintf("; did you mean %q?", near[0])
			}
			d.addAt(nodePos(key), child, "unknown field%s (want one of %s)", hint, strings.Join(known, ", "))
			return
		}
		f(val, child)
	})
	return true
}

// mappingPairs returns the key/value pairs of a mapping with merge keys
// expanded: explicit keys first, then merged keys not set explicitly.
func mappingPairs(n *yaml.Node) [][2]*yaml.Node {
	var explicit, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			v = resolveAlias(v)
			var srcs []*yaml.Node
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			} else {
				srcs = []*yaml.Node{v}
			}
			for _, s := range srcs {
				if s = resolveAlias(s); s.Kind == yaml.MappingNode {
					merged = append(merged, mappingPairs(s)...)
				}
			}
			continue
		}
		explicit = append(explicit, [2]*yaml.Node{k, v})
	}
	have := map[string]bool{}
	for _, kv := range explicit {
		have[kv[0].Value] = true
	}
	for _, kv := range merged {
		if !have[kv[0].Value] {
			have[kv[0].Value] = true
			explicit = append(explicit, kv)
		}
	}
	return explicit
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// describe names a node's YAML type for error messages.
func describe(n *yaml.Node) string {
	n = resolveAlias(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean (" + n.Value + ")"
		case "!!int":
			return "an integer (" + n.Value + ")"
		case "!!float":
			return "a number (" + n.Value + ")"
		case "!!str":
			return fmt.Sprintf("a string (%q)", n.Value)
		}
		return n.Tag + " " + n.Value
	}
	return "an unsupported YAML node"
}

func isNull(n *yaml.Node) bool {
	n = resolveAlias(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// str decodes a string. Like pydantic, numbers and booleans are NOT strings:
// `ubuntu: 22.04` is refused with a hint to quote it. null leaves it unset.
func (d *decoder) str(n *yaml.Node, path string, dst *string) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		hint := ""
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf(` (quote it: "%s")`, n.Value)
		}
		d.addAt(nodePos(n), path, "must be a string, got %s%s", describe(n), hint)
		return
	}
	*dst = n.Value
}

// integer decodes an int; like pydantic's lax mode it also takes a numeric
// string and a float with no fraction.
func (d *decoder) integer(n *yaml.Node, path string, dst **int) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!int", "!!str":
			if v, err := strconv.ParseInt(strings.TrimSpace(strings.ReplaceAll(n.Value, "_", "")), 0, 64); err == nil && v >= math.MinInt32 && v <= math.MaxInt32 {
				i := int(v)
				*dst = &i
				return
			}
		case "!!float":
			if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<31 {
				i := int(f)
				*dst = &i
				return
			}
		}
	}
	d.addAt(nodePos(n), path, "must be an integer, got %s", describe(n))
}

// strList decodes a list of strings; a null leaves dst alone.
func (d *decoder) strList(n *yaml.Node, path string, dst *[]string) {
	var out []string
	if d.sequence(n, path, "a list of strings", func(item *yaml.Node, p string) {
		var s string
		before := len(d.errs)
		d.str(item, p, &s)
		if len(d.errs) == before {
			out = append(out, s)
		}
	}) {
		*dst = append(make([]string, 0, len(out)), out...)
	}
}

// list calls each for every item of a sequence, recording positions.
func (d *decoder) list(n *yaml.Node, path string, each func(item *yaml.Node, path string)) {
	d.sequence(n, path, "a list", each)
}

// sequence calls each for every item of a sequence node, recording the
// items' positions, and reports whether n was one; a null is not (and no
// error), anything else is an error saying n must be what.
func (d *decoder) sequence(n *yaml.Node, path, what string, each func(item *yaml.Node, path string)) bool {
	n = resolveAlias(n)
	if isNull(n) {
		return false
	}
	if n.Kind != yaml.SequenceNode {
		d.addAt(nodePos(n), path, "must be %s, got %s", what, describe(n))
		return false
	}
	for i, item := range n.Content {
		p := indexPath(path, i)
		d.pos[p] = nodePos(item)
		each(item, p)
	}
	return true
}

// anyValue converts a node into plain Go values (map[string]any, []any,
// string, int64, float64, bool, nil), recording positions of nested keys.
func (d *decoder) anyValue(n *yaml.Node, path string) any {
	n = resolveAlias(n)
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		d.eachPair(n, path, func(k, v *yaml.Node, child string) { out[k.Value] = d.anyValue(v, child) })
		return out
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			p := indexPath(path, i)
			d.pos[p] = nodePos(item)
			out[i] = d.anyValue(item, p)
		}
		return out
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			d.addAt(nodePos(n), path, "%v", err)
			return nil
		}
		if i, ok := v.(int); ok {
			return int64(i)
		}
		return v
	}
	return nil
}

// stringMap decodes a mapping of string to string (env).
func (d *decoder) stringMap(n *yaml.Node, path string, dst *map[string]string) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.addAt(nodePos(n), path, "must be a mapping of strings, got %s", describe(n))
		return
	}
	out := map[string]string{}
	d.eachPair(n, path, func(k, v *yaml.Node, child string) {
		if isNull(v) {
			d.addAt(nodePos(v), child, `must be a string, got null (write "" for an empty value)`)
			return
		}
		var s string
		before := len(d.errs)
		d.str(v, child, &s)
		if len(d.errs) == before {
			out[k.Value] = s
		}
	})
	*dst = out
}

// eachPair calls fn for every key of a mapping (merge keys expanded) with the
// key's field path, recording its position and refusing duplicate keys.
func (d *decoder) eachPair(n *yaml.Node, path string, fn func(key, val *yaml.Node, child string)) {
	seen := map[string]bool{}
	for _, kv := range mappingPairs(n) {
		key, val := kv[0], kv[1]
		child := joinPath(path, key.Value)
		if key.Kind != yaml.ScalarNode {
			d.addAt(nodePos(key), path, "keys must be strings")
			continue
		}
		if seen[key.Value] {
			d.addAt(nodePos(key), child, "duplicate key")
			continue
		}
		seen[key.Value] = true
		d.pos[child] = nodePos(key)
		fn(key, val, child)
	}
}
