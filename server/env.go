package server

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// Every PI05_* and TT_* variable a profile can set is acted on, or refused at start, or named at
// start as having no effect on this build (and what acts instead): none is accepted silently.

// EnvRules say what a model's server does with the PI05_* and TT_* variables of its environment;
// each model package writes its own from the sets every model shares (SupervisorVars, ChipVars,
// MainVars).
type EnvRules struct {
	// Read are the variables the model's configuration reads (pi0.5: recorded while its
	// constructor runs).
	Read map[string]bool
	// Elsewhere are read by another part of the program (main, the kernels, the supervisor); a
	// non-empty note is said at start.
	Elsewhere map[string]string
	// NoEffect are known variables this server does not use, with why.
	NoEffect map[string]string
	// Chips are the chip settings (ChipVars, plus the model's own) this server does not use.
	Chips map[string]bool
	// Refuse is the prefix of the variables refused when nobody reads them (pi0.5: "PI05_": a typo
	// or a setting of another build); other unknown PI05_* and TT_* ones are named as no effect.
	Refuse string
	// Foreign maps the prefix of another model's variables to why one of them has no effect here
	// (RF-DETR: "PI05_"), said for each such variable nobody reads.
	Foreign map[string]string
}

// The supervisor's, main's and the kernels' variables, and those of chips, are the same for every
// model; each call returns a fresh map, for a model's rules to merge.

// SupervisorVars are the variables tt-model supervise reads, with what it does with them.
func SupervisorVars() map[string]string {
	return map[string]string{
		"PI05_RESET_ON_START": "is read by tt-model supervise, which resets the chips before starting this server " +
			"(auto: when the hang marker exists; 1: always; 0: never); the server itself opens no chips",
	}
}

// ChipVars are the chip settings a package sets for the chips its profile drives (the kind's
// launcher and the manifest): this build computes on the CPU and the supervisor locks and resets
// the chips, so the server uses none of them. They are said at start in one line, as information:
// a package's own settings are no mistake to warn about.
func ChipVars() map[string]bool {
	return map[string]bool{
		"TT_METAL_CACHE": true, "TT_METAL_HOME": true, "TT_METAL_VISIBLE_DEVICES": true, "TT_VISIBLE_DEVICES": true,
		"TT_DEVICE_ID": true, "MESH_DEVICE": true,
	}
}

// MainVars are read by main and the kernels for every model (a bad value is refused there).
func MainVars() map[string]string {
	return map[string]string{
		"TT_ISA":          "", // the kernels: a cap on the kernel family
		"TT_MODEL_FAULT":  "", // the test-only fault switch
		"TT_WEIGHT_CACHE": "", // the packed-weights cache folder (or off)
		"TT_GEMM_TUNE":    "", // how programs get their GEMM blocking plan
		"TT_GEMM_PLAN":    "", // a GEMM blocking plan used as is
		RequestMemoryEnv:  "", // the request memory budget
	}
}

// Merge is the union of ms; a later map's value wins.
func Merge[V any](ms ...map[string]V) map[string]V {
	out := map[string]V{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// EnvReport is what a server's start says of its environment's PI05_* and TT_* variables:
// Notices, warnings (a setting without effect here: a mistake, or a setting of another build);
// Info, settings read by another program (the supervisor), said as information; Chips, the chip
// settings the package sets for the chips it drives, which this build does not use, in one line
// ("" when there are none). A package's own settings are no mistake to warn about.
type EnvReport struct {
	Notices []string
	Info    []string
	Chips   string
}

// Say logs the report at start.
func (r EnvReport) Say(log *slog.Logger) {
	for _, n := range r.Notices {
		log.Warn("configuration notice", "notice", n)
	}
	for _, n := range r.Info {
		log.Info("setting read by another program", "setting", n)
	}
	if r.Chips != "" {
		log.Info("chip settings not used by this build", "settings", r.Chips)
	}
}

// Check reports environ's PI05_* and TT_* variables that have no effect here or are read by
// another program, and refuses unknown ones with the Refuse prefix.
func (r EnvRules) Check(environ []string) (EnvReport, error) {
	vals := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var notices, info, chips []string
	var errs []error
	for _, k := range keys {
		v := vals[k]
		if r.Read[k] {
			continue
		}
		if r.Chips[k] {
			chips = append(chips, k+"="+v)
			continue
		}
		if note, ok := r.Elsewhere[k]; ok {
			if k == "PI05_RESET_ON_START" {
				switch v {
				case "auto", "1", "0", "always", "never":
				default:
					errs = append(errs, fmt.Errorf("PI05_RESET_ON_START=%q: want auto, 1 or 0", v))
					continue
				}
			}
			if note != "" {
				info = append(info, fmt.Sprintf("%s=%s %s", k, v, note))
			}
			continue
		}
		if why, ok := r.NoEffect[k]; ok {
			if why != "" {
				notices = append(notices, fmt.Sprintf("%s=%s has no effect: %s", k, v, why))
			}
			continue
		}
		switch {
		case r.Refuse != "" && strings.HasPrefix(k, r.Refuse):
			errs = append(errs, fmt.Errorf("%s=%s: this server reads no such variable (a typo, or a setting of another build?); see docs/pi05.md for the variables it takes", k, v))
		case foreign(r.Foreign, k) != "":
			notices = append(notices, fmt.Sprintf("%s=%s has no effect: %s", k, v, foreign(r.Foreign, k)))
		case strings.HasPrefix(k, "TT_"):
			notices = append(notices, fmt.Sprintf("%s=%s has no effect: tt-model-server does not read it", k, v))
		}
	}
	rep := EnvReport{Notices: notices, Info: info}
	if len(chips) > 0 {
		rep.Chips = strings.Join(chips, " ") + ": this build computes on the CPU; tt-model supervise locks and resets the chips"
	}
	return rep, errors.Join(errs...)
}

// foreign is why k, a variable of another model (its prefix in prefixes), has no effect here; ""
// for none.
func foreign(prefixes map[string]string, k string) string {
	for p, why := range prefixes {
		if strings.HasPrefix(k, p) {
			return why
		}
	}
	return ""
}
