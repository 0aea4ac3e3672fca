package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Host runs each instance on the bare host as a detached
// `tt-model supervise -- tt-model-server …`, with its state in
// <cache>/run/<name>/ (state.json and server.log).
type Host struct {
	RunDir string
	// Supervisor is the argv that starts the supervisor, before its flags
	// (normally this tt-model binary and "supervise").
	Supervisor []string
	// Server replaces a launch argv[0] of "tt-model-server" (the path of
	// the server binary on this host).
	Server string
}

// hostState is state.json: what ps, logs and stop need later.
type hostState struct {
	Name      string    `json:"name"`
	Package   string    `json:"package"`
	Profile   string    `json:"profile"`
	PID       int       `json:"pid"`
	StartTick string    `json:"start_tick"` // /proc/<pid>/stat field 22, to tell a reused pid
	Port      int       `json:"port"`
	Chips     []int     `json:"chips,omitempty"`
	Started   time.Time `json:"started"`
	Argv      []string  `json:"argv"`
}

// NewHost uses this executable as the supervisor and the tt-model-server
// beside it, else the one on PATH (none found: Start says how to build it).
func NewHost(cacheRoot string) (*Host, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locate tt-model: %w", err)
	}
	server := filepath.Join(filepath.Dir(self), "tt-model-server")
	if _, err := os.Stat(server); err != nil {
		server, _ = exec.LookPath("tt-model-server")
	}
	return &Host{RunDir: filepath.Join(cacheRoot, "run"), Supervisor: []string{self, "supervise"}, Server: server}, nil
}

func (h *Host) Kind() string { return "host" }
func (h *Host) Close() error { return nil }

func (h *Host) dir(name string) string { return filepath.Join(h.RunDir, name) }

func (h *Host) logPath(name string) string { return filepath.Join(h.dir(name), "server.log") }

// Find reads the instance's state and checks its supervisor still runs.
func (h *Host) Find(_ context.Context, name string) (*Instance, error) {
	b, err := os.ReadFile(filepath.Join(h.dir(name), "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state of %s: %w", name, err)
	}
	var st hostState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state of %s (%s): %w", name, h.dir(name), err)
	}
	inst := &Instance{
		Name: st.Name, Package: st.Package, Profile: st.Profile, Runner: "host", ID: strconv.Itoa(st.PID),
		Port: st.Port, Chips: st.Chips, Started: st.Started, State: "exited", ExitCode: -1,
	}
	if processAlive(st.PID, st.StartTick) {
		inst.State, inst.Running = "running", true
	}
	return inst, nil
}

// List reads every state folder.
func (h *Host) List(ctx context.Context) ([]Instance, error) {
	entries, err := os.ReadDir(h.RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", h.RunDir, err)
	}
	var out []Instance
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		inst, err := h.Find(ctx, e.Name())
		if err != nil {
			return nil, err
		}
		if inst != nil {
			out = append(out, *inst)
		}
	}
	return out, nil
}

