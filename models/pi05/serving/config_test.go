package serving

import (
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) Env {
	return Env{Getenv: func(k string) string { return m[k] }, CPUs: []int{0, 1, 2, 3}, ActionRows: 64}
}

func TestFromEnvDefaultsAndProfiles(t *testing.T) {
	base := map[string]string{"TT_MESH_SHAPE": "1x4", "PI05_MEGAKERNEL": "mc", "PI05_BATCH_WINDOW_MS": "0",
		"PI05_HANG_S": "10", "PI05_HANG_ACTION": "degrade", "PI05_HANG_MARKER": "/cache/pi05_hang_marker"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"multi-robot", with(map[string]string{"PI05_LAYOUT": "dp", "PI05_SLO_MS": "100", "PI05_SLO_P99_MS": "110", "PI05_SLO_CLOCK_GUARD": "1.69"}), func(t *testing.T, c Config) {
			if c.Layout != DP || c.Devices != 4 || c.Threads != 1 || len(c.CPUs) != 4 || c.CPUs[3][0] != 3 {
				t.Errorf("devices %d x %d threads, cpus %v", c.Devices, c.Threads, c.CPUs)
			}
			if c.SLO.P50 != 100*time.Millisecond || c.SLO.P99 != 110*time.Millisecond || c.SLO.ClockGuard != 1.69 || c.SLO.Margin != 5*time.Millisecond {
				t.Errorf("slo %+v", c.SLO)
			}
			if c.MaxBatch != 4 || c.Routing != RouteRobot || c.BatchWindow != 0 || c.Hang.After != 10*time.Second {
				t.Errorf("batch %d, routing %s, window %s, hang %s", c.MaxBatch, c.Routing, c.BatchWindow, c.Hang.After)
			}
			if c.ChipOnly["PI05_MEGAKERNEL"] != "mc" || !strings.Contains(strings.Join(c.Info, "\n"), "PI05_MEGAKERNEL=mc describes the chips' programs") {
				t.Errorf("chip-only %v, notices %q", c.ChipOnly, c.Notices)
			}
		}},
		{"single-robot", with(map[string]string{"PI05_LAYOUT": "sp"}), func(t *testing.T, c Config) {
			if c.Layout != SP || c.Devices != 1 || c.Threads != 4 || c.MaxBatch != 1 || c.CPUs != nil {
				t.Errorf("sp: %d devices x %d threads, batch %d, cpus %v", c.Devices, c.Threads, c.MaxBatch, c.CPUs)
			}
		}},
		{"disaggregated", with(map[string]string{"PI05_LAYOUT": "pd", "PI05_MAX_BATCH": "4"}), func(t *testing.T, c Config) {
			if c.Layout != PD || c.Devices != 4 || c.PrefixDevices != 3 || c.MaxBatch != 4 || c.Routing != RouteLeast {
				t.Errorf("pd: %+v", c)
			}
		}},
		{"oversubscribed", map[string]string{"TT_CPU_DEVICES": "8"}, func(t *testing.T, c Config) {
			if c.Devices != 8 || c.Threads != 1 || c.CPUs != nil || !strings.Contains(strings.Join(c.Notices, "\n"), "outnumber") {
				t.Errorf("8 devices on 4 CPUs: %d x %d, cpus %v, notices %q", c.Devices, c.Threads, c.CPUs, c.Notices)
			}
		}},
		{"threads split", map[string]string{"TT_CPU_DEVICES": "2", "TT_NUM_THREADS": "4", "PI05_EXPERT_PACK": "0"}, func(t *testing.T, c Config) {
			if c.Devices != 2 || c.Threads != 2 || c.CPUs[1][1] != 3 || c.Pack || c.Hang.Marker == "" {
				t.Errorf("2 devices of 4 threads: %+v", c)
			}
		}},
		{"dp's settings under sp", map[string]string{"PI05_LAYOUT": "sp", "PI05_SLO_MS": "100", "PI05_MAX_BATCH": "4", "PI05_STEAL": "1"}, func(t *testing.T, c Config) {
			n := strings.Join(c.Notices, "\n")
			if c.SLO.On() || c.MaxBatch != 1 || c.Steal || !strings.Contains(n, "PI05_SLO_MS=100 has no effect with PI05_LAYOUT=sp") ||
				!strings.Contains(n, "PI05_MAX_BATCH=4 has no effect with PI05_LAYOUT=sp") {
				t.Errorf("sp with multi-robot's settings: slo %v, batch %d, steal %v, notices %q", c.SLO.On(), c.MaxBatch, c.Steal, c.Notices)
			}
		}},
		{"no slo", map[string]string{"PI05_SLO_CLOCK_GUARD": "2"}, func(t *testing.T, c Config) {
			if c.SLO.On() || !strings.Contains(strings.Join(c.Notices, "\n"), "PI05_SLO_CLOCK_GUARD has no effect without PI05_SLO_MS") {
				t.Errorf("notices %q", c.Notices)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// Every bad value is refused with the variable's name.
func TestFromEnvRefuses(t *testing.T) {
	for env, want := range map[string]string{
		"TT_MESH_SHAPE=4":                          "TT_MESH_SHAPE",
		"TT_MESH_SHAPE=1000x1000":                  `TT_MESH_SHAPE="1000x1000": want ROWSxCOLS of 1 to 64 devices`,
		"TT_MESH_SHAPE=8x9":                        "TT_MESH_SHAPE",
		"TT_MESH_SHAPE=99999999999999999999x1":     "TT_MESH_SHAPE", // Atoi fails: out of range
		"TT_MESH_SHAPE=4294967296x4294967296":      "TT_MESH_SHAPE", // the product wraps to 0
		"TT_MESH_SHAPE=1000x1 TT_CPU_DEVICES=2":    "TT_MESH_SHAPE",
		"PI05_SLO_MS=100 PI05_MR_GUARD=0:NaN":      "PI05_MR_GUARD",
		"TT_CPU_DEVICES=0":                         "TT_CPU_DEVICES",
		"PI05_LAYOUT=tp":                           "PI05_LAYOUT",
		"PI05_LAYOUT=pd":                           "PI05_LAYOUT=pd needs at least 2 devices",
		"PI05_SLO_MS=-1":                           "PI05_SLO_MS",
		"PI05_SLO_MS=100 PI05_SLO_P99_MS=50":       "PI05_SLO_P99_MS",
		"PI05_SLO_MS=100 PI05_SLO_CLOCK_GUARD=0.5": "PI05_SLO_CLOCK_GUARD",
		"PI05_SLO_MS=100 PI05_MR_GUARD=hot":        "PI05_MR_GUARD=hot",
		"PI05_SLO_MS=100 PI05_MR_GUARD=9:2":        "PI05_MR_GUARD",
		"PI05_MAX_BATCH=9":                         "PI05_MAX_BATCH",
		"PI05_JOIN=lateness":                       "PI05_JOIN=lateness needs PI05_SLO_MS",
		"PI05_STEAL=1":                             "PI05_STEAL=1 needs PI05_SLO_MS",
		"PI05_STEAL=yes":                           "PI05_STEAL",
		"PI05_ROUTING=random":                      "PI05_ROUTING",
		"PI05_EXPERT_PACK=2":                       "PI05_EXPERT_PACK",
		"PI05_HANG_S=1":                            "PI05_HANG_S=1 must exceed",
		"PI05_HANG_ACTION=reboot":                  "PI05_HANG_ACTION",
		"PI05_HANG_EXIT_CODE=300":                  "PI05_HANG_EXIT_CODE",
		"PI05_HTTP_THREADS=0":                      "PI05_HTTP_THREADS",
		"PI05_MC_LOOP=v3":                          "PI05_MC_LOOP",
		"PI05_MEGAKERNEL=tt":                       "PI05_MEGAKERNEL",
		"PI05_PE_DEFINES=PE_NO_XRES":               "PI05_PE_DEFINES",
		"PI05_BATCH_WINDOW_MS=x":                   "PI05_BATCH_WINDOW_MS",
		"PI05_ROBOT_IDLE_S=0":                      "PI05_ROBOT_IDLE_S",
	} {
		m := map[string]string{}
		for _, kv := range strings.Fields(env) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		if _, err := FromEnv(envOf(m)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", env, err, want)
		}
	}
}

// Variables lists exactly what FromEnv reads (the server refuses PI05_* names nobody reads).
func TestVariablesAreWhatFromEnvReads(t *testing.T) {
	read := map[string]bool{}
	for _, env := range []map[string]string{{}, {"PI05_SLO_MS": "100", "PI05_LAYOUT": "dp"}, {"PI05_LAYOUT": "pd", "TT_CPU_DEVICES": "2"}} {
		_, _ = FromEnv(Env{Getenv: func(k string) string { read[k] = true; return env[k] }, CPUs: []int{0, 1}, ActionRows: 64})
	}
	for _, v := range Variables {
		if !read[v] {
			t.Errorf("%s is listed but never read", v)
		}
		delete(read, v)
	}
	for v := range read {
		t.Errorf("%s is read but not listed in Variables", v)
	}
}
