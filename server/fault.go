package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Fault is the test-only fault switch TT_MODEL_FAULT: nothing hangs on a CPU by itself, so tests
// and demos make the supervisor's and the watchdog's paths happen on real processes.
//
//	exit:after=N           any model: after answering N predictions the server exits 75, as a
//	                       hung device would make it (the supervisor's reset-and-restart path)
//	hang:device=D,after=N  pi0.5: device D's N-th serving call blocks; the hang watchdog takes it
//	                       from there (quarantine, 503s, /health, exit with PI05_HANG_EXIT_CODE)
//	delay:ms=M[,device=D]  pi0.5: every serving call of device D (default: every device) takes M ms
//	                       longer, so tests can watch calls overlap and queues form
type Fault struct {
	Kind   string // "" (off), exit, hang, delay
	After  int
	Device int // -1: every device (delay)
	Delay  time.Duration
}

// ParseFault reads TT_MODEL_FAULT ("" is off).
func ParseFault(s string) (Fault, error) {
	if s == "" {
		return Fault{Device: -1}, nil
	}
	bad := func(format string, args ...any) (Fault, error) {
		return Fault{}, fmt.Errorf("TT_MODEL_FAULT=%q: "+format+" (want exit:after=N, hang:device=D,after=N or delay:ms=M[,device=D])", append([]any{s}, args...)...)
	}
	kind, params, _ := strings.Cut(s, ":")
	f := Fault{Kind: kind, Device: -1}
	seen := map[string]int{}
	for _, p := range strings.Split(params, ",") {
		if p == "" {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return bad("%q is not key=number", p)
		}
		seen[k] = n
	}
	allowed := map[string][]string{"exit": {"after"}, "hang": {"device", "after"}, "delay": {"ms", "device"}}[kind]
	if allowed == nil {
		return bad("unknown kind %q", kind)
	}
	for k := range seen {
		if !strings.Contains(strings.Join(allowed, " "), k) {
			return bad("%s takes %s, not %s", kind, strings.Join(allowed, " and "), k)
		}
	}
	switch kind {
	case "exit", "hang":
		if seen["after"] < 1 {
			return bad("after=N (N >= 1) is required")
		}
		f.After = seen["after"]
		if kind == "hang" {
			f.Device = seen["device"]
		}
	case "delay":
		if seen["ms"] < 1 {
			return bad("ms=M (M >= 1) is required")
		}
		f.Delay = time.Duration(seen["ms"]) * time.Millisecond
		if d, ok := seen["device"]; ok {
			f.Device = d
		}
	}
	return f, nil
}

// String is the switch as it was set, for the warning at start.
func (f Fault) String() string {
	switch f.Kind {
	case "exit":
		return fmt.Sprintf("exit:after=%d (the server exits %d after %d predictions)", f.After, ExitFault, f.After)
	case "hang":
		return fmt.Sprintf("hang:device=%d,after=%d (device %d's call %d blocks)", f.Device, f.After, f.Device, f.After)
	case "delay":
		return fmt.Sprintf("delay:ms=%d,device=%d (serving calls take %s longer; -1 = every device)", f.Delay.Milliseconds(), f.Device, f.Delay)
	}
	return "off"
}