// Start launches the supervisor in its own session, its output appended to
// server.log, and records its pid.
func (h *Host) Start(ctx context.Context, spec *Spec, progress io.Writer) (*Instance, error) {
	if cur, err := h.Find(ctx, spec.Name); err != nil {
		return nil, err
	} else if cur != nil && cur.Running {
		return nil, &RunningError{Instance: cur}
	}
	dir := h.dir(spec.Name)
	metal := filepath.Join(spec.StateDir, "cache")
	for _, d := range []string{dir, metal, filepath.Join(spec.StateDir, "weights")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	server := h.serverArgv(spec)
	if len(server) == 0 {
		return nil, fmt.Errorf("%s profile %s: the kind gives no server command", spec.Package.Path, spec.Profile.Name)
	}
	if _, err := exec.LookPath(server[0]); err != nil {
		return nil, fmt.Errorf("server %s: %w (build it with `make build`: it lands in bin/ beside tt-model)", server[0], err)
	}
	argv := h.argv(spec, server)
	log, err := os.OpenFile(h.logPath(spec.Name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), SortedEnv(spec.ServerEnv(spec.HF.HFHome, spec.HF.CacheDir, metal, filepath.Join(spec.StateDir, "weights")))...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	// Reap it if it dies while this process still runs, so it never lingers
	// as a zombie that looks alive.
	go func() { _ = cmd.Wait() }()
	st := hostState{
		Name: spec.Name, Package: spec.Package.Wire.Name, Profile: spec.Profile.Name, PID: cmd.Process.Pid,
		StartTick: startTick(cmd.Process.Pid), Port: spec.Port, Chips: spec.Chips, Started: time.Now().UTC(), Argv: argv,
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		return nil, fmt.Errorf("record state of %s: %w", spec.Name, err)
	}
	fmt.Fprintf(progress, "started %s (pid %d), output in %s\n", spec.Name, st.PID, h.logPath(spec.Name))
	return h.Find(ctx, spec.Name)
}

// serverArgv is the launch argv with tt-model-server resolved on this host.
func (h *Host) serverArgv(spec *Spec) []string {
	server := append([]string{}, spec.Launch.Argv...)
	if len(server) > 0 && server[0] == "tt-model-server" && h.Server != "" {
		server[0] = h.Server
	}
	return server
}

// argv is the supervisor command: readiness as the kind defines it, the
// chips to lock and reset, the stop grace, then the server.
func (h *Host) argv(spec *Spec, server []string) []string {
	argv := append([]string{}, h.Supervisor...)
	if spec.Launch.ReadyLine != "" {
		argv = append(argv, "--ready-line", spec.Launch.ReadyLine)
	} else if spec.Launch.ReadyPath != "" {
		argv = append(argv, "--ready-url", fmt.Sprintf("http://127.0.0.1:%d%s", spec.Port, spec.Launch.ReadyPath))
	}
	if len(spec.Chips) > 0 {
		argv = append(argv, "--chips", joinChips(spec.Chips))
	}
	argv = append(argv, "--stop-grace", StopGrace.String())
	argv = append(argv, spec.SupervisorFlags...)
	argv = append(argv, "--")
	return append(argv, server...)
}

// Stop sends SIGTERM to the supervisor, which stops the server (SIGKILL after
// its own grace, then the chip reset), and waits for it; a supervisor still
// there well after that is killed.
func (h *Host) Stop(ctx context.Context, inst *Instance, grace time.Duration, progress io.Writer) (StopResult, error) {
	res := StopResult{ExitCode: -1}
	pid, err := strconv.Atoi(inst.ID)
	if err != nil {
		return res, fmt.Errorf("state of %s: bad pid %q", inst.Name, inst.ID)
	}
	if inst.Running {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return res, fmt.Errorf("signal %s (pid %d): %w", inst.Name, pid, err)
		}
		// The supervisor needs the grace plus a chip reset at most.
		if !h.waitGone(ctx, inst.Name, grace+resetTimeout+10*time.Second) {
			fmt.Fprintf(progress, "%s (pid %d) did not exit; killing it\n", inst.Name, pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			res.Killed = true
			res.Reset = "the supervisor was killed: if its server still runs, find it with `pgrep -f tt-model-server`; the chips may need `tt-smi -r`"
		}
	}
	if err := os.RemoveAll(h.dir(inst.Name)); err != nil {
		return res, fmt.Errorf("remove state of %s: %w", inst.Name, err)
	}
	return res, nil
}

func (h *Host) waitGone(ctx context.Context, name string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		cur, err := h.Find(ctx, name)
		if err != nil || cur == nil || !cur.Running {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// Logs copies server.log to w; following, it keeps reading until ctx ends or
// the supervisor is gone and the file is drained.
func (h *Host) Logs(ctx context.Context, inst *Instance, follow bool, w io.Writer) error {
	f, err := os.Open(h.logPath(inst.Name))
	if err != nil {
		return fmt.Errorf("logs of %s: %w", inst.Name, err)
	}
	defer f.Close()
	for {
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("logs of %s: %w", inst.Name, err)
		}
		if !follow || ctx.Err() != nil {
			return nil
		}
		if cur, err := h.Find(ctx, inst.Name); err != nil || cur == nil || !cur.Running {
			_, err := io.Copy(w, f) // what it wrote before it went
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// processAlive reports whether pid runs, is not a zombie, and is the process
// that was recorded (same start tick), so a reused pid is not mistaken.
func processAlive(pid int, tick string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := statFields(string(b))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return false
	}
	return tick == "" || fields[19] == tick
}

func startTick(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	if f := statFields(string(b)); len(f) >= 20 {
		return f[19]
	}
	return ""
}

// statFields splits /proc/<pid>/stat after the command name (which may hold
// spaces); the first field returned is the state (field 3).
func statFields(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
