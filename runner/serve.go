package runner

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Serve plans spec and starts it on r. prepare completes the spec (weights,
// HF config) before each start. When the port was chosen here and another
// process binds it between the check and the start (the engine answers
// "port is already allocated"), it plans again around that port, a few
// times.
func Serve(ctx context.Context, r Runner, pkg *Package, others []Instance, opts PlanOptions,
	prepare func(*Spec) error, progress io.Writer) (*Spec, *Instance, error) {
	for attempt := 1; ; attempt++ {
		spec, err := Plan(pkg, others, opts)
		if err != nil {
			return nil, nil, err
		}
		if err := prepare(spec); err != nil {
			return spec, nil, err
		}
		if spec.WeightsDir, err = ServedWeights(pkg, spec.Launch.Env, spec.HF, spec.Weights); err != nil {
			return spec, nil, fmt.Errorf("%s profile %s: %w", pkg.Wire.Name, spec.Profile.Name, err)
		}
		inst, err := r.Start(ctx, spec, progress)
		if err != nil && opts.Port == 0 && attempt < 4 && isPortConflict(err) {
			others = append(others, Instance{Name: "(another process)", Port: spec.Port, Running: true})
			continue
		}
		return spec, inst, err
	}
}

func isPortConflict(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use")
}
