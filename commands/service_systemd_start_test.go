package commands

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/systemdtest"
)

// testLiveStartTimeout runs alone, after the other units: every install or
// uninstall makes systemd reload, and a reload during a start drops the
// extensions systemd granted (shown last). Both units get a drop-in with
// TimeoutStartSec=5s, as an administrator would write one, so that only
// the supervisor's EXTEND_TIMEOUT_USEC (twice its 30 s extend interval,
// repeated every 30 s) keeps their starts alive.
//
//   - A 65 s start succeeds: the first extension covers 60 s, its repeat the
//     rest.
//   - A supervisor frozen (SIGSTOP) mid-start stops extending: systemd fails
//     the start when the last extension runs out ("start operation timed
//     out", result timeout), sends SIGTERM and SIGCONT, and Restart=on-failure
//     schedules a new start.
//   - A `systemctl daemon-reload` past TimeoutStartSec into a start ends it at
//     once: systemd (252 here; upstream issue systemd/systemd#43000, open
//     through 261) rebuilds the deadline from TimeoutStartSec and forgets the
//     extension. This is why the unit's TimeoutStartSec covers a whole first
//     start, reset included, on its own.
func testLiveStartTimeout(t *testing.T, h *systemdtest.Host) {
	slow := liveUnit{h: h, name: "tt-model-slow-start"}
	frozen := liveUnit{h: h, name: "tt-model-frozen-start"}
	installTestServer(t, slow, 8101, nil, "--ready-after", "65s")
	installTestServer(t, frozen, 8102, nil, "--plan", "hang")
	for _, u := range []liveUnit{slow, frozen} {
		dir := "/etc/systemd/system/" + u.name + ".service.d"
		h.Must(t, "mkdir", "-p", dir)
		h.Must(t, "sh", "-c", "printf '[Service]\\nTimeoutStartSec=5s\\n' > "+dir+"/short-start.conf")
	}
	slow.systemctl(t, 0, "daemon-reload")
	for _, u := range []liveUnit{slow, frozen} {
		if st := u.show(t, "TimeoutStartUSec"); st["TimeoutStartUSec"] != "5s" {
			t.Fatalf("%s: the drop-in did not take: %v", u.name, st)
		}
		u.systemctl(t, 0, "start", "--no-block", u.name)
	}

	st := frozen.waitShow(t, "the supervisor starting the server", time.Minute, func(m map[string]string) bool {
		return strings.HasPrefix(m["StatusText"], "starting:")
	}, "StatusText", "MainPID")
	freeze(t, h, st["MainPID"])
	j := frozen.waitJournal(t, "Failed with result 'timeout'", 1, 2*time.Minute)
	for _, want := range []string{"start operation timed out. Terminating.", "received SIGTERM"} {
		if !strings.Contains(j, want) {
			t.Errorf("%s: the journal lacks %q:\n%s", frozen.name, want, j)
		}
	}
	frozen.waitJournal(t, "Scheduled restart job, restart counter is at 1", 1, 30*time.Second)
	frozen.systemctl(t, 0, "stop", frozen.name)

	st = slow.waitShow(t, "the 65 s start", 2*time.Minute, func(m map[string]string) bool {
		return m["ActiveState"] != "activating"
	}, "ActiveState", "Result", "StatusText", "ExecMainStartTimestampMonotonic", "ActiveEnterTimestampMonotonic")
	if st["ActiveState"] != "active" || st["Result"] != "success" || st["StatusText"] != "ready: server ready (start 1)" {
		t.Fatalf("%s after a 65 s start: %v\n%s", slow.name, st, slow.journal(t))
	}
	if took := monotonicGap(t, st["ExecMainStartTimestampMonotonic"], st["ActiveEnterTimestampMonotonic"]); took < 60*time.Second {
		t.Errorf("the start took %s by systemd's clock; the test needs one past the first 60 s extension", took)
	}
	if j := slow.journal(t); strings.Contains(j, "timed out") {
		t.Errorf("%s: the journal reports a timeout:\n%s", slow.name, j)
	}
	slow.systemctl(t, 0, "stop", slow.name)

	// The reload: 7 s into an extended start (TimeoutStartSec is 5 s).
	slow.systemctl(t, 0, "start", "--no-block", slow.name)
	slow.waitShow(t, "the second start", time.Minute, func(m map[string]string) bool {
		return strings.HasPrefix(m["StatusText"], "starting:")
	}, "StatusText")
	time.Sleep(7 * time.Second)
	slow.systemctl(t, 0, "daemon-reload")
	slow.waitJournal(t, "Failed with result 'timeout'", 1, 20*time.Second)
	slow.systemctl(t, 0, "stop", slow.name)
}

// monotonicGap is b-a for two systemd monotonic timestamps in µs.
func monotonicGap(t *testing.T, a, b string) time.Duration {
	t.Helper()
	var x, y int64
	if _, err := fmt.Sscan(a, &x); err != nil {
		t.Fatalf("timestamp %q: %v", a, err)
	}
	if _, err := fmt.Sscan(b, &y); err != nil {
		t.Fatalf("timestamp %q: %v", b, err)
	}
	return time.Duration(y-x) * time.Microsecond
}
