package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/internal/procfs"
	"github.com/ttmodel/tt-model/supervisor"
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

// hostState is state.json: what ps, logs and stop need later. The
// supervisor keeps its own status in supervisor.json beside it (the
// server's pid and start tick, its state, its exit code at the end).
type hostState struct {
	Name      string    `json:"name"`
	Package   string    `json:"package"`
	Profile   string    `json:"profile"`
	PID       int       `json:"pid"`        // the supervisor's
	StartTick string    `json:"start_tick"` // /proc/<pid>/stat field 22, to tell a reused pid
	Port      int       `json:"port"`
	Bind      string    `json:"bind,omitempty"`
	Chips     []int     `json:"chips,omitempty"`
	Started   time.Time `json:"started"`
	Argv      []string  `json:"argv"`
}

func (st hostState) supervisor() procfs.Process {
	return procfs.Process{PID: st.PID, StartTick: st.StartTick}
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

func (h *Host) supervisorStatePath(name string) string {
	return filepath.Join(h.dir(name), "supervisor.json")
}

// Find reads the instance's state and checks what actually runs: the
// supervisor (pid and start tick), and the server it last reported. A
// server whose supervisor is gone is "orphaned" and still counts as
// running (it holds the port and maybe chips); an instance with neither is
// "exited", with the supervisor's exit code when it recorded one.
func (h *Host) Find(_ context.Context, name string) (*Instance, error) {
	st, err := h.readState(name)
	if err != nil || st == nil {
		return nil, err
	}
	inst := &Instance{
		Name: st.Name, Package: st.Package, Profile: st.Profile, Runner: "host", ID: strconv.Itoa(st.PID),
		Port: st.Port, Bind: st.Bind, Chips: st.Chips, Started: st.Started, State: "exited", ExitCode: -1,
	}
	sup, _ := supervisor.ReadStateFile(h.supervisorStatePath(name))
	server := procfs.Process{PID: sup.ServerPID, StartTick: sup.ServerStartTick}
	switch {
	case st.supervisor().Alive():
		inst.Running, inst.State = true, "starting"
		if sup.Supervisor.PID == st.PID {
			inst.State = sup.State.String() // starting, backoff, resetting, …
		}
		if inst.State == supervisor.StateReady.String() {
			inst.State = "running"
		}
	case server.Alive():
		inst.Running, inst.State = true, "orphaned"
		inst.Orphan = &server
	case sup.ExitCode != nil:
		inst.ExitCode = *sup.ExitCode
	default:
		inst.State = "died" // killed without recording an exit code
	}
	if !inst.Running {
		inst.PortHolders = portHolders(inst.Port)
	}
	return inst, nil
}

func (h *Host) readState(name string) (*hostState, error) {
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
	return &st, nil
}

// portHolders lists the processes listening on port (nil when none, or
// nothing can be told).
func portHolders(port int) []int {
	if port <= 0 {
		return nil
	}
	pids, hidden, err := procfs.Listeners(port)
	if err != nil {
		return nil
	}
	if hidden {
		return []int{-1}
	}
	return pids
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
	_ = os.Remove(h.supervisorStatePath(spec.Name)) // a previous run's
	log, err := os.OpenFile(h.logPath(spec.Name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), SortedEnv(hostEnv(spec))...)
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
		StartTick: procfs.Self(cmd.Process.Pid).StartTick, Port: spec.Port, Bind: spec.Bind, Chips: spec.Chips, Started: time.Now().UTC(), Argv: argv,
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

// hostEnv is the server's environment on the host: the container mount
// points the kinds and ServerEnv name resolved to the host files behind them.
func hostEnv(spec *Spec) map[string]string {
	metal := filepath.Join(spec.StateDir, "cache")
	mounts := map[string]string{
		containerMetalCache: metal, containerWeightCache: filepath.Join(spec.StateDir, "weights"), ContainerHF: spec.HF.HFHome,
	}
	if spec.APIKeyFile != "" {
		mounts[containerAPIKey] = spec.APIKeyFile
	}
	return hostPaths(spec.ServerEnv(spec.HF.HFHome, spec.HF.CacheDir, metal), mounts)
}

// hostPaths rewrites the env values that name a container mount point (a
// profile written for the container, e.g. PI05_HANG_MARKER=/cache/…) to the
// host folder behind that mount, so the file lands where the container's
// would and never in a root-level /cache of the host.
func hostPaths(env, mounts map[string]string) map[string]string {
	for k, v := range env {
		for mount, host := range mounts {
			if v == mount || strings.HasPrefix(v, mount+"/") {
				env[k] = host + strings.TrimPrefix(v, mount)
			}
		}
	}
	return env
}

// serverArgv is the launch argv with tt-model-server resolved on this host,
// and, with --bind, the listen address every kind writes as 0.0.0.0
// replaced by the bind address (a container keeps 0.0.0.0: the engine
// publishes the port on the bind address instead).
func (h *Host) serverArgv(spec *Spec) []string {
	server := append([]string{}, spec.Launch.Argv...)
	if len(server) > 0 && server[0] == "tt-model-server" && h.Server != "" {
		server[0] = h.Server
	}
	for i, a := range server {
		if a == "0.0.0.0" && spec.Bind != "" {
			server[i] = spec.Bind
		}
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
		argv = append(argv, "--ready-url", "http://"+net.JoinHostPort(reachHost(spec.Bind), strconv.Itoa(spec.Port))+spec.Launch.ReadyPath)
	}
	if len(spec.Chips) > 0 {
		argv = append(argv, "--chips", chips.Format(spec.Chips))
	}
	argv = append(argv, "--stop-grace", StopGrace.String(), "--state-file", h.supervisorStatePath(spec.Name))
	argv = append(argv, spec.SupervisorFlags...)
	argv = append(argv, "--")
	return append(argv, server...)
}

// Stop sends SIGTERM to the supervisor, which stops the server (SIGKILL after
// its own grace, then the chip reset), and waits for it; a supervisor still
// there well after that is killed. A server whose supervisor is gone (an
// orphan) is stopped directly: SIGTERM to its process group, SIGKILL after
// the grace. It then checks that nothing of the instance runs any more and
// says what it did; the state is removed only then.
func (h *Host) Stop(ctx context.Context, inst *Instance, grace time.Duration, progress io.Writer) (StopResult, error) {
	res := StopResult{ExitCode: -1}
	st, err := h.readState(inst.Name)
	if err != nil {
		return res, err
	}
	if st == nil {
		return res, fmt.Errorf("%s: no state in %s", inst.Name, h.dir(inst.Name))
	}
	sup := st.supervisor()
	switch {
	case sup.Alive():
		if err := syscall.Kill(sup.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return res, fmt.Errorf("signal %s (pid %d): %w", inst.Name, sup.PID, err)
		}
		// The supervisor needs the grace plus a chip reset at most.
		if !waitDead(ctx, sup, grace+resetTimeout+10*time.Second) {
			fmt.Fprintf(progress, "%s (supervisor pid %d) did not exit; killing it\n", inst.Name, sup.PID)
			_ = syscall.Kill(-sup.PID, syscall.SIGKILL)
			res.Killed = true
			res.Detail = append(res.Detail, "the supervisor did not exit after the grace and a reset: it was killed (its server dies with it); the chips may need `tt-smi -r`")
		}
		if s, err := supervisor.ReadStateFile(h.supervisorStatePath(inst.Name)); err == nil && s.ExitCode != nil {
			res.ExitCode = *s.ExitCode
		}
	case inst.Orphan != nil && inst.Orphan.Alive():
		srv := *inst.Orphan
		res.Detail = append(res.Detail, fmt.Sprintf("its supervisor (pid %d) was gone; the server (pid %d) ran on unsupervised", sup.PID, srv.PID))
		_ = syscall.Kill(-srv.PID, syscall.SIGTERM)
		if !waitDead(ctx, srv, grace) {
			_ = syscall.Kill(-srv.PID, syscall.SIGKILL)
			res.Killed = true
			waitDead(ctx, srv, 10*time.Second)
		}
	default:
		res.AlreadyExited = true
		res.ExitCode = inst.ExitCode
	}
	if s, err := supervisor.ReadStateFile(h.supervisorStatePath(inst.Name)); err == nil {
		if srv := (procfs.Process{PID: s.ServerPID, StartTick: s.ServerStartTick}); srv.Alive() {
			return res, fmt.Errorf("%s: its server (pid %d) still runs after the stop; state kept in %s", inst.Name, srv.PID, h.dir(inst.Name))
		}
	}
	if holders := portHolders(inst.Port); len(holders) > 0 {
		res.Detail = append(res.Detail, fmt.Sprintf("port %d is still held by %s, which is not this instance's server (not stopped)", inst.Port, DescribePIDs(holders)))
	}
	if err := os.RemoveAll(h.dir(inst.Name)); err != nil {
		return res, fmt.Errorf("remove state of %s: %w", inst.Name, err)
	}
	return res, nil
}

// waitDead waits up to limit for p to end.
func waitDead(ctx context.Context, p procfs.Process, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for p.Alive() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// DescribePIDs renders portHolders' answer.
func DescribePIDs(pids []int) string {
	if len(pids) == 1 && pids[0] == -1 {
		return "a process this user cannot see"
	}
	return fmt.Sprintf("pid %v", pids)
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
			if _, err := io.Copy(w, f); err != nil { // what it wrote before it went
				return err
			}
			why := "its state was removed (stopped)"
			if cur != nil {
				why = "the supervisor " + cur.State
				if cur.ExitCode >= 0 {
					why += fmt.Sprintf(" (exit %d)", cur.ExitCode)
				}
			}
			return &FollowEnded{Instance: inst, Reason: why}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
