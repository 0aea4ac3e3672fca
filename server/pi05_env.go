package server

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Every PI05_* and TT_* variable a profile can set is acted on, or refused at start, or named at
// start as having no effect on this build (and what acts instead): none is accepted silently.
// Acted on: what the pi0.5 configuration, the weights lookup and the serving engine read while
// NewPI05 runs (recorded there), plus the variables below that other parts of the program read.

// pi05ReadElsewhere are PI05_*/TT_* variables read outside NewPI05: by tt-model-server's main, the
// kernels, or the supervisor.
var pi05ReadElsewhere = map[string]string{
	"PI05_PRECISION": "", // main: the kernels' precision
	"TT_ISA":         "", // the kernels: a cap on the kernel family
	"TT_MODEL_FAULT": "", // main: the test-only fault switch
	"PI05_RESET_ON_START": "is read by tt-model supervise, which resets the chips before starting this server " +
		"(auto: when the hang marker exists; 1: always; 0: never); the server itself opens no chips",
}

// pi05NoEffect are variables a profile or the runner may set that this build does not use.
var pi05NoEffect = map[string]string{
	"TT_METAL_CACHE":            "there is no tt-metal in this build (its kernels are compiled in)",
	"TT_METAL_HOME":             "there is no tt-metal in this build (its kernels are compiled in)",
	"TT_DEVICE_ID":              "the CPU devices come from TT_MESH_SHAPE / TT_CPU_DEVICES, not a chip id",
	"TT_VISIBLE_DEVICES":        "the CPU devices come from TT_MESH_SHAPE / TT_CPU_DEVICES, not chips",
	"TT_RF_DETR_WEIGHTS":        "it locates RF-DETR's weights; this server serves pi0.5",
	"MESH_DEVICE":               "the CPU devices come from TT_MESH_SHAPE / TT_CPU_DEVICES",
	"RFDETR_PRECISION":          "it is RF-DETR's precision; pi0.5's is PI05_PRECISION",
	"TT_MODEL_FAULT_EXIT_AFTER": "it was replaced by TT_MODEL_FAULT=exit:after=N",
}

// checkEnviron refuses a PI05_* variable nobody reads (a typo, or a setting of another build) and
// returns the notices to say at start for the rest that have no effect here.
func checkEnviron(environ []string, read map[string]bool) ([]string, error) {
	var notices []string
	var errs []error
	names := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		names[k] = v
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := names[k]
		if read[k] {
			continue
		}
		if why, ok := pi05ReadElsewhere[k]; ok {
			if k == "PI05_RESET_ON_START" {
				switch v {
				case "auto", "1", "0", "always", "never":
				default:
					errs = append(errs, fmt.Errorf("PI05_RESET_ON_START=%q: want auto, 1 or 0", v))
					continue
				}
			}
			if why != "" {
				notices = append(notices, fmt.Sprintf("%s=%s %s", k, v, why))
			}
			continue
		}
		if why, ok := pi05NoEffect[k]; ok {
			if k == "TT_MODEL_FAULT_EXIT_AFTER" {
				errs = append(errs, fmt.Errorf("%s: %s", k, why))
				continue
			}
			notices = append(notices, fmt.Sprintf("%s=%s has no effect: %s", k, v, why))
			continue
		}
		switch {
		case strings.HasPrefix(k, "PI05_"):
			errs = append(errs, fmt.Errorf("%s=%s: this server reads no such variable (a typo, or a setting of another build?); see docs/pi05.md for the variables it takes", k, v))
		case strings.HasPrefix(k, "TT_"):
			notices = append(notices, fmt.Sprintf("%s=%s has no effect: tt-model-server does not read it", k, v))
		}
	}
	return notices, errors.Join(errs...)
}
