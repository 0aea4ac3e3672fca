package runner

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// PlanError is a serve refused before anything started: an unknown
// profile, a bad port or chip list, weights the server would not find.
type PlanError struct{ Err error }

func (e *PlanError) Error() string { return e.Err.Error() }
func (e *PlanError) Unwrap() error { return e.Err }

// Serve plans spec and starts it on r. Under the instance lock
// (LockInstance) it lists what already runs on every runner (list), refuses
// a running instance of the same name (*RunningError), and starts.
// prepare completes the spec (weights, HF config) before each start. When
// the port was chosen here and another process binds it between the check
// and the start (the engine answers "port is already allocated"), it plans
// again around that port, a few times.
func Serve(ctx context.Context, r Runner, pkg *Package, list func(context.Context) ([]Instance, error), opts PlanOptions,
	prepare func(*Spec) error, progress io.Writer) (*Spec, *Instance, error) {
	prof, err := pkg.Wire.Container.ResolveProfile(opts.Profile)
	if err != nil {
		return nil, nil, &PlanError{err}
	}
	name := InstanceName(pkg.Wire.Name, prof.Name)
	if opts.CacheRoot == "" {
		if opts.CacheRoot, err = DefaultCacheRoot(); err != nil {
			return nil, nil, err
		}
	}
	unlock, err := LockInstance(opts.CacheRoot, name, progress)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	var others []Instance
	if list != nil {
		if others, err = list(ctx); err != nil {
			return nil, nil, err
		}
	}
	for _, o := range others {
		if o.Name == name && o.Running {
			return nil, nil, &RunningError{Instance: &o}
		}
	}
	for attempt := 1; ; attempt++ {
		spec, err := Plan(pkg, others, opts)
		if err != nil {
			return nil, nil, &PlanError{err}
		}
		if err := prepare(spec); err != nil {
			return spec, nil, err
		}
		if spec.WeightsDir, err = ServedWeights(pkg, spec.Launch.Env, spec.HF, spec.Weights); err != nil {
			return spec, nil, &PlanError{fmt.Errorf("%s profile %s: %w", pkg.Wire.Name, spec.Profile.Name, err)}
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
