package kubetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// procGroup is the binaries one part of a cluster started, each in its own
// process group with its output in dir/NAME.log.
type procGroup struct {
	dir   string
	procs []*proc // started order; stopped in reverse
}

// proc is one started binary; done closes once it has been waited for.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// spawn starts bin as name. The child dies with this process (Pdeathsig)
// should the test binary be killed before Stop.
func (g *procGroup) spawn(bin, name string, args ...string) error {
	log, err := os.OpenFile(filepath.Join(g.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	log.Close() // the child holds its own descriptor
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	g.procs = append(g.procs, p)
	return nil
}

// find is the running process started as name, or nil.
func (g *procGroup) find(name string) *proc {
	for _, p := range g.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// remove forgets p (after stopProc).
func (g *procGroup) remove(p *proc) {
	g.procs = slices.DeleteFunc(g.procs, func(q *proc) bool { return q == p })
}

// exited is an error naming the first process that has exited, or nil.
func (g *procGroup) exited() error {
	for _, p := range g.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v)", p.name, p.err)
		default:
		}
	}
	return nil
}

// stopProc sends SIGTERM to p's process group, SIGKILL after 10 s.
func (g *procGroup) stopProc(p *proc) {
	pgid := -p.cmd.Process.Pid
	syscall.Kill(pgid, syscall.SIGTERM) //nolint:errcheck // already gone is fine
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(pgid, syscall.SIGKILL) //nolint:errcheck // already gone is fine
		<-p.done
	}
}

// stop stops every process, the last started first.
func (g *procGroup) stop() {
	for i := len(g.procs) - 1; i >= 0; i-- {
		g.stopProc(g.procs[i])
	}
	g.procs = nil
}

// logTail is the end of name's log.
func (g *procGroup) logTail(name string) string {
	data, _ := os.ReadFile(filepath.Join(g.dir, name+".log"))
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// logTails is the end of each named log, for an error message.
func (g *procGroup) logTails(names ...string) string {
	if len(names) == 0 {
		for _, p := range g.procs {
			names = append(names, p.name)
		}
	}
	var b bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&b, "--- %s.log (end)\n%s\n", name, g.logTail(name))
	}
	return b.String()
}
