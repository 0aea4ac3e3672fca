package runner

import (
	"strings"
	"testing"
)

func TestStartWatcherReadyLine(t *testing.T) {
	var out strings.Builder
	w := newStartWatcher(&out, "startup complete")
	for _, chunk := range []string{"booting\nApplication start", "up comp", "lete\nmore\n"} {
		w.Write([]byte(chunk))
	}
	select {
	case <-w.ready.Seen():
	default:
		t.Error("the ready line split over three writes was not seen")
	}
	if out.String() != "booting\nApplication startup complete\nmore\n" {
		t.Errorf("output passed through = %q", out.String())
	}
}

// A supervisor backing off after the server's exit is a crash loop; the
// report holds the server's own lines of its last life (not the
// supervisor's), its error unquoted, and the commands to see the rest and
// to stop it.
func TestStartWatcherCrashLoop(t *testing.T) {
	w := newStartWatcher(&strings.Builder{}, "")
	log := `time=t level=INFO msg="state starting" from=none detail="server started (start 1)"
time=t level=INFO msg="no Tenstorrent chips on this host"
time=t level=INFO msg="starting the server" start=1
time=t level=INFO msg="loading pi05"
time=t level=INFO msg="server spawned" pid=10 argv="[tt-model-server]"
time=t level=ERROR msg="server stopped" err="no pi0.5 weights found; looked at:\n  1. PI05_WEIGHTS_DIR: unset"
time=t level=INFO msg="server exited" pid=10 status="exit 1"
time=t level=INFO msg="state backoff" from=starting detail="restarting in 100ms after server exit 1"
`
	w.Write([]byte(log))
	var why string
	select {
	case why = <-w.crash:
	default:
		t.Fatal("the backoff was not seen")
	}
	inst := &Instance{Name: "tt-model-p-x", Package: "p", Profile: "x", Runner: "docker"}
	msg := w.crashError(inst, why).Error()
	for _, want := range []string{
		"tt-model-p-x crashed while starting: the supervisor restarts it (restarting in 100ms after server exit 1)",
		"  | time=t level=INFO msg=\"loading pi05\"\n  | server stopped: no pi0.5 weights found; looked at:\n  |   1. PI05_WEIGHTS_DIR: unset\n",
		"tt-model logs p --profile x --runner docker",
		"tt-model stop p --profile x --runner docker",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("report lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "server spawned") || strings.Contains(msg, "state starting") || strings.Contains(msg, "Tenstorrent") {
		t.Errorf("report shows the supervisor's own lines:\n%s", msg)
	}
}
