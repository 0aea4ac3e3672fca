package rfdetr

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ttmodel/tt-model/models/safetensors"
)

// Weights is a checked RF-DETR checkpoint: every tensor of Specs is present
// with the right shape and a float dtype. Tensors are read on demand, one at
// a time, from the mapping.
type Weights struct {
	file   *safetensors.File
	scheme string
	specs  []Spec
}

// Problem is one missing or mis-shaped tensor.
type Problem struct {
	Tensor    string // name in the file
	Canonical string // canonical (rfdetr) name
	Want, Got []int  // Got is nil when the tensor is missing
	AtLeast   bool   // Want[0] is a minimum (query tables carry 13 groups)
	Detail    string // a dtype problem, when not a shape one
}

func (p Problem) want() string {
	if !p.AtLeast {
		return fmt.Sprint(p.Want)
	}
	dims := []string{fmt.Sprintf(">=%d", p.Want[0])}
	for _, d := range p.Want[1:] {
		dims = append(dims, fmt.Sprint(d))
	}
	return "[" + strings.Join(dims, " ") + "]"
}

func (p Problem) String() string {
	name := p.Tensor
	if p.Canonical != p.Tensor {
		name = fmt.Sprintf("%s (canonical %s)", p.Tensor, p.Canonical)
	}
	switch {
	case p.Detail != "":
		return fmt.Sprintf("%s: %s", name, p.Detail)
	case p.Got == nil:
		return fmt.Sprintf("%s: missing, want shape %s", name, p.want())
	}
	return fmt.Sprintf("%s: shape %v, want %s", name, p.Got, p.want())
}

// CheckpointError lists every problem of a checkpoint, not just the first.
type CheckpointError struct {
	Path     string
	Scheme   string
	Problems []Problem
}

func (e *CheckpointError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %s (%s names): %d tensor problem(s):", e.Path, e.Scheme, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// OpenWeights maps a model.safetensors file and checks it against Specs.
// The naming scheme (original rfdetr or transformers-native) is detected
// from the names present. On any problem the file is closed and a
// *CheckpointError lists them all.
func OpenWeights(path string) (*Weights, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	w, err := checkWeights(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return w, nil
}

func checkWeights(f *safetensors.File) (*Weights, error) {
	specs := Specs()
	scheme, err := detectScheme(f, specs)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, s := range specs {
		problems = append(problems, checkSpec(f, scheme, s)...)
	}
	if len(problems) > 0 {
		return nil, &CheckpointError{Path: f.Path(), Scheme: scheme, Problems: problems}
	}
	return &Weights{file: f, scheme: scheme, specs: specs}, nil
}

// detectScheme picks the naming scheme under which more of the needed
// tensors exist.
func detectScheme(f *safetensors.File, specs []Spec) (string, error) {
	best, bestHits := "", 0
	for _, scheme := range []string{SchemeRFDETR, SchemeTransformers} {
		hits := 0
		for _, s := range specs {
			if _, ok := f.Info(SourceNames(scheme, s.Name)[0]); ok {
				hits++
			}
		}
		if hits > bestHits {
			best, bestHits = scheme, hits
		}
	}
	if best == "" {
		names := f.Names()
		if len(names) > 5 {
			names = append(names[:5:5], "…")
		}
		return "", fmt.Errorf("checkpoint %s: no RF-DETR tensors found (want names like %s or %s); it has %d tensors: %s",
			f.Path(), specs[0].Name, SourceNames(SchemeTransformers, specs[0].Name)[0], len(f.Names()), strings.Join(names, ", "))
	}
	return best, nil
}

// checkSpec returns the problems of one canonical tensor: each source part
// must exist with a float dtype, and the parts together must have the shape.
func checkSpec(f *safetensors.File, scheme string, s Spec) []Problem {
	parts := SourceNames(scheme, s.Name)
	partShape := slices.Clone(s.Shape)
	partShape[0] /= len(parts)
	var problems []Problem
	for _, name := range parts {
		info, ok := f.Info(name)
		if !ok {
			problems = append(problems, Problem{Tensor: name, Canonical: s.Name, Want: partShape, AtLeast: s.MinRows > 0})
			continue
		}
		switch info.DType {
		case safetensors.F32, safetensors.BF16, safetensors.F16:
		default:
			problems = append(problems, Problem{Tensor: name, Canonical: s.Name, Want: partShape, Got: info.Shape,
				Detail: fmt.Sprintf("dtype %s, want F32, BF16 or F16", info.DType)})
			continue
		}
		if !shapeOK(s, partShape, info.Shape) {
			problems = append(problems, Problem{Tensor: name, Canonical: s.Name, Want: partShape, AtLeast: s.MinRows > 0, Got: info.Shape})
		}
	}
	return problems
}

func shapeOK(s Spec, want, got []int) bool {
	if s.MinRows == 0 {
		return slices.Equal(want, got)
	}
	return len(got) == len(want) && got[0] >= s.MinRows && slices.Equal(got[1:], want[1:])
}

// Scheme is the naming scheme the checkpoint uses.
func (w *Weights) Scheme() string { return w.scheme }

// Random reports whether the file is a checkpoint of random weights that
// RandomCheckpoint wrote (its header says so), whose detections mean nothing.
func (w *Weights) Random() bool {
	return strings.HasPrefix(w.file.Metadata()[GeneratorKey], randomGenerator)
}

// Path is the checkpoint file.
func (w *Weights) Path() string { return w.file.Path() }

// Specs lists the canonical tensors, in load order.
func (w *Weights) Specs() []Spec { return w.specs }

// Tensor returns a canonical tensor as float32 with its shape. The values may
// alias the read-only mapping (F32 files) and stay valid until Close; row
// tables are cut to the rows inference uses. A name outside Specs is read
// as the file has it (its shape unchecked).
func (w *Weights) Tensor(name string) ([]float32, []int, error) {
	if w.file == nil {
		return nil, nil, fmt.Errorf("rfdetr: tensor %s read after Close", name)
	}
	parts := SourceNames(w.scheme, name)
	var out []float32
	var shape []int
	for _, p := range parts {
		v, err := w.file.Float32(p)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %w", w.Path(), err)
		}
		info, _ := w.file.Info(p)
		if len(parts) == 1 {
			out, shape = v, slices.Clone(info.Shape)
			break
		}
		out = append(out, v...)
		if shape == nil {
			shape = slices.Clone(info.Shape)
		} else if len(shape) > 0 && len(info.Shape) > 0 {
			shape[0] += info.Shape[0]
		}
	}
	i := slices.IndexFunc(w.specs, func(s Spec) bool { return s.Name == name })
	if i < 0 {
		return out, shape, nil
	}
	s := w.specs[i]
	return out[:numElements(s.Shape)], slices.Clone(s.Shape), nil
}

// Release drops the file pages of a canonical tensor once its values have
// been copied elsewhere (see safetensors.File.Release).
func (w *Weights) Release(name string) error {
	if w.file == nil {
		return nil
	}
	for _, p := range SourceNames(w.scheme, name) {
		if err := w.file.Release(p); err != nil {
			return err
		}
	}
	return nil
}

// Close unmaps the checkpoint; tensors returned earlier become invalid.
func (w *Weights) Close() error {
	if w.file == nil {
		return errors.New("rfdetr: weights already closed")
	}
	err := w.file.Close()
	w.file = nil
	return err
}

func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
