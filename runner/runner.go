package runner

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/internal/procfs"
)

// Labels every instance carries (the first three are upstream's).
const (
	LabelName    = "org.tenstorrent.tt-model"
	LabelProfile = LabelName + ".profile"
	LabelDevices = LabelName + ".devices"
	LabelPort    = LabelName + ".port"
)

// StopGrace is how long a server gets between SIGTERM and SIGKILL: closing a
// mesh cleanly takes long, and a SIGKILLed server leaves the chips needing a
// reset (upstream uses the same 120 s).
const StopGrace = 120 * time.Second

// Runner starts and manages package servers in one place: a Docker engine
// or the bare host. serve, stop, ps and logs are the same code over either.
type Runner interface {
	// Kind is "docker" or "host".
	Kind() string
	// Find returns the instance with this name, or nil when there is none.
	Find(ctx context.Context, name string) (*Instance, error)
	// List returns every tt-model instance this runner knows, running or not.
	List(ctx context.Context) ([]Instance, error)
	// Start launches spec and returns as soon as the server process runs.
	Start(ctx context.Context, spec *Spec, progress io.Writer) (*Instance, error)
	// Stop sends SIGTERM, waits up to grace, kills, and removes the instance.
	Stop(ctx context.Context, inst *Instance, grace time.Duration, progress io.Writer) (StopResult, error)
	// Logs copies the instance's output to w, following it when asked, until
	// ctx ends (nil) or the instance stops for good (*FollowEnded).
	Logs(ctx context.Context, inst *Instance, follow bool, w io.Writer) error
	Close() error
}

// Instance is one started server.
type Instance struct {
	Name     string // tt-model-<package>-<profile>
	Package  string
	Profile  string
	Runner   string // "docker" or "host"
	ID       string // container id, or the supervisor's pid
	Port     int
	Bind     string // host address the port is published on ("" = every interface)
	Chips    []int
	State    string // running, restarting, exited, …
	Running  bool
	ExitCode int // the last exit code, when the runner knows it
	Restarts int // how often the engine restarted it (restart policy)
	Started  time.Time
	// Orphan is a host server still running without its supervisor.
	Orphan *procfs.Process
	// PortHolders are the processes listening on Port while the instance
	// does not run (-1: one this user cannot see): what ps and stop warn of.
	PortHolders []int
}

// StopResult says how a stop went: what this stop did, never more.
type StopResult struct {
	ExitCode int  // the instance's exit code, -1 when unknown
	Killed   bool // this stop's grace ran out and it SIGKILLed the server
	// AlreadyExited: the instance had ended before this stop (it only
	// removed it); ExitCode is how it ended.
	AlreadyExited bool
	// Reset describes the chip reset done after a kill ("" when none was needed).
	Reset string
	// Detail holds anything else the user must know (an orphan stopped, a
	// port still held by another process).
	Detail []string
}

// FollowEnded ends a followed Logs: the instance stopped for good (or was
// removed), and Reason says so.
type FollowEnded struct {
	Instance *Instance
	Reason   string
}

func (e *FollowEnded) Error() string { return "stopped following " + e.Instance.Name + ": " + e.Reason }

// InstanceName is the container (or host state) name of a package profile:
// tt-model-<name>-<profile>, as upstream names its containers.
func InstanceName(pkg, profile string) string { return "tt-model-" + pkg + "-" + profile }

// RunningError refuses a second serve of the same package and profile.
type RunningError struct{ Instance *Instance }

func (e *RunningError) Error() string {
	i := e.Instance
	return fmt.Sprintf("%s is already running (%s %s, port %d); stop it first: tt-model stop %s --profile %s",
		i.Name, i.Runner, shortID(i.ID), i.Port, i.Package, i.Profile)
}

// ReachHost is the address a client on this host reaches the instance at:
// its bind address, or 127.0.0.1 when it listens on every interface.
func (i Instance) ReachHost() string { return reachHost(i.Bind) }

func reachHost(bind string) string {
	if ip := net.ParseIP(bind); ip == nil || ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return bind
}

// URL is http://<ReachHost>:<Port>.
func (i Instance) URL() string {
	return "http://" + net.JoinHostPort(i.ReachHost(), strconv.Itoa(i.Port))
}

// Uptime is how long the instance has run, rounded to seconds.
func (i Instance) Uptime(now time.Time) time.Duration {
	if !i.Running || i.Started.IsZero() {
		return 0
	}
	return now.Sub(i.Started).Round(time.Second)
}

// FormatChips renders chip ids as "0,1" ("-" for none).
func FormatChips(ids []int) string {
	if len(ids) == 0 {
		return "-"
	}
	return chips.Format(ids)
}

// parseChips reads a devices label; a malformed one gives nil.
func parseChips(s string) []int {
	if s == "" {
		return nil
	}
	ids, err := chips.Parse(s)
	if err != nil {
		return nil
	}
	return ids
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
