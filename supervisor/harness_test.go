package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// The tests drive real processes: the test binary re-executes itself as a
// supervisor (so that signals, PID 1 and NOTIFY_SOCKET are real and its
// wait4(-1) reaper cannot steal the test's own children), and the
// supervisor runs internal/testserver, built once in TestMain.

const (
	envRunSupervisor = "TT_SUPERVISOR_TEST_RUN"    // set: this process is a supervisor
	envConfig        = "TT_SUPERVISOR_TEST_CONFIG" // its Config as JSON
)

// testServerBin is the built internal/testserver; set once by TestMain.
var testServerBin string

func TestMain(m *testing.M) {
	if os.Getenv(envRunSupervisor) == "1" {
		os.Exit(runSupervisorFromEnv())
	}
	dir, err := os.MkdirTemp("", "supervisor-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testServerBin = filepath.Join(dir, "testserver")
	build := exec.Command("go", "build", "-o", testServerBin, "./internal/testserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build testserver:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runSupervisorFromEnv() int {
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(envConfig)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor test config:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(cfg, log, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		return 1
	}
	code, err := s.Run(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
	}
	return code
}

// harness is one test's world: fake chips 0 and 1 (device nodes and sysfs
// with a ticking heartbeat), a hang marker, a lock dir, a record file that
// the test server and the fake reset command append to, and a notify socket.
type harness struct {
	t      testing.TB
	dir    string
	record string
	cfg    Config
	notify *notifySocket
	port   int
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, record: filepath.Join(dir, "record")}
	dev, sys := filepath.Join(dir, "dev"), filepath.Join(dir, "sys")
	for _, id := range []int{0, 1} {
		mustWrite(t, filepath.Join(dev, strconv.Itoa(id)), "")
		mustWrite(t, filepath.Join(sys, fmt.Sprintf("tenstorrent!%d", id), "tt_heartbeat"), "1\n")
	}
	h.port = servertest.FreePort(t)
	h.cfg = Defaults(h.port)
	h.cfg.ProbeInterval = 10 * time.Millisecond
	h.cfg.ProbeTimeout = time.Second
	h.cfg.StartTimeout = 20 * time.Second
	h.cfg.StopGrace = 5 * time.Second
	h.cfg.HangMarker = filepath.Join(dir, "cache", "hang_marker")
	h.cfg.ResetCmd = fakeReset(t) + " " + h.record + " ok {chips}"
	h.cfg.ResetTimeout = 10 * time.Second
	h.cfg.ResetBackoff = 10 * time.Millisecond
	h.cfg.Chips = []int{0, 1}
	h.cfg.DevDir, h.cfg.SysfsDir = dev, sys
	h.cfg.HeartbeatInterval = 30 * time.Millisecond
	h.cfg.ChipCheckTimeout = 2 * time.Second
	h.cfg.LockDir = filepath.Join(dir, "lock")
	h.cfg.BackoffMin = 10 * time.Millisecond
	h.cfg.BackoffMax = 40 * time.Millisecond
	return h
}

// tickHeartbeats makes the fake firmware alive until the test ends.
func (h *harness) tickHeartbeats() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Wait for the last write: one landing after TempDir's cleanup began
	// would leave it a file to trip on ("directory not empty").
	h.t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for n := 2; ; n++ {
			for _, id := range []int{0, 1} {
				os.WriteFile(filepath.Join(h.cfg.SysfsDir, fmt.Sprintf("tenstorrent!%d", id), "tt_heartbeat"),
					[]byte(strconv.Itoa(n)+"\n"), 0o644)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
}

// server sets the server command: the test server on the harness port.
func (h *harness) server(args ...string) {
	h.cfg.Argv = append([]string{testServerBin, "-port", strconv.Itoa(h.port), "-record", h.record}, args...)
}

// supervisor is a running supervisor process.
type supervisor struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	code   int
}

// start runs a supervisor with the harness config; env adds variables.
func (h *harness) start(env ...string) *supervisor {
	return h.startCmd(nil, env...)
}

// startCmd runs the supervisor under wrapper (e.g. unshare), if any.
func (h *harness) startCmd(wrapper []string, env ...string) *supervisor {
	h.t.Helper()
	cfg, err := json.Marshal(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	argv := append(append([]string{}, wrapper...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), envRunSupervisor+"=1", envConfig+"="+string(cfg))
	cmd.Env = append(cmd.Env, env...)
	if h.notify != nil {
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+h.notify.addr)
	}
	s := &supervisor{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.stderr, s.stderr
	cmd.WaitDelay = time.Second // servers left behind may hold the output pipe
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
		close(s.done)
	}()
	h.t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			cmd.Process.Kill()
			<-s.done
		}
		h.killServers()
		if h.t.Failed() {
			h.t.Logf("supervisor output:\n%s", s.stderr.String())
		}
	})
	return s
}

