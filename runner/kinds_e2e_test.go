package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/testing/pybase"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestServePythonKinds packages the two test packages of the Python kinds
// that build without a daemon (testdata of the builder: an http-server echo
// server, a tt-dit-server FastAPI app) with the tt-model command, on the
// Python test base given as an OCI layout (echo) and as an image in the
// engine (dit), serves each with `tt-model serve` on the Docker engine
// (the supervisor is the container's PID 1 and sees the ready line),
// sends it a request, checks that the server got the launch manifest's
// rules give it (argv, env, the pinned weights), and stops it.
func TestServePythonKinds(t *testing.T) {
	d := e2eDocker(t)
	base := pybase.Get(t)
	tool := runnertest.StaticTTModel(t, "..")
	root := repoRoot(t)
	inEngine := base.InEngine(t, d.c)
	for _, tc := range []struct {
		dir, base, profile, weights, rev string
		request                          func(t *testing.T, port int)
	}{
		{"echo", base.Layout, "default", "ttmodel/echo-weights", "0123456789abcdef0123456789abcdef01234567", func(t *testing.T, port int) {
			var out struct {
				Echo   map[string]any `json:"echo"`
				Launch struct {
					Argv         []string          `json:"argv"`
					Env          map[string]string `json:"env"`
					WeightsFiles []string          `json:"weights_files"`
					Cwd          string            `json:"cwd"`
				} `json:"launch"`
			}
			post(t, port, "/v1/echo", `{"ping": 1}`, &out)
			l := out.Launch
			if out.Echo["ping"] != float64(1) || !slices.Equal(l.Argv, []string{"--host", "0.0.0.0", "--port", fmt.Sprint(port), "--greeting", "bonjour"}) ||
				l.Env["MESH_DEVICE"] != "P150" || l.Env["TT_MESH_SHAPE"] != "1x1" || l.Env["ECHO_GREETING"] != "hello" ||
				l.Env["HF_MODEL"] != ContainerSnapshotPath("ttmodel/echo-weights", "0123456789abcdef0123456789abcdef01234567") ||
				!slices.Equal(l.WeightsFiles, []string{"config.json"}) || l.Cwd != "/opt/tt-metal" {
				t.Errorf("echo answered %+v", out)
			}
		}},
		{"dit", inEngine, "quiet", "ttmodel/dit-weights", "89abcdef0123456789abcdef0123456789abcdef", func(t *testing.T, port int) {
			var out map[string]any
			post(t, port, "/v1/generate", `{"prompt": "a cat", "steps": 2}`, &out)
			if out["prompt"] != "a cat" || out["mesh"] != "1x2" || out["mesh_device"] != "P300" ||
				out["model"] != ContainerSnapshotPath("ttmodel/dit-weights", "89abcdef0123456789abcdef0123456789abcdef") {
				t.Errorf("the dit app answered %v", out)
			}
		}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			work := t.TempDir()
			if err := os.CopyFS(work, os.DirFS(filepath.Join(root, "builder", "testdata", "kinds", tc.dir))); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("kinds-%s-e2e-%d", tc.dir, os.Getpid())
			rename(t, filepath.Join(work, "tt-model.yaml"), name)
			t.Cleanup(func() { removeE2EArtifacts(t, d, name) })
			home := t.TempDir()
			env := append(os.Environ(), "HF_HOME="+home, "HF_ENDPOINT=http://127.0.0.1:1", "XDG_CACHE_HOME="+t.TempDir())
			weights := filepath.Join(work, "weights")
			if err := os.MkdirAll(weights, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(weights, "config.json"), []byte(`{"model_type": "demo"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := (hub.Cache{Dir: filepath.Join(home, "hub")}).Import(tc.weights, tc.rev, weights); err != nil {
				t.Fatal(err)
			}

			runTool(t, work, env, tool, "package", "--container", "tt-model.yaml", "--base", tc.base, "--out", "build")
			out := runTool(t, work, env, tool, "serve", filepath.Join("build", name), "--profile", tc.profile, "--timeout", "3m")
			if !strings.Contains(out, name+" is ready: profile "+tc.profile) {
				t.Fatalf("serve said:\n%s", out)
			}
			inst, err := d.Find(context.Background(), InstanceName(name, tc.profile))
			if err != nil || inst == nil {
				t.Fatalf("find the container: %v", err)
			}
			info, err := d.c.ContainerInspect(context.Background(), inst.ID, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The entrypoint is the container's PID 1.
			if c := info.Container; c.Path != "/usr/local/bin/tt-model" || len(c.Args) == 0 || c.Args[0] != "supervise" {
				t.Errorf("PID 1 is %s %q, want the supervisor", c.Path, c.Args)
			}
			// The server's ready line passes through the supervisor before the
			// supervisor logs its own transition: give it a moment.
			var logs bytes.Buffer
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				logs.Reset()
				if err := d.Logs(context.Background(), inst, false, &logs); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(logs.String(), `msg="state ready" from=starting`) || time.Now().After(deadline) {
					break
				}
			}
			if !strings.Contains(logs.String(), `msg="state ready" from=starting`) {
				t.Errorf("the supervisor never saw the ready line:\n%s", logs.String())
			}
			tc.request(t, inst.Port)
			stop := runTool(t, work, env, tool, "stop", name, "--profile", tc.profile)
			if !strings.Contains(stop, "stopped (exit 0) and removed") {
				t.Errorf("stop said:\n%s", stop)
			}
			if gone, err := d.Find(context.Background(), inst.Name); err != nil || gone != nil {
				t.Errorf("after stop: %+v, %v", gone, err)
			}
		})
	}
}

// rename gives the package at file its own name, so the test never touches
// another package's containers.
func rename(t *testing.T, file, name string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	i := strings.Index(y, "\nname: ")
	if i < 0 {
		t.Fatalf("%s has no name:", file)
	}
	j := strings.Index(y[i+1:], "\n")
	y = y[:i+1] + "name: " + name + y[i+1+j:]
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runTool runs the tt-model command in dir and returns its combined output.
func runTool(t *testing.T, dir string, env []string, tool string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tool, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tt-model %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// post sends a JSON request. uvicorn logs "Application startup complete"
// (the kind's ready line, upstream's) just before it binds its socket, so a
// request right after ready may meet the engine's port proxy with nothing
// behind it: transport errors are retried for a few seconds.
func post(t *testing.T, port int, path, body string, out any) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err = c.Post(fmt.Sprintf("http://127.0.0.1:%d%s", port, path), "application/json", strings.NewReader(body))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, b)
	}
}
