package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// buildBinary compiles a main package of this module into dir.
func buildBinary(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// superviseTinyPI05 starts `tt-model supervise FLAGS --stop-grace 10s --`
// over tt-model-server serving the tiny pi0.5 checkpoint (one camera, a
// 6-step horizon, 3 denoising steps, fp32) on 127.0.0.1:port, with env
// added to the environment. It returns supervise's combined output and a
// channel that receives its exit; the test's cleanup stops it (SIGTERM,
// SIGKILL after 30 s) and logs the output when the test failed.
func superviseTinyPI05(t *testing.T, ttModel, server, port string, flags []string, env ...string) (*syncbuf.Buffer, <-chan error) {
	t.Helper()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	args := append(append([]string{"supervise"}, flags...), "--stop-grace", "10s",
		"--", server, "--model", "pi05", "--host", "127.0.0.1", "--port", port)
	cmd := exec.Command(ttModel, args...)
	cmd.Env = append(append(os.Environ(), "PI05_WEIGHTS_DIR="+abs(pi05TinyDir), "PI05_TOKENIZER="+abs(pi05Tokenizer),
		"PI05_PRECISION=fp32", "PI05_ACTION_HORIZON=6", "PI05_NUM_STEPS=3", "PI05_NUM_IMAGES=1"), env...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("supervise output:\n%s", out.String())
		}
	})
	return out, exited
}

// The hang chain end to end on real processes: `tt-model supervise` runs tt-model-server on the
// tiny pi0.5 checkpoint with one device and the fault switch; the server's second serving call
// hangs, the watchdog answers it with a 503, writes the marker and exits 75; the supervisor runs
// the reset command once (the marker present), removes the marker, restarts the server, which is
// ready again and answers. Every request got an answer or a 503: none was lost silently.
func TestPI05HangUnderSupervise(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tt-model, tt-model-server and a reset recorder: skipped with -short")
	}
	bin := t.TempDir()
	ttModel := buildBinary(t, bin, "./cmd/tt-model", "tt-model")
	server := buildBinary(t, bin, "./cmd/tt-model-server", "tt-model-server")
	reset := runnertest.BuildStatic(t, filepath.Join("hang", "testreset"), "test-reset")
	work := t.TempDir()
	marker, record := filepath.Join(work, "hang_marker"), filepath.Join(work, "resets.jsonl")
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	out, exited := superviseTinyPI05(t, ttModel, server, port,
		[]string{"--ready-url", base + "/health", "--hang-marker", marker, "--reset-cmd", reset + " " + record + " " + marker + " {chips}"},
		"TT_CPU_DEVICES=1", "PI05_HANG_S=3", "PI05_HANG_DRAIN_S=1", "PI05_HANG_MARKER="+marker, "TT_MODEL_FAULT=hang:device=0,after=2")

	waitHealthy := func() {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			select {
			case err := <-exited:
				t.Fatalf("supervise exited: %v\n%s", err, out.String())
			default:
			}
			if resp, err := http.Get(base + "/health"); err == nil {
				var h map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&h)
				resp.Body.Close()
				if h["status"] == "ok" {
					return
				}
			}
		}
		t.Fatalf("the server is not ready:\n%s", out.String())
	}
	waitHealthy()
	frame := framePNG(t, 3)
	// Requests one after another until the restarted server has answered one. A refused
	// connection (the server is between exit and restart) is not a lost request: the client
	// knows at once and waits for /health; an answer cut off mid-way would be lost.
	var statuses []int
	restarted := false
	for i := 0; i < 20 && !restarted; i++ {
		body := fmt.Sprintf(`{"images": [%q], "prompt": "push the button", "seed": %d}`, frame, i)
		resp, err := http.Post(base+"/predict", "application/json", strings.NewReader(body))
		if err != nil {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("request %d lost: %v\n%s", i, err, out.String())
			}
			waitHealthy()
			continue
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		switch resp.StatusCode {
		case 200:
			restarted = strings.Count(out.String(), "server spawned") >= 2
		case 503:
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("request %d: a 503 without Retry-After", i)
			}
		default:
			t.Fatalf("request %d: status %d\n%s", i, resp.StatusCode, out.String())
		}
	}
	if !restarted || len(statuses) < 3 || statuses[0] != 200 || statuses[1] != 503 {
		t.Fatalf("statuses %v: want 200 (call 1), 503 (call 2 hangs), then 200 from the restarted server\n%s", statuses, out.String())
	}
	log := out.String()
	for _, want := range []string{"device hang: the server exits", "exit 75"} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q:\n%s", want, log)
		}
	}
	resets := runnertest.ReadResets(t, record)
	if len(resets) != 1 || !resets[0].Marker {
		t.Errorf("resets %+v: want exactly one, with the hang marker present", resets)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hang marker is still there after the good reset: %v", err)
	}
}
