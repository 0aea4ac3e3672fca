package supervisor

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	"github.com/ttmodel/tt-model/internal/procfs"
)

// A supervisor must only ever call its OWN server ready. After a crash or a
// kill of an earlier supervisor, another process (an orphaned server, say)
// may still hold the port and answer the ready URL. So, when the ready URL
// is on this host: no server is started while anything else listens on the
// port (it could not bind it anyway), and a health answer only counts when
// the listener on the port belongs to the server's process group.

// localReadyPort is the ready URL's port when its host is this machine
// (loopback or localhost), else 0: a remote URL cannot be checked.
func localReadyPort(raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		switch u.Scheme {
		case "http":
			port = 80
		case "https":
			port = 443
		}
	}
	return port
}

// portHolder describes what already listens on the ready URL's port before
// a start ("" when nothing does, or nothing can be told).
func (s *Supervisor) portHolder() string {
	if s.cfg.ReadyLine != "" {
		return ""
	}
	port := localReadyPort(s.cfg.ReadyURL)
	if port == 0 {
		return ""
	}
	pids, hidden, err := procfs.Listeners(port)
	switch {
	case err != nil:
		s.log.Warn("cannot tell whether the ready port is free", "port", port, "err", err)
		return ""
	case len(pids) > 0:
		return fmt.Sprintf("port %d is already held by pid %v, not a server of this supervisor", port, pids)
	case hidden:
		return fmt.Sprintf("port %d is already held by a process this user cannot see", port)
	}
	return ""
}

// ownsReadyPort reports whether the listener on the ready URL's port belongs
// to srv's process group (true when that cannot be checked: a remote URL,
// no /proc).
func (s *Supervisor) ownsReadyPort(srv *server) bool {
	port := localReadyPort(s.cfg.ReadyURL)
	if port == 0 {
		return true
	}
	pids, _, err := procfs.Listeners(port)
	if err != nil {
		return true
	}
	if slices.ContainsFunc(pids, func(pid int) bool { return procfs.Self(pid).Group() == srv.pid }) {
		return true
	}
	s.log.Warn("the ready URL answers, but not from this supervisor's server: not ready", "port", port, "listeners", pids, "server_pid", srv.pid)
	return false
}
