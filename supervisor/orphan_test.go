package supervisor

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/procfs"
)

// readState reads the supervisor's --state-file (zero Status while absent).
func (h *harness) readState() Status {
	st, _ := ReadStateFile(h.cfg.StateFile)
	return st
}

// `kill -9` of the supervisor must not leave its server running
// unsupervised. The server dies with it (Pdeathsig), and the chips
// are free again for the next supervisor, which starts its own server.
func TestKilledSupervisorTakesItsServer(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	h.server()
	h.cfg.StateFile = filepath.Join(h.dir, "state.json")
	first := h.start()
	eventually(t, first, "the first server to be ready", func() bool { return h.readState().State == StateReady })
	st := h.readState()
	srv := procfs.Process{PID: st.ServerPID, StartTick: st.ServerStartTick}
	if !srv.Alive() || st.Supervisor.PID != first.cmd.Process.Pid {
		t.Fatalf("state file %+v: want the live server and this supervisor", st)
	}
	first.signal(t, syscall.SIGKILL)
	first.wait(t)
	eventually(t, nil, "the server to die with its supervisor", func() bool { return !srv.Alive() })

	second := h.start()
	eventually(t, second, "the second supervisor's own server to be ready", func() bool {
		st := h.readState()
		return st.State == StateReady && st.Supervisor.PID == second.cmd.Process.Pid
	})
	if h.count("start") != 2 {
		t.Errorf("%d servers started, want 2: %v", h.count("start"), h.kinds())
	}
	second.signal(t, syscall.SIGTERM)
	if code := second.wait(t); code != 0 {
		t.Errorf("second supervisor exit %d", code)
	}
	if code := h.readState().ExitCode; code == nil || *code != 0 {
		t.Errorf("state file exit code %v, want 0", code)
	}
}

// A chip lock is not released while any process the killed supervisor
// started still runs: the server's own child (an orphan here) keeps it, and
// a new supervisor refuses the chips until that process is gone.
func TestChipLockOutlivesKilledSupervisor(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	h.server("-orphans", "1", "-orphan-life", "8s")
	h.cfg.StateFile = filepath.Join(h.dir, "state.json")
	first := h.start()
	eventually(t, first, "the orphan to be started", func() bool { return h.count("orphans") == 1 })
	first.signal(t, syscall.SIGKILL)
	first.wait(t)

	second := h.start()
	if code := second.wait(t); code != 1 || !strings.Contains(second.stderr.String(), "chip 0 is in use") {
		t.Fatalf("a supervisor started while the old one's orphan holds the chips: exit %d\n%s", code, second.stderr.String())
	}
	third := h.start()
	eventually(t, nil, "the chips to be free once the orphan ended", func() bool {
		select {
		case <-third.done: // refused again: the orphan still ran; try once more
			third = h.start()
			return false
		default:
		}
		return h.readState().State == StateReady && h.readState().Supervisor.PID == third.cmd.Process.Pid
	})
	third.signal(t, syscall.SIGTERM)
	third.wait(t)
}

// A supervisor never calls ready a health answer from another process: with
// a foreign server answering {"status":"ok"} on its port it starts nothing
// (its server could not bind) and backs off; once the port is free it
// starts its own server and becomes ready through it.
func TestForeignHealthAnswerIsNotReady(t *testing.T) {
	h := newHarness(t)
	h.tickHeartbeats()
	h.server()
	h.cfg.StateFile = filepath.Join(h.dir, "state.json")
	h.cfg.BackoffMin, h.cfg.BackoffMax = 50*time.Millisecond, 100*time.Millisecond
	h.cfg.MaxRestarts = 1000
	foreign, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(h.port))
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(foreign, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	}))
	s := h.start()
	eventually(t, s, "the supervisor to back off on the held port", func() bool {
		st := h.readState()
		return st.State == StateBackoff && strings.Contains(st.Detail, "port "+strconv.Itoa(h.port)+" is already held")
	})
	time.Sleep(300 * time.Millisecond) // several probe intervals: it must stay not ready
	if st := h.readState(); st.State == StateReady || h.count("start") != 0 {
		t.Fatalf("ready through a foreign answer: %+v, starts %d", st, h.count("start"))
	}
	foreign.Close()
	eventually(t, s, "its own server to be ready", func() bool { return h.readState().State == StateReady })
	if h.count("start") != 1 {
		t.Errorf("%d starts, want 1", h.count("start"))
	}
	s.signal(t, syscall.SIGTERM)
	s.wait(t)
}
