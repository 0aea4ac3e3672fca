package commands

import (
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

// openRunners connects to the Docker engine when wantDocker (saying so on
// stderr when it cannot) and always opens the host runner.
func openRunners(cmd *cobra.Command, wantDocker bool) (*runnerSet, error) {
	root, err := runner.DefaultCacheRoot()
	if err != nil {
		return nil, err
	}
	host, err := runner.NewHost(root)
	if err != nil {
		return nil, err
	}
	set := &runnerSet{host: host}
	if wantDocker {
		if set.docker, err = runner.ConnectDocker(cmd.Context()); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "%v; using the bare host\n", err)
		}
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

// list returns the instances of every runner.
func (s *runnerSet) list(cmd *cobra.Command) ([]runner.Instance, error) {
	var out []runner.Instance
	for _, r := range s.all() {
		insts, err := r.List(cmd.Context())
		if err != nil {
			return nil, err
		}
		out = append(out, insts...)
	}
	return out, nil
}

// withInstance runs fn on the one instance NAME and --profile select (resolve), with the runner
// that owns it; the runners are closed after.
func withInstance(cmd *cobra.Command, name, profile string, fn func(r runner.Runner, inst *runner.Instance) error) error {
	set, err := openRunners(cmd, true)
	if err != nil {
		return err
	}
	defer set.Close()
	r, inst, err := set.resolve(cmd, name, profile)
	if err != nil {
		return err
	}
	return fn(r, inst)
}

// resolve finds the one instance NAME (a package name, or a full instance
// name) and --profile select, and the runner that owns it.
func (s *runnerSet) resolve(cmd *cobra.Command, name, profile string) (runner.Runner, *runner.Instance, error) {
	var matches []runner.Instance
	insts, err := s.list(cmd)
	if err != nil {
		return nil, nil, err
	}
	for _, i := range insts {
		if i.Name == name || (i.Package == name && (profile == "" || i.Profile == profile)) {
			matches = append(matches, i)
		}
	}
	switch len(matches) {
	case 0:
		what := name
		if profile != "" {
			what = runner.InstanceName(name, profile)
		}
		return nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("no tt-model server %s (see `tt-model ps`)", what)}
	case 1:
	default:
		names := ""
		for _, m := range matches {
			names += fmt.Sprintf("\n  %s (profile %s, %s)", m.Name, m.Profile, m.Runner)
		}
		return nil, nil, &ExitError{Code: 2, Err: errors.New("several servers match " + name + "; give --profile:" + names)}
	}
	m := matches[0]
	for _, r := range s.all() {
		if r.Kind() == m.Runner {
			return r, &m, nil
		}
	}
	return nil, nil, fmt.Errorf("%s runs under %s, which is not reachable now", m.Name, m.Runner)
}
