package runner

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/manifest"
)

// portTakenRunner answers the first starts as an engine does when another
// process bound the port after it was checked.
type portTakenRunner struct {
	conflicts int
	ports     []int
}

func (r *portTakenRunner) Kind() string { return "docker" }
func (r *portTakenRunner) Close() error { return nil }
func (r *portTakenRunner) Find(context.Context, string) (*Instance, error) {
	return nil, nil
}
func (r *portTakenRunner) List(context.Context) ([]Instance, error) { return nil, nil }
func (r *portTakenRunner) Stop(context.Context, *Instance, time.Duration, io.Writer) (StopResult, error) {
	return StopResult{}, nil
}
func (r *portTakenRunner) Logs(context.Context, *Instance, bool, io.Writer) error { return nil }
func (r *portTakenRunner) Start(_ context.Context, spec *Spec, _ io.Writer) (*Instance, error) {
	r.ports = append(r.ports, spec.Port)
	if len(r.ports) <= r.conflicts {
		return nil, fmt.Errorf("start container: driver failed programming external connectivity: Bind for 0.0.0.0:%d failed: port is already allocated", spec.Port)
	}
	return &Instance{Name: spec.Name, Port: spec.Port, Running: true}, nil
}

func TestServeMovesOffATakenPort(t *testing.T) {
	pkg := &Package{Path: "p.json", Wire: &manifest.Wire{Name: "p", Container: &manifest.Container{
		Kind: manifest.KindGoServer, Runtime: map[string]any{"model": "rf-detr"},
		Serve: manifest.ServeSettings{Hardware: "p150", MeshDevice: "P150"},
	}}}
	opts := PlanOptions{CacheRoot: t.TempDir(), DevDir: filepath.Join(t.TempDir(), "none")}
	noop := func(*Spec) error { return nil }
	cases := []struct {
		name      string
		conflicts int
		port      int
		wantErr   bool
		wantTries int
	}{
		{"one conflict", 1, 0, false, 2},
		{"gives up", 10, 0, true, 4},
		{"an asked-for port is not moved", 1, 0, true, 1},
	}
	cases[2].port = FirstPort + 500
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &portTakenRunner{conflicts: c.conflicts}
			o := opts
			o.Port = c.port
			spec, inst, err := Serve(context.Background(), r, pkg, nil, o, noop, io.Discard)
			if (err != nil) != c.wantErr || len(r.ports) != c.wantTries {
				t.Fatalf("err = %v after %d starts %v; want error %v after %d", err, len(r.ports), r.ports, c.wantErr, c.wantTries)
			}
			if err == nil && (inst.Port != spec.Port || inst.Port == r.ports[0] || spec.Launch.Argv[len(spec.Launch.Argv)-1] != fmt.Sprint(inst.Port)) {
				t.Errorf("started on %d (argv %q) after a conflict on %d", inst.Port, spec.Launch.Argv, r.ports[0])
			}
		})
	}
}
