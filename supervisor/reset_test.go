package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Failed reset attempts back off (doubling from
// ResetBackoff) instead of running back to back, and a host without chips
// gives up with "the chips cannot be recovered" (no "chips  cannot" with an
// empty list).
func TestResetAttemptsBackOff(t *testing.T) {
	h := newHarness(t)
	h.server()
	h.cfg.Chips = nil
	h.cfg.DevDir = filepath.Join(h.dir, "no-chips")
	h.cfg.ResetCmd = fakeReset(t) + " " + h.record + " fail {chips}"
	h.cfg.ResetBackoff = 150 * time.Millisecond
	mustWrite(t, h.cfg.HangMarker, "hung\n")
	n := h.listenNotify(false)
	began := time.Now()
	if code := h.start().wait(t); code != HangExitCode {
		t.Errorf("exit code %d, want 75", code)
	}
	// Two pauses, 150 ms then 300 ms: a lower bound, not a timing claim.
	if took := time.Since(began); took < 450*time.Millisecond {
		t.Errorf("three failed resets took %s; the pauses between them (150 ms, 300 ms) were skipped", took)
	}
	h.wantEvents(t, "reset", "reset", "reset")
	msgs := n.messages()
	if last := msgs[len(msgs)-1]; last != "STATUS=failed: the chips cannot be recovered" {
		t.Errorf("last datagram %q", last)
	}
	if _, err := os.Stat(h.cfg.HangMarker); err != nil {
		t.Errorf("hang marker: %v; want it kept", err)
	}
}

// --chips is checked against the host's device nodes before any lock file
// is made, and chip ids are bounded (a typo like 0-100000 made ~20 000 lock
// files before failing).
func TestChipsCheckedBeforeAnyLock(t *testing.T) {
	h := newHarness(t) // chips 0 and 1
	h.server()
	h.cfg.Chips = []int{0, 1, 7}
	s := h.start()
	if code := s.wait(t); code != 1 || !strings.Contains(s.stderr.String(), "chip 7 is not on this host") {
		t.Errorf("exit %d:\n%s", code, s.stderr.String())
	}
	if entries, _ := os.ReadDir(h.cfg.LockDir); len(entries) != 0 {
		t.Errorf("lock files made before the list was refused: %d", len(entries))
	}
	c := Defaults(8000)
	c.Argv, c.Chips = []string{"x"}, []int{0, 100000}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "above 255") {
		t.Errorf("Validate with chip 100000: %v", err)
	}
	c.Chips, c.ReadyURL = nil, "http://127.0.0.1:99999/health"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "port 99999 is not 1-65535") {
		t.Errorf("Validate with --ready-url port 99999: %v", err)
	}
}
