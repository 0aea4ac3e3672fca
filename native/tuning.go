package native

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/atomicfile"
)

// How a program gets its GEMM blocking plan, and the file that keeps tuned plans per CPU model
// and kernel build, so that only the first start on a machine pays for tuning.

// Settings of GEMM tuning.
const (
	EnvGEMMPlan = "TT_GEMM_PLAN" // a plan in its text form: used as is, no tuning
	EnvGEMMTune = "TT_GEMM_TUNE" // auto (default), always, off
	// PlansFile is the file of tuned plans in the cache folder.
	PlansFile = "gemm-plans.json"
)

// GEMMTuning says how programs get their plan: Plan when set; else with Mode "off" the plan
// derived from the L1 data cache size; "auto" a plan tuned once per CPU model, kernel build and
// program shape, kept in Dir/gemm-plans.json (tuned at every start when Dir is ""); "always"
// tuned at every start (and kept).
type GEMMTuning struct {
	Plan string
	Mode string
	Dir  string
}

// GEMMTuningFromEnv reads TT_GEMM_PLAN and TT_GEMM_TUNE; dir is where tuned plans are kept (the
// packed-weights cache folder, "" for none).
func GEMMTuningFromEnv(getenv func(string) string, dir string) (GEMMTuning, error) {
	g := GEMMTuning{Plan: getenv(EnvGEMMPlan), Mode: getenv(EnvGEMMTune), Dir: dir}
	switch g.Mode {
	case "":
		g.Mode = "auto"
	case "auto", "always", "off":
	default:
		return g, fmt.Errorf("%s=%q: want auto, always or off", EnvGEMMTune, g.Mode)
	}
	if g.Plan != "" {
		if err := CheckGEMMPlan(g.Plan); err != nil {
			return g, fmt.Errorf("%s=%q: %w (e.g. kc=160,mb=8,nb=4,pf=1, or classes m<=128:...;...)", EnvGEMMPlan, g.Plan, err)
		}
	}
	return g, nil
}

// String describes the setting for logs and --verify.
func (g GEMMTuning) String() string {
	switch {
	case g.Plan != "":
		return "plan " + g.Plan + " (" + EnvGEMMPlan + ")"
	case g.Mode == "off":
		return "derived from the L1 data cache (" + EnvGEMMTune + "=off): " + DefaultGEMMPlan()
	case g.Dir == "":
		return "tuned at start (" + EnvGEMMTune + "=" + g.Mode + "), not kept"
	}
	return "tuned once per CPU and kernel build (" + EnvGEMMTune + "=" + g.Mode + "), kept in " + filepath.Join(g.Dir, PlansFile)
}

// Tunable is a program with a GEMM plan (Pi05Program, RFDETR).
type Tunable interface {
	Plan() string
	SetPlan(plan string) error
	Tune(reps int) (int, error)
}

// Apply gives prog its plan as g says; shape names the program (model, precision, threads, row
// counts) in the key of kept plans. It returns the plan and where it came from.
func (g GEMMTuning) Apply(prog Tunable, shape string, log *slog.Logger) (string, error) {
	if g.Plan != "" {
		if err := prog.SetPlan(g.Plan); err != nil {
			return "", fmt.Errorf("%s: %w", EnvGEMMPlan, err)
		}
		return g.Plan, nil
	}
	if g.Mode == "off" {
		return prog.Plan(), nil
	}
	key := fmt.Sprintf("%s | kernels %s | %s", CPUModel(), kernelSourcesSHA256[:16], shape)
	plans := readPlans(g.Dir)
	if p, ok := plans.Plans[key]; ok && g.Mode == "auto" {
		if err := prog.SetPlan(p.Plan); err == nil {
			log.Info("gemm plan from the tuned plans", "plan", p.Plan, "tuned", p.Tuned, "file", filepath.Join(g.Dir, PlansFile))
			return p.Plan, nil
		}
	}
	start := time.Now()
	n, err := prog.Tune(3)
	if err != nil {
		return "", err
	}
	plan := prog.Plan()
	log.Info("gemm plan tuned", "plan", plan, "timings", n, "seconds", time.Since(start).Seconds(), "shape", shape)
	if g.Dir != "" {
		plans.Plans[key] = keptPlan{Plan: plan, Tuned: time.Now().UTC().Format(time.RFC3339), LoadAvg: loadAvg()}
		if err := writePlans(g.Dir, plans); err != nil {
			log.Warn("tuned gemm plan not kept", "err", err)
		}
	}
	return plan, nil
}

type keptPlan struct {
	Plan    string `json:"plan"`
	Tuned   string `json:"tuned"`
	LoadAvg string `json:"loadavg"` // the machine's load when it was tuned: a busy machine tunes badly
}

type plansFile struct {
	Plans map[string]keptPlan `json:"plans"`
}

func readPlans(dir string) plansFile {
	p := plansFile{Plans: map[string]keptPlan{}}
	if dir == "" {
		return p
	}
	b, err := os.ReadFile(filepath.Join(dir, PlansFile))
	if err == nil && json.Unmarshal(b, &p) == nil && p.Plans != nil {
		return p
	}
	return plansFile{Plans: map[string]keptPlan{}}
}

// writePlans replaces the file whole (a reader never sees half of it).
func writePlans(dir string, p plansFile) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // plans read "m<=128:..."
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, PlansFile), b.Bytes())
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// CPUModel names the CPU for keys of per-machine results: /proc/cpuinfo's model name, family,
// model and stepping of the first CPU, and the L1 data cache size.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return fmt.Sprintf("unknown cpu, L1d %d", L1DataCacheBytes())
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the first CPU only
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%s (family %s model %s stepping %s), L1d %d", fields["model name"], fields["cpu family"],
		fields["model"], fields["stepping"], L1DataCacheBytes())
}
