package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

// runnerSet is the Docker engine (when reachable) and the bare host: serve
// picks one, ps/stop/logs look at both.
type runnerSet struct {
	docker *runner.Docker // nil when not wanted or not reachable
	host   *runner.Host
}

// openRunners opens the host runner and connects to the Docker engine; when
// no engine answers it says so on stderr if sayNoEngine (serve is about to
// fall back to the host) and goes on with the host alone.
func openRunners(cmd *cobra.Command, sayNoEngine bool) (*runnerSet, error) {
	root, err := runner.DefaultCacheRoot()
	if err != nil {
		return nil, err
	}
	host, err := runner.NewHost(root)
	if err != nil {
		return nil, err
	}
	set := &runnerSet{host: host}
	if set.docker, err = runner.ConnectDocker(cmd.Context()); err != nil && sayNoEngine {
		fmt.Fprintf(cmd.ErrOrStderr(), "%v; using the bare host\n", err)
	}
	return set, nil
}

func (s *runnerSet) all() []runner.Runner {
	if s.docker != nil {
		return []runner.Runner{s.docker, s.host}
	}
	return []runner.Runner{s.host}
}

func (s *runnerSet) Close() {
	for _, r := range s.all() {
		r.Close()
	}
}

// listAll returns the instances of every runner.
func (s *runnerSet) listAll(ctx context.Context) ([]runner.Instance, error) {
	var out []runner.Instance
	for _, r := range s.all() {
		insts, err := r.List(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, insts...)
	}
	return out, nil
}

// selector is how stop and logs pick one instance: NAME (a package name or
// a full instance name), and --profile / --runner when several match.
type selector struct {
	profile, runner string
}

func (sel *selector) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&sel.profile, "profile", "", "the profile, when NAME runs under several")
	cmd.Flags().StringVar(&sel.runner, "runner", "", "docker or host, when NAME runs under both")
}

// withInstance runs fn on the one instance NAME and sel select (resolve),
// with the runner that owns it; the runners are closed after.
func withInstance(cmd *cobra.Command, name string, sel selector, fn func(r runner.Runner, inst *runner.Instance) error) error {
	set, err := openRunners(cmd, true)
	if err != nil {
		return err
	}
	defer set.Close()
	r, inst, err := set.resolve(cmd, name, sel)
	if err != nil {
		return err
	}
	return fn(r, inst)
}

// resolve finds the one instance the selector picks, and the runner that
// owns it.
func (s *runnerSet) resolve(cmd *cobra.Command, name string, sel selector) (runner.Runner, *runner.Instance, error) {
	switch sel.runner {
	case "", "docker", "host":
	default:
		return nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("--runner %q: want docker or host", sel.runner)}
	}
	var matches []runner.Instance
	insts, err := s.listAll(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	for _, i := range insts {
		if (i.Name == name || (i.Package == name && (sel.profile == "" || i.Profile == sel.profile))) &&
			(sel.runner == "" || i.Runner == sel.runner) {
			matches = append(matches, i)
		}
	}
	profile := sel.profile
	switch len(matches) {
	case 0:
		what := name
		if profile != "" {
			what = runner.InstanceName(name, profile)
		}
		if sel.runner != "" {
			what += " on the " + sel.runner + " runner"
		}
		return nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("no tt-model server %s (see `tt-model ps`)", what)}
	case 1:
	default:
		names := ""
		for _, m := range matches {
			names += fmt.Sprintf("\n  %s --profile %s --runner %s", m.Package, m.Profile, m.Runner)
		}
		return nil, nil, &ExitError{Code: 2, Err: errors.New("several servers match " + name + "; pick one:" + names)}
	}
	m := matches[0]
	for _, r := range s.all() {
		if r.Kind() == m.Runner {
			return r, &m, nil
		}
	}
	return nil, nil, fmt.Errorf("%s runs under %s, which is not reachable now", m.Name, m.Runner)
}
