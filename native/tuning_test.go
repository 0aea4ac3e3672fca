package native

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fakeTunable struct {
	plan  string
	tunes int
}

func (f *fakeTunable) Plan() string { return f.plan }
func (f *fakeTunable) SetPlan(p string) error {
	if err := CheckGEMMPlan(p); err != nil {
		return err
	}
	f.plan = p
	return nil
}
func (f *fakeTunable) Tune(int) (int, error) {
	f.tunes++
	f.plan = "m<=128:kc=96,mb=4,nb=8,pf=0;kc=128,mb=8,nb=4,pf=1"
	return 20, nil
}

func TestGEMMTuningFromEnv(t *testing.T) {
	env := func(plan, mode string) func(string) string {
		return func(k string) string { return map[string]string{EnvGEMMPlan: plan, EnvGEMMTune: mode}[k] }
	}
	if g, err := GEMMTuningFromEnv(env("", ""), "/c"); err != nil || g.Mode != "auto" || g.Dir != "/c" {
		t.Errorf("defaults: %+v %v", g, err)
	}
	for _, bad := range []struct{ plan, mode, want string }{
		{"", "sometimes", EnvGEMMTune}, {"kc=0", "", EnvGEMMPlan}, {"fast", "", EnvGEMMPlan},
	} {
		if _, err := GEMMTuningFromEnv(env(bad.plan, bad.mode), ""); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q/%q: %v, want an error naming %s", bad.plan, bad.mode, err, bad.want)
		}
	}
}

func TestGEMMTuningApply(t *testing.T) {
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	dir := t.TempDir()
	// a forced plan: no tuning, nothing kept
	f := &fakeTunable{plan: DefaultGEMMPlan()}
	if p, err := (GEMMTuning{Plan: "kc=128,mb=4,nb=4,pf=0", Mode: "auto", Dir: dir}).Apply(f, "s", log); err != nil || p != "kc=128,mb=4,nb=4,pf=0" || f.tunes != 0 {
		t.Errorf("forced: %q %v, %d tunes", p, err, f.tunes)
	}
	// off: the derived plan stays
	f = &fakeTunable{plan: DefaultGEMMPlan()}
	if p, _ := (GEMMTuning{Mode: "off", Dir: dir}).Apply(f, "s", log); p != DefaultGEMMPlan() || f.tunes != 0 {
		t.Errorf("off: %q, %d tunes", p, f.tunes)
	}
	// auto: tuned once, then read back for the same shape; another shape tunes again
	auto := GEMMTuning{Mode: "auto", Dir: dir}
	f = &fakeTunable{plan: DefaultGEMMPlan()}
	auto.Apply(f, "shape A", log)
	g := &fakeTunable{plan: DefaultGEMMPlan()}
	auto.Apply(g, "shape A", log)
	h := &fakeTunable{plan: DefaultGEMMPlan()}
	auto.Apply(h, "shape B", log)
	if f.tunes != 1 || g.tunes != 0 || g.plan != f.plan || h.tunes != 1 {
		t.Errorf("auto: tunes %d/%d/%d, plans %q %q", f.tunes, g.tunes, h.tunes, f.plan, g.plan)
	}
	// always: tunes although a plan is kept
	a := &fakeTunable{plan: DefaultGEMMPlan()}
	(GEMMTuning{Mode: "always", Dir: dir}).Apply(a, "shape A", log)
	if a.tunes != 1 {
		t.Errorf("always: %d tunes", a.tunes)
	}
	// a kept file that is not JSON is replaced, not fatal
	if err := os.WriteFile(filepath.Join(dir, PlansFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &fakeTunable{plan: DefaultGEMMPlan()}
	if _, err := auto.Apply(b, "shape A", log); err != nil || b.tunes != 1 {
		t.Errorf("broken file: %v, %d tunes", err, b.tunes)
	}
	if cpu := CPUModel(); !strings.Contains(cpu, "L1d") {
		t.Errorf("CPUModel %q", cpu)
	}
}
