package supervisor

import (
	"os"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopSignals end the supervisor: SIGTERM to the server's group, SIGKILL
// after the grace, exit with the server's code.
func isStopSignal(s os.Signal) bool { return s == syscall.SIGTERM || s == syscall.SIGINT }

// forwardedSignals are passed on to the server's process group. As PID 1 the
// kernel drops any signal without a handler, so there it is every signal a
// process can catch except SIGCHLD (the reaper's) and the synchronous faults
// (tini's set); elsewhere only the ones a server may use for its own
// purposes, so that ^Z and ^\ keep their meaning for the supervisor.
func forwardedSignals(pid1 bool) []os.Signal {
	if !pid1 {
		return []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}
	}
	skip := map[syscall.Signal]bool{
		syscall.SIGCHLD: true, syscall.SIGKILL: true, syscall.SIGSTOP: true,
		syscall.SIGTERM: true, syscall.SIGINT: true, syscall.SIGHUP: true,
		syscall.SIGFPE: true, syscall.SIGILL: true, syscall.SIGSEGV: true, syscall.SIGBUS: true,
		syscall.SIGABRT: true, syscall.SIGTRAP: true, syscall.SIGSYS: true,
		syscall.SIGPIPE: true, syscall.SIGURG: true, // the Go runtime's own (writes, preemption)
	}
	var sigs []os.Signal
	for s := syscall.Signal(1); s < 32; s++ {
		if !skip[s] {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// signalName is "SIGTERM" for syscall.SIGTERM.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
