package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// reaper is the one place this process waits for children. It reaps every
// child with wait4(-1, WNOHANG) on each SIGCHLD, hands the status of a
// process it started to that process's channel and drops the rest (orphans
// that a PID 1 inherits). Because nothing else waits, an orphan's reaping can
// never steal the server's status, which a second loop next to
// exec.Cmd.Wait would. A process that Run supervises must not wait for
// children any other way.
type reaper struct {
	log  *slog.Logger
	sigs chan os.Signal
	done chan struct{}

	mu      sync.Mutex // held across fork and registration, so no exit is missed
	waiters map[int]chan exitStatus

	forks chan forkRequest // served by forkLoop on its own OS thread
}

func newReaper(log *slog.Logger) *reaper {
	r := &reaper{
		log:     log,
		sigs:    make(chan os.Signal, 1),
		done:    make(chan struct{}),
		waiters: map[int]chan exitStatus{},
		forks:   make(chan forkRequest),
	}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	go r.forkLoop()
	return r
}

func (r *reaper) loop() {
	r.reapAll() // children that ended before Notify took effect
	for {
		select {
		case <-r.sigs:
			r.reapAll()
		case <-r.done:
			return
		}
	}
}

// reapAll collects every child that has ended; SIGCHLD coalesces, so one
// signal can stand for many exits.
func (r *reaper) reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ch == nil {
			r.log.Debug("reaped orphan", "pid", pid, "status", exitStatus{ws}.String())
			continue
		}
		ch <- exitStatus{ws}
	}
}

func (r *reaper) stop() {
	signal.Stop(r.sigs)
	close(r.done)
}

// forkRequest is one ForkExec for forkLoop.
type forkRequest struct {
	path string
	argv []string
	attr *syscall.ProcAttr
	done chan forkResult
}

type forkResult struct {
	pid int
	err error
}

// forkLoop runs every fork of this supervisor on one OS thread that lives
// as long as the reaper. Children get PR_SET_PDEATHSIG=SIGKILL, which the
// kernel sends when the THREAD that forked them exits, not the process: Go
// may end an idle thread, so the forking thread is locked and kept.
func (r *reaper) forkLoop() {
	runtime.LockOSThread() // never unlocked: the thread ends with the reaper
	for {
		select {
		case req := <-r.forks:
			pid, err := syscall.ForkExec(req.path, req.argv, req.attr)
			req.done <- forkResult{pid, err}
		case <-r.done:
			return
		}
	}
}

// child is a process started by the reaper in a process group of its own.
type child struct {
	pid  int
	exit <-chan exitStatus // receives exactly once
}

// signalGroup sends sig to the child's whole process group.
func (c *child) signalGroup(sig syscall.Signal) error {
	err := syscall.Kill(-c.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// start runs argv in a new process group (its pgid is its pid) with env,
// the given stdin, stdout and stderr, and extra as fds 3, 4, …. The child is
// SIGKILLed by the kernel if this supervisor dies (Pdeathsig): a server must
// never outlive the process that answers for it (it would hold the chips
// and the port unsupervised).
func (r *reaper) start(argv, env []string, files [3]*os.File, extra ...*os.File) (*child, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	fds := make([]uintptr, 0, len(files)+len(extra))
	for _, f := range append(files[:], extra...) {
		fds = append(fds, f.Fd())
	}
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: fds,
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	done := make(chan forkResult, 1)
	select {
	case r.forks <- forkRequest{path: path, argv: argv, attr: attr, done: done}:
	case <-r.done:
		return nil, fmt.Errorf("start %s: the supervisor is stopping", path)
	}
	res := <-done
	pid, err := res.pid, res.err
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	ch := make(chan exitStatus, 1)
	r.waiters[pid] = ch
	return &child{pid: pid, exit: ch}, nil
}

// childEnv is the supervisor's environment without what systemd meant for
// the supervisor alone (notify socket, watchdog, socket activation), with
// extra added on top.
func childEnv(base []string, extra map[string]string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if k == "NOTIFY_SOCKET" || strings.HasPrefix(k, "WATCHDOG_") || strings.HasPrefix(k, "LISTEN_") {
			continue
		}
		if _, over := extra[k]; over {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range sortedKeys(extra) {
		env = append(env, k+"="+extra[k])
	}
	return env
}
