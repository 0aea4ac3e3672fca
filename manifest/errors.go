package manifest

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a 1-based line and column in the manifest file.
type Pos struct {
	Line, Col int
}

// positions maps field paths to where they were written.
type positions map[string]Pos

// at returns the position of path, or of its nearest written parent
// ("serve_profiles[1].env.X" → "serve_profiles[1].env" → …), or the zero Pos.
func (p positions) at(path string) Pos {
	for path != "" {
		if pos, ok := p[path]; ok {
			return pos
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return p[""]
}

// FieldError is one problem in a manifest: where, which field, what.
type FieldError struct {
	File string
	Pos  Pos
	Path string // field path, e.g. serve_profiles[1].mesh_device; "" for the document
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Pos.Line, e.Pos.Col)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errorf is a problem found outside this package (the builder's own checks
// of the sources) reported as validate reports its own: at the file:line:col
// where path ("source.extra_code[0].paths[1]") is written.
func (m *Manifest) Errorf(path, format string, args ...any) error {
	return &FieldError{File: m.File, Pos: m.pos.at(path), Path: path, Msg: fmt.Sprintf(format, args...)}
}

// ErrorList is every problem found in one manifest, in file order.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted orders the errors by position, keeping the order of equal ones.
func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return l
}

// ReadError is a manifest that could not be read or is not YAML at all.
type ReadError struct {
	File string
	Err  error
}

func (e *ReadError) Error() string { return fmt.Sprintf("read %s: %v", e.File, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// collector gathers errors with positions while decoding and validating.
type collector struct {
	file string
	pos  positions
	errs ErrorList
}

// addf records an error at the position of path.
func (c *collector) addf(path, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{File: c.file, Pos: c.pos.at(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// addAt records an error at an explicit position.
func (c *collector) addAt(pos Pos, path, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{File: c.file, Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)})
}
