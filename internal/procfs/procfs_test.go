package procfs

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

func TestProcessIdentity(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := Self(cmd.Process.Pid)
	if p.StartTick == "" || !p.Alive() {
		t.Fatalf("a running child: %+v alive=%v", p, p.Alive())
	}
	if g := p.Group(); g != p.PID || !slices.Contains(GroupMembers(g), p.PID) {
		t.Errorf("group %d, members %v; want its own group", g, GroupMembers(g))
	}
	if (Process{PID: p.PID, StartTick: "1"}).Alive() {
		t.Error("a pid with another start tick (a reused pid) counts as the recorded process")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if p.Alive() {
		t.Error("a reaped child is alive")
	}
}

func TestListeners(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	pids, hidden, err := Listeners(port)
	if err != nil || hidden || !slices.Contains(pids, os.Getpid()) {
		t.Errorf("Listeners(%d) = %v, %v, %v; want this process", port, pids, hidden, err)
	}
	l.Close()
	if pids, hidden, err := Listeners(port); len(pids) != 0 || hidden || err != nil {
		t.Errorf("after close: %v, %v, %v", pids, hidden, err)
	}
}
