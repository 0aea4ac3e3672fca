// Package procfs reads what the runner and the supervisor need to know about
// processes from /proc: whether a recorded process is still the same one
// (pid plus start time, so a reused pid is never mistaken for it), its
// process group, and which processes listen on a TCP port.
package procfs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is a pid with the start time /proc/<pid>/stat gives it (field 22,
// clock ticks since boot): together they name one process for its life.
type Process struct {
	PID       int    `json:"pid"`
	StartTick string `json:"start_tick,omitempty"`
}

// stat is the part of /proc/<pid>/stat after the command name (which may
// hold blanks and parentheses): fields[0] is the state (field 3).
func stat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return nil
	}
	return f
}

// Self returns pid with its start tick (StartTick "" when pid is gone).
func Self(pid int) Process {
	p := Process{PID: pid}
	if f := stat(pid); f != nil {
		p.StartTick = f[19]
	}
	return p
}

// Alive reports whether the process runs (a zombie does not count) and is
// the one recorded: same start tick, when one was recorded.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	f := stat(p.PID)
	if f == nil || f[0] == "Z" || f[0] == "X" {
		return false
	}
	return p.StartTick == "" || f[19] == p.StartTick
}

// Group is the process's process group id, or 0 when it is gone.
func (p Process) Group() int {
	f := stat(p.PID)
	if f == nil {
		return 0
	}
	g, _ := strconv.Atoi(f[2])
	return g
}

// GroupMembers lists the live processes of process group pgid.
func GroupMembers(pgid int) []int {
	var out []int
	for _, pid := range allPIDs() {
		f := stat(pid)
		if f != nil && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

func allPIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Listeners returns the pids of the processes holding a listening TCP
// socket on port (IPv4 or IPv6, any address) in this network namespace.
// hidden is true when something listens there whose process this user
// cannot see (another user's, or another PID namespace's). err is set when
// /proc/net/tcp cannot be read at all: nothing can be told.
func Listeners(port int) (pids []int, hidden bool, err error) {
	inodes, err := listeningInodes(port)
	if err != nil || len(inodes) == 0 {
		return nil, false, err
	}
	for _, pid := range allPIDs() {
		if ownsSocket(pid, inodes) {
			pids = append(pids, pid)
		}
	}
	return pids, len(pids) == 0, nil
}

// listeningInodes reads /proc/net/tcp and tcp6 for sockets in state LISTEN
// (0A) on port.
func listeningInodes(port int) (map[string]bool, error) {
	out := map[string]bool{}
	want := fmt.Sprintf(":%04X", port)
	read := 0
	var firstErr error
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		read++
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				out[fields[9]] = true
			}
		}
		f.Close()
	}
	if read == 0 {
		return nil, fmt.Errorf("list listening sockets: %w", firstErr)
	}
	return out, nil
}

func ownsSocket(pid int, inodes map[string]bool) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			return true
		}
	}
	return false
}
