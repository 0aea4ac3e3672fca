package pi05

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/ttmodel/tt-model/models/safetensors"
)

// quantileEps replaces a zero q99-q01 span, as lerobot's normalizer does.
const quantileEps = 1e-8

// Quantiles are one feature's QUANTILES statistics.
type Quantiles struct {
	Q01, Q99 []float32
}

func (q *Quantiles) span(i int) float32 {
	d := q.Q99[i] - q.Q01[i]
	if d == 0 {
		return quantileEps
	}
	return d
}

// Normalizer holds lerobot's QUANTILES statistics for the state and the actions; a nil field means
// the values pass through unchanged (the state is taken as already normalized and the actions are
// returned normalized, reported as `normalized: true`).
type Normalizer struct {
	State, Action *Quantiles
	Files         []string // the processor files the statistics came from
}

// The processor files lerobot saves beside a policy.
const (
	preprocessorGlob  = "policy_preprocessor_step_*_normalizer_processor.safetensors"
	postprocessorGlob = "policy_postprocessor_step_*_unnormalizer_processor.safetensors"
)

// LoadNormalizer reads the QUANTILES statistics of dir's lerobot processor files for the features
// config.json maps to QUANTILES. Files that are absent leave the feature unnormalized.
func LoadNormalizer(dir string, cfg PolicyConfig) (*Normalizer, error) {
	n := &Normalizer{}
	var files []string
	for _, g := range []string{preprocessorGlob, postprocessorGlob} {
		m, err := filepath.Glob(filepath.Join(dir, g))
		if err != nil {
			return nil, fmt.Errorf("normalizer files: %w", err)
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	want := map[string]**Quantiles{}
	if cfg.Normalization["STATE"] == "QUANTILES" {
		want[StateFeature] = &n.State
	}
	if cfg.Normalization["ACTION"] == "QUANTILES" {
		want[ActionFeature] = &n.Action
	}
	for _, path := range files {
		used, err := readQuantiles(path, want)
		if err != nil {
			return nil, err
		}
		if used {
			n.Files = append(n.Files, filepath.Base(path))
		}
	}
	if n.State != nil && len(n.State.Q01) > cfg.MaxStateDim {
		return nil, fmt.Errorf("normalizer: %s has %d values, more than max_state_dim %d", StateFeature, len(n.State.Q01), cfg.MaxStateDim)
	}
	if n.Action != nil && len(n.Action.Q01) > cfg.MaxActionDim {
		return nil, fmt.Errorf("normalizer: %s has %d values, more than max_action_dim %d", ActionFeature, len(n.Action.Q01), cfg.MaxActionDim)
	}
	return n, nil
}

// readQuantiles fills the wanted features that path has statistics for (the first file wins).
func readQuantiles(path string, want map[string]**Quantiles) (bool, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return false, fmt.Errorf("normalizer: %w", err)
	}
	defer f.Close()
	used := false
	for feature, dst := range want {
		if *dst != nil {
			continue
		}
		_, has01 := f.Info(feature + ".q01")
		_, has99 := f.Info(feature + ".q99")
		if !has01 && !has99 {
			continue
		}
		q := &Quantiles{}
		for _, s := range []struct {
			key string
			out *[]float32
		}{{".q01", &q.Q01}, {".q99", &q.Q99}} {
			v, err := f.Float32(feature + s.key)
			if err != nil {
				return false, fmt.Errorf("normalizer %s: %w", path, err)
			}
			*s.out = append([]float32(nil), v...) // copy out of the mapping
		}
		if len(q.Q01) != len(q.Q99) || len(q.Q01) == 0 {
			return false, fmt.Errorf("normalizer %s: %s.q01 has %d values, .q99 %d", path, feature, len(q.Q01), len(q.Q99))
		}
		*dst = q
		used = true
	}
	return used, nil
}

// NormalizeState maps a raw state to [-1, 1]: 2(x-q01)/(q99-q01) - 1. Without statistics the state
// is returned as is. The length must match the statistics.
func (n *Normalizer) NormalizeState(state []float32) ([]float32, error) {
	if n == nil || n.State == nil {
		return state, nil
	}
	q := n.State
	if len(state) != len(q.Q01) {
		return nil, fmt.Errorf("state has %d values, the policy's %s statistics have %d", len(state), StateFeature, len(q.Q01))
	}
	out := make([]float32, len(state))
	for i, x := range state {
		out[i] = 2*(x-q.Q01[i])/q.span(i) - 1
	}
	return out, nil
}

// UnnormalizeActions maps the first action columns back to robot units in place:
// (x+1)(q99-q01)/2 + q01. It reports whether statistics were applied.
func (n *Normalizer) UnnormalizeActions(actions [][]float32) bool {
	if n == nil || n.Action == nil {
		return false
	}
	q := n.Action
	for _, row := range actions {
		for i := range min(len(row), len(q.Q01)) {
			row[i] = (row[i]+1)*q.span(i)/2 + q.Q01[i]
		}
	}
	return true
}

// NormalizeActions maps actions in robot units back to model space in place, the inverse of
// UnnormalizeActions: 2(x-q01)/(q99-q01) - 1 on the columns the statistics cover.
func (n *Normalizer) NormalizeActions(actions [][]float32) {
	if n == nil || n.Action == nil {
		return
	}
	q := n.Action
	for _, row := range actions {
		for i := range min(len(row), len(q.Q01)) {
			row[i] = 2*(row[i]-q.Q01[i])/q.span(i) - 1
		}
	}
}
