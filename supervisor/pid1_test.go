package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// As PID 1 of a new PID namespace the supervisor inherits every orphan. It
// must reap them all in its one wait loop, forward every signal, and still
// report the server's own exit code.

var pid1Wrapper = []string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}

func needPIDNamespace(t *testing.T) {
	t.Helper()
	testenv.Require(t, "pidns")
}

func TestPID1ReapsOrphansForwardsSignalsAndReportsServerCode(t *testing.T) {
	needPIDNamespace(t)
	h := newHarness(t)
	h.server("-orphans", "4", "-orphan-life", "500ms", "-term-exit", "7")
	s := h.startCmd(pid1Wrapper)
	eventually(t, s, "the server to leave its orphans", func() bool { return h.count("orphans") == 1 })

	sup := supervisorHostPID(t, s.cmd.Process.Pid)
	// The orphans were reparented to the supervisor, then reaped: in the
	// end its only child is the server, and no child is a zombie.
	eventually(t, s, "orphans reparented to PID 1", func() bool { return len(childrenOf(sup)) > 1 })
	eventually(t, s, "orphans reaped", func() bool {
		kids := childrenOf(sup)
		return len(kids) == 1 && !strings.HasPrefix(kids[0], "Z")
	})

	for _, sig := range []syscall.Signal{syscall.SIGUSR2, syscall.SIGQUIT} {
		syscall.Kill(sup, sig)
		name := "signal " + signalName(sig)
		eventually(t, s, name+" forwarded", func() bool { return h.count(name) == 1 })
	}
	syscall.Kill(sup, syscall.SIGTERM)
	if code := s.wait(t); code != 7 {
		t.Errorf("exit code %d, want the server's 7", code)
	}
}

// A server that exits on its own while a crowd of its orphans exits too:
// the status that the reaper hands on is the server's, every time.
func TestPID1ServerStatusNotStolenByOrphans(t *testing.T) {
	needPIDNamespace(t)
	for i := range 3 {
		h := newHarness(t)
		h.server("-plan", "exit:3", "-exit-after", "100ms", "-orphans", "20", "-orphan-life", "90ms")
		h.cfg.ReadyLine = "ready now"
		h.cfg.Argv = append(h.cfg.Argv, "-ready-line", "ready now")
		h.cfg.MaxRestarts = 0
		if code := h.startCmd(pid1Wrapper).wait(t); code != 3 {
			t.Errorf("run %d: exit code %d, want the server's 3", i, code)
		}
	}
}

// supervisorHostPID is the PID (in our namespace) of unshare's child.
func supervisorHostPID(t *testing.T, unshare int) int {
	t.Helper()
	var pid int
	eventually(t, nil, "unshare's child", func() bool {
		for _, st := range procStats() {
			if st.ppid == unshare {
				pid = st.pid
				return true
			}
		}
		return false
	})
	return pid
}

// childrenOf lists "STATE PID" of parent's children.
func childrenOf(parent int) []string {
	var out []string
	for _, st := range procStats() {
		if st.ppid == parent {
			out = append(out, st.state+" "+strconv.Itoa(st.pid))
		}
	}
	return out
}

type procStat struct {
	pid, ppid int
	state     string
}

func procStats() []procStat {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []procStat
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procStat{pid: pid, ppid: ppid, state: f[0]})
	}
	return out
}
