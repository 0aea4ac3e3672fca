package supervisor

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/ttmodel/tt-model/internal/atomicfile"
	"github.com/ttmodel/tt-model/internal/procfs"
)

// State is where the supervisor is in a server's life (after supervisord's
// ProcessStates). Every change goes through (*Supervisor).enter, which logs
// it once, sends STATUS= and updates the status JSON.
type State int

// The states, in the order a normal life meets them.
const (
	StateStarting  State = iota // server spawned, not ready yet
	StateReady                  // readiness probe answered
	StateResetting              // reset command and chip check running
	StateBackoff                // waiting before the next start after a crash
	StateStopping               // SIGTERM sent, waiting (SIGKILL after the grace)
	StateFailed                 // given up: the supervisor is about to exit
)

var stateNames = [...]string{"starting", "ready", "resetting", "backoff", "stopping", "failed"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// MarshalJSON writes the state's name.
func (s State) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a state's name.
func (s *State) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return err
	}
	for i, n := range stateNames {
		if n == name {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("unknown supervisor state %q", name)
}

// exitStatus is how a process ended.
type exitStatus struct {
	ws syscall.WaitStatus
}

// Code is the process's exit code, or 128+signal for a process killed by a
// signal (the shell's convention, which container runtimes follow too).
func (e exitStatus) Code() int {
	if e.ws.Signaled() {
		return 128 + int(e.ws.Signal())
	}
	return e.ws.ExitStatus()
}

func (e exitStatus) String() string {
	if e.ws.Signaled() {
		return "signal " + signalName(e.ws.Signal())
	}
	return fmt.Sprintf("exit %d", e.ws.ExitStatus())
}

// ExitInfo is a server's last exit in the status JSON.
type ExitInfo struct {
	Code   int       `json:"code"`
	Signal string    `json:"signal,omitempty"`
	At     time.Time `json:"at"`
}

// ResetInfo is the last chip reset in the status JSON.
type ResetInfo struct {
	At        time.Time `json:"at"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
	OK        bool      `json:"ok"`
	Error     string    `json:"error,omitempty"`
	DurationS float64   `json:"duration_s"`
	// Skipped: no chips on this host and the default reset command, so
	// nothing ran.
	Skipped bool `json:"skipped,omitempty"`
	// ChipCheck is the last attempt's check: "passed", "failed: …", or
	// "skipped (no chips on this host)".
	ChipCheck string `json:"chip_check,omitempty"`
	// Output is the tail of the last attempt's reset command output.
	Output string `json:"output,omitempty"`
}

// Status is a snapshot of the supervisor, served as JSON on --status-addr
// and written to --state-file.
type Status struct {
	State      State          `json:"state"`
	Detail     string         `json:"detail"`
	Since      time.Time      `json:"since"`
	Supervisor procfs.Process `json:"supervisor"`
	// ServerPID and ServerStartTick name the running server (none between
	// lives): tt-model stop and ps check that exact process.
	ServerPID       int        `json:"server_pid,omitempty"`
	ServerStartTick string     `json:"server_start_tick,omitempty"`
	Starts          int        `json:"starts"`
	Restarts        int        `json:"restarts"`
	Resets          int        `json:"resets"`   // reset commands run (skipped ones not counted)
	UptimeS         float64    `json:"uptime_s"` // seconds since the current server became ready
	LastExit        *ExitInfo  `json:"last_exit,omitempty"`
	LastReset       *ResetInfo `json:"last_reset,omitempty"`
	Chips           []int      `json:"chips"`
	// ExitCode is set when the supervisor has finished: the code it exits with.
	ExitCode *int `json:"exit_code,omitempty"`
	// HangMarker is the marker file and whether it is there now (the status
	// server looks when asked; the state file does not have it).
	HangMarker *MarkerStatus `json:"hang_marker,omitempty"`
	// Timeline is what happened, oldest first (the last 200 entries).
	Timeline []Event `json:"timeline"`
}

// MarkerStatus is the hang marker in the status JSON.
type MarkerStatus struct {
	Path    string `json:"path"`
	Present bool   `json:"present"`
	// Content is the marker's line (when, which pid, why), when present.
	Content string `json:"content,omitempty"`
}

// statusBoard holds the snapshot that the status server reads while the
// supervisor loop writes it, and keeps --state-file in step with it.
type statusBoard struct {
	mu      sync.Mutex
	st      Status
	readyAt time.Time
	file    string // --state-file, "" when none
	log     *slog.Logger
}

func (b *statusBoard) update(f func(st *Status)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before := b.st
	f(&b.st)
	b.record(before)
	if b.st.State == StateReady && b.readyAt.IsZero() {
		b.readyAt = time.Now()
	}
	if b.st.State != StateReady {
		b.readyAt = time.Time{}
	}
	b.save()
}

// save writes the state file, if there is one. The caller holds mu.
func (b *statusBoard) save() {
	if b.file != "" {
		if err := writeStateFile(b.file, b.st); err != nil && b.log != nil {
			b.log.Warn("cannot write the state file", "err", err)
		}
	}
}

// writeStateFile replaces path with st as JSON, atomically, so a reader
// never sees half a file.
func writeStateFile(path string, st Status) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// ReadStateFile reads what --state-file holds.
func ReadStateFile(path string) (Status, error) {
	var st Status
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state file %s: %w", path, err)
	}
	return st, nil
}

func (b *statusBoard) snapshot() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.st
	st.Timeline = append([]Event(nil), st.Timeline...)
	if !b.readyAt.IsZero() {
		st.UptimeS = time.Since(b.readyAt).Seconds()
	}
	return st
}
