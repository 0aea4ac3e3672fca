package native

import (
	"slices"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/pi05/golden"
)

// Every blocking the tuner may pick, forced on a real program, must give bit for bit what the
// program's starting plan gives. The C self-test "gemm" runs all 108 candidates on every GEMM
// shape it tests; a whole program here runs a covering set: every value of every coordinate (K
// block, prefetch distance, task tile) at least once.

// coveringPlans picks candidates until every coordinate value has appeared in one.
func coveringPlans(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, c := range GEMMBlockingCandidates() {
		f := strings.Split(c, ",") // kc=..,mb=..,nb=..,pf=..
		if len(f) != 4 {
			t.Fatalf("candidate %q", c)
		}
		keys := []string{f[0], f[1] + "," + f[2], f[3]}
		fresh := false
		for _, k := range keys {
			fresh = fresh || !seen[k]
		}
		if fresh {
			out = append(out, c)
			for _, k := range keys {
				seen[k] = true
			}
		}
	}
	return out
}

// runPlanned runs g's three stages on a program of m with the given plan ("" keeps the default):
// the actions and every layer's K and V.
func runPlanned(t *testing.T, m *Pi05Model, g golden.Case, plan string) ([]float32, [][]float32) {
	t.Helper()
	slab, act := runGoldenPlanned(t, m, g, plan)
	var kv [][]float32
	for l := 0; l < m.Dims().LLayers; l++ {
		k, v, err := slab.KV(l)
		if err != nil {
			t.Fatal(err)
		}
		kv = append(kv, k, v)
	}
	return act, kv
}

func TestPi05EveryGEMMPlanIsBitIdentical(t *testing.T) {
	// two classes too: the expert's rows under one blocking, vision and prefix under another
	plans := append(coveringPlans(t), "m<=64:kc=96,mb=4,nb=2,pf=0;kc=384,mb=16,nb=8,pf=2")
	g := pi05Goldens(t)[4] // 3 cameras, one masked: 132 prefix rows
	for _, prec := range []Precision{BF16, FP32} {
		m := loadTiny(t, prec, ISABest)
		wantAct, wantKV := runPlanned(t, m, g, "")
		for _, plan := range plans {
			act, kv := runPlanned(t, m, g, plan)
			if !slices.Equal(act, wantAct) {
				t.Errorf("%s, plan %s: actions differ from the default plan's (max |diff| %g)", prec, plan, maxAbsDiff(act, wantAct))
			}
			for i := range kv {
				if !slices.Equal(kv[i], wantKV[i]) {
					t.Errorf("%s, plan %s: layer %d %s differs", prec, plan, i/2, []string{"K", "V"}[i%2])
					break
				}
			}
		}
	}
}

func TestPi05TunePicksACandidate(t *testing.T) {
	m := loadTiny(t, BF16, ISABest)
	g := pi05Goldens(t)[0]
	prog, err := m.NewProgram(presetFor(g, 1), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if prog.Plan() != DefaultGEMMPlan() {
		t.Errorf("a new program's plan %q, want the derived %q", prog.Plan(), DefaultGEMMPlan())
	}
	n, err := prog.Tune(1)
	if err != nil || n < 10 {
		t.Fatalf("tune: %d timings, %v", n, err)
	}
	plan := prog.Plan()
	classes := strings.Split(plan, ";")
	if len(classes) != 2 || !strings.HasPrefix(classes[0], "m<=128:") {
		t.Fatalf("tuned plan %q: want 2 classes, the first m<=128", plan)
	}
	for _, c := range classes {
		c = c[strings.Index(c, ":")+1:]
		if !slices.Contains(GEMMBlockingCandidates(), c) {
			t.Errorf("tuned blocking %q is not a tested candidate", c)
		}
	}
	if err := prog.SetPlan("kc=0"); err == nil || !strings.Contains(err.Error(), "kc") {
		t.Errorf("a bad plan: %v", err)
	}
}

// Both precisions: bf16 runs the AMX walk on an AMX machine (its own blockings, K blocks rounded to
// 16 pairs), fp32 the vector one.
func TestRFDETREveryGEMMPlanIsBitIdentical(t *testing.T) {
	for _, prec := range []Precision{FP32, BF16} {
		t.Run(string(prec), func(t *testing.T) {
			m, pixels := loadRandomRFDETR(t, 1, RFDETROptions{Threads: 2, Precision: prec})
			want, err := m.Forward(pixels)
			if err != nil {
				t.Fatal(err)
			}
			for _, plan := range coveringPlans(t) {
				if err := m.SetPlan(plan); err != nil {
					t.Fatal(err)
				}
				got, err := m.Forward(pixels)
				if err != nil {
					t.Fatal(err)
				}
				if *got != *want {
					t.Errorf("plan %s: the forward differs from the default plan's", plan)
				}
			}
			if n, err := m.Tune(1); err != nil || n < 10 {
				t.Fatalf("tune: %d timings, %v", n, err)
			}
			if got, err := m.Forward(pixels); err != nil || *got != *want {
				t.Errorf("after tuning (plan %s) the forward differs (%v)", m.Plan(), err)
			}
		})
	}
}

func TestCoveringPlansCoverEveryValue(t *testing.T) {
	plans := coveringPlans(t)
	if len(plans) < 6 || len(plans) > 20 {
		t.Errorf("%d covering plans: %v", len(plans), plans)
	}
	for _, want := range []string{"kc=96", "kc=384", "pf=0", "pf=2", "mb=16,nb=4", "mb=4,nb=8"} {
		if !slices.ContainsFunc(plans, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("no covering plan has %s", want)
		}
	}
}