// killServers SIGKILLs the process group of every server the test started,
// in case a failed test left one behind.
func (h *harness) killServers() {
	for _, e := range h.events() {
		if f := strings.Fields(e); f[0] == "start" {
			if pid, err := strconv.Atoi(f[1]); err == nil && pid > 1 {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
}

// wait returns the supervisor's exit code.
func (s *supervisor) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(60 * time.Second):
		t.Fatalf("supervisor did not exit; output:\n%s", s.stderr.String())
		return -1
	}
}

func (s *supervisor) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// events is the record file, one event a line.
func (h *harness) events() []string {
	b, _ := os.ReadFile(h.record)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// kinds is events with only each line's first word ("start 12 345" → "start").
func (h *harness) kinds() []string {
	var out []string
	for _, e := range h.events() {
		f := strings.Fields(e)
		switch f[0] {
		case "health":
			continue
		case "exit", "signal", "reset": // "reset" alone: no chips
			out = append(out, strings.Join(f[:min(2, len(f))], " "))
		default:
			out = append(out, f[0])
		}
	}
	return out
}

// wantEvents checks the test server's events, in order, against want.
func (h *harness) wantEvents(t testing.TB, want ...string) {
	t.Helper()
	wantSequence(t, "events", h.kinds(), want)
}

// wantSequence checks got against want, in order; what names the sequence.
func wantSequence(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func (h *harness) count(kind string) int {
	n := 0
	for _, k := range h.kinds() {
		if k == kind {
			n++
		}
	}
	return n
}

// unhealthyAnswers counts the 503s the test server gave on /health.
func (h *harness) unhealthyAnswers() int {
	n := 0
	for _, e := range h.events() {
		if e == "health 503" {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds; the deadline only stops a broken
// test from hanging, it is not a timing assertion.
// It fails at once when the supervisor s (if any) exits meanwhile.
func eventually(t *testing.T, s *supervisor, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		if s != nil {
			select {
			case <-s.done:
				if !cond() {
					t.Fatalf("supervisor exited %d while waiting for %s", s.code, what)
				}
				return
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status fetches the supervisor's status JSON.
func status(t *testing.T, addr string) (Status, error) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	var st Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// notifySocket plays systemd's NOTIFY_SOCKET: it keeps every datagram.
type notifySocket struct {
	addr string
	mu   sync.Mutex
	msgs []string
	// onReady runs when a READY=1 datagram arrives (before it is stored).
	onReady func()
}

func (h *harness) listenNotify(abstract bool) *notifySocket {
	h.t.Helper()
	path := filepath.Join(h.dir, "notify.sock")
	if abstract {
		path = "@tt-model-test-" + strconv.Itoa(os.Getpid()) + "-" + filepath.Base(h.dir)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		h.t.Fatal(err)
	}
	n := &notifySocket{addr: path}
	h.notify = n
	h.t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			msg := string(buf[:k])
			n.mu.Lock()
			if strings.HasPrefix(msg, "READY=1") && n.onReady != nil {
				n.onReady()
			}
			n.msgs = append(n.msgs, msg)
			n.mu.Unlock()
		}
	}()
	return n
}

// messages are the datagrams received, without watchdog pings, with the
// value of EXTEND_TIMEOUT_USEC replaced by N (it is checked separately).
func (n *notifySocket) messages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.msgs {
		if m == "WATCHDOG=1" {
			continue
		}
		lines := strings.Split(m, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "EXTEND_TIMEOUT_USEC=") {
				lines[i] = "EXTEND_TIMEOUT_USEC=N"
			}
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	return out
}

// all is every datagram received so far, in order.
func (n *notifySocket) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.msgs)
}

func (n *notifySocket) pings() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, m := range n.msgs {
		if m == "WATCHDOG=1" {
			c++
		}
	}
	return c
}

// wantMessages checks the datagrams sent to the notify socket, in order,
// against want.
func (n *notifySocket) wantMessages(t testing.TB, want ...string) {
	t.Helper()
	wantSequence(t, "datagrams", n.messages(), want)
}

func (n *notifySocket) has(prefix string) bool {
	for _, m := range n.messages() {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fakeReset(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs("testdata/fake-reset.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// serverPID is the pid of the nth server the test server recorded (from 1).
func (h *harness) serverPID(t *testing.T, nth int) int {
	t.Helper()
	n := 0
	for _, e := range h.events() {
		if f := strings.Fields(e); f[0] == "start" {
			if n++; n == nth {
				pid, err := strconv.Atoi(f[1])
				if err != nil {
					t.Fatalf("record line %q: %v", e, err)
				}
				return pid
			}
		}
	}
	t.Fatalf("no start %d in the record %q", nth, h.events())
	return 0
}

// witness is a process of the test's own put into a server's process
// group, to learn which signal the group got first. It is `sleep`, not a
// Go program: with a signal's default disposition the kernel fixes a
// process's exit status when the signal is sent, not when the process next
// runs, so a witness tells the truth however late it would get the CPU. A
// Go program handles every signal in the runtime first.
type witness struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// groupWitness starts a witness in process group pgid. ignoreTerm makes it
// ignore SIGTERM (inherited across exec), so that it dies of the SIGKILL.
func groupWitness(t *testing.T, pgid int, ignoreTerm bool) *witness {
	t.Helper()
	script := "exec sleep 120"
	if ignoreTerm {
		script = "trap '' TERM; " + script
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		t.Fatalf("witness in process group %d: %v", pgid, err)
	}
	w := &witness{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.done
	})
	// Ready once sleep runs with the disposition it is meant to have.
	eventually(t, nil, "the witness to run sleep", func() bool {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			return false
		}
		var name string
		var ignored uint64
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Name:\t"); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(l, "SigIgn:\t"); ok {
				ignored, _ = strconv.ParseUint(v, 16, 64)
			}
		}
		termIgnored := ignored&(1<<(syscall.SIGTERM-1)) != 0
		return name == "sleep" && termIgnored == ignoreTerm
	})
	return w
}

// killedBy waits for the witness to end and returns the signal it died of.
func (w *witness) killedBy(t *testing.T) syscall.Signal {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the witness is still alive")
	}
	ws := w.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		t.Fatalf("the witness ended with %s, not by a signal", w.cmd.ProcessState)
	}
	return ws.Signal()
}

// freeze puts pid in a cgroup v1 freezer group of its own and freezes it:
// from then on a SIGKILL leaves it in the kernel (state D), as a process
// stuck in a driver, until the test ends and thaws it.
func freeze(t *testing.T, pid int) {
	t.Helper()
	testenv.Require(t, "freezer")
	dir, err := os.MkdirTemp(testenv.FreezerDir, "tt-model-test-")
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, value string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			t.Fatalf("freezer: %v", err)
		}
	}
	t.Cleanup(func() {
		write("freezer.state", "THAWED")
		eventually(t, nil, "the thawed group to empty", func() bool {
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			return err == nil && strings.TrimSpace(string(procs)) == ""
		})
		if err := os.Remove(dir); err != nil {
			t.Errorf("freezer group: %v", err)
		}
	})
	write("cgroup.procs", strconv.Itoa(pid))
	write("freezer.state", "FROZEN")
	eventually(t, nil, "the freezer group to freeze", func() bool {
		state, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		return err == nil && strings.TrimSpace(string(state)) == "FROZEN"
	})
}
