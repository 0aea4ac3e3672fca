package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/procfs"
	"github.com/ttmodel/tt-model/internal/readiness"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/runner/runnertest"
	"github.com/ttmodel/tt-model/supervisor"
)

// TestHostServeStop runs a package on the bare host under the real
// `tt-model supervise`, with the stand-in server reading its pinned
// snapshot from the host HF cache.
func TestHostServeStop(t *testing.T) {
	ctx := context.Background()
	h, si := hostStandIn(t)
	spec, inst := si.start(t, "default")
	snaps := si.snaps
	var logs bytes.Buffer
	if err := WaitReady(ctx, h, inst, spec.Launch, 2*time.Minute, &logs); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if want := "HF_MODEL=" + snaps[0].Dir; !strings.Contains(logs.String(), want) {
		t.Errorf("server output lacks %q:\n%s", want, logs.String())
	}
	if _, err := h.Start(ctx, spec, io.Discard); !errors.As(err, new(*RunningError)) {
		t.Errorf("second start: err = %v, want a RunningError", err)
	}
	list, err := h.List(ctx)
	if err != nil || len(list) != 1 || list[0].Port != spec.Port || !list[0].Running {
		t.Errorf("List = %+v, %v", list, err)
	}
	res, err := h.Stop(ctx, inst, 30*time.Second, io.Discard)
	if err != nil || res.Killed {
		t.Fatalf("Stop = %+v, %v", res, err)
	}
	if cur, err := h.Find(ctx, inst.Name); err != nil || cur != nil {
		t.Errorf("after stop: %+v, %v; want no instance", cur, err)
	}
	if readiness.Probe(ctx, &http.Client{Timeout: time.Second}, fmt.Sprintf("http://127.0.0.1:%d/health", spec.Port)) == nil {
		t.Error("the server still answers after stop")
	}
}

// On the bare host, the supervisor backs off after the
// server's first failed start, and WaitReady returns a CrashError with the
// server's own message at once instead of waiting out its timeout.
func TestHostCrashLoop(t *testing.T) {
	h, si := hostStandIn(t)
	spec, inst := si.start(t, "broken")
	began := time.Now()
	err := WaitReady(context.Background(), h, inst, spec.Launch, 2*time.Minute, io.Discard)
	var crash *CrashError
	if !errors.As(err, &crash) || !strings.Contains(err.Error(), "the supervisor restarts it") || !strings.Contains(err.Error(), runnertest.BrokenMessage) {
		t.Fatalf("WaitReady = %v; want a CrashError with the supervisor's backoff and the server's message", err)
	}
	t.Logf("crash noticed after %s:\n%v", time.Since(began).Round(time.Millisecond), err)
}

// After a SIGKILL of the host supervisor its server dies
// too (nothing is left answering on the port), ps tells the instance died
// rather than exited cleanly, and stop says it had already stopped.
func TestHostKilledSupervisor(t *testing.T) {
	ctx := context.Background()
	h, si := hostStandIn(t)
	spec, inst := si.start(t, "default")
	if err := WaitReady(ctx, h, inst, spec.Launch, 2*time.Minute, io.Discard); err != nil {
		t.Fatal(err)
	}
	sup, err := supervisor.ReadStateFile(h.supervisorStatePath(inst.Name))
	if err != nil {
		t.Fatal(err)
	}
	server := procfs.Process{PID: sup.ServerPID, StartTick: sup.ServerStartTick}
	if err := syscall.Kill(sup.Supervisor.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); server.Alive(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server (pid %d) outlived its SIGKILLed supervisor", server.PID)
		}
	}
	// The kernel sends the server its death signal while the supervisor is
	// still exiting, so the server can be gone a moment before the
	// supervisor's own /proc entry turns into a zombie: wait for that too.
	supervisorProc := sup.Supervisor
	for deadline := time.Now().Add(time.Minute); supervisorProc.Alive(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor (pid %d) is still alive after SIGKILL", supervisorProc.PID)
		}
	}
	cur, err := h.Find(ctx, inst.Name)
	if err != nil || cur == nil || cur.Running || cur.State != "died" {
		t.Fatalf("Find after the kill = %+v, %v; want a died instance", cur, err)
	}
	res, err := h.Stop(ctx, cur, 5*time.Second, io.Discard)
	if err != nil || !res.AlreadyExited || res.Killed {
		t.Errorf("Stop = %+v, %v; want already stopped, nothing killed by the stop", res, err)
	}
	if readiness.Probe(ctx, &http.Client{Timeout: time.Second}, fmt.Sprintf("http://127.0.0.1:%d/health", spec.Port)) == nil {
		t.Error("something still answers on the port")
	}
}

// A server left running by a supervisor that is gone (an older tt-model,
// or a kill the kernel could not follow) is what ps calls orphaned and what
// stop stops, by its recorded pid and start time; stop then reports it did.
func TestHostStopsOrphan(t *testing.T) {
	ctx := context.Background()
	h := &Host{RunDir: t.TempDir()}
	name := "tt-model-pkg-default"
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	port := servertest.FreePort(t)
	srv := exec.Command(runnertest.BuildHealthServer(t), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	t.Cleanup(func() { syscall.Kill(-srv.Process.Pid, syscall.SIGKILL) })
	recordProcess(t, h, name, dead, "1")
	rec := supervisor.Status{Supervisor: procfs.Process{PID: dead.Process.Pid, StartTick: "1"},
		ServerPID: srv.Process.Pid, ServerStartTick: procfs.Self(srv.Process.Pid).StartTick}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(h.supervisorStatePath(name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	inst, err := h.Find(ctx, name)
	if err != nil || inst == nil || !inst.Running || inst.State != "orphaned" || inst.Orphan == nil || inst.Orphan.PID != srv.Process.Pid {
		t.Fatalf("Find = %+v, %v; want the orphaned server", inst, err)
	}
	res, err := h.Stop(ctx, inst, 5*time.Second, io.Discard)
	if err != nil || len(res.Detail) == 0 || !strings.Contains(res.Detail[0], "ran on unsupervised") {
		t.Errorf("Stop = %+v, %v; want the orphan stopped and said so", res, err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("stop left the orphaned server running")
	}
}
