package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/rfdetr"
)

// rfdetrPin is the weights revision models/rf-detr/tt-model.yaml pins.
const rfdetrPin = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"

// hangProfile is appended to a copy of models/rf-detr/tt-model.yaml: the
// server's test-only fault switch makes it exit 75 after each prediction.
const hangProfile = `
serve_profiles:
  - name: default
  - name: hang
    description: test only; the server exits 75 after each prediction
    env: {TT_MODEL_FAULT_EXIT_AFTER: "1"}
default_profile: default
`

// TestRFDETREndToEnd packages models/rf-detr with this tree's tt-model and
// tt-model-server, puts a random full-size checkpoint in the HF cache at the
// pinned revision (its detections are meaningless), serves it on the Docker
// engine, posts an image to /predict and stops it. Then the hang chain: the
// server exits 75 after a prediction and the supervisor inside the container
// starts it again, ready and answering, while the engine never restarts the
// container. (The container has no chips, so the supervisor skips the reset
// command and the chip check; with chips it runs them between the two.)
func TestRFDETREndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("packages and serves the real server: skipped with -short")
	}
	ctx := context.Background()
	d, err := ConnectDocker(ctx)
	if err != nil {
		t.Skipf("needs a Docker engine: %v", err)
	}
	defer d.Close()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(filepath.Join(root, "models", "rf-detr", "tt-model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A name of its own, so the test never touches a real rf-detr server.
	name := fmt.Sprintf("rf-detr-e2e-%d", os.Getpid())
	if !bytes.Contains(yaml, []byte("\nname: rf-detr\n")) {
		t.Fatal("models/rf-detr/tt-model.yaml no longer says `name: rf-detr`; update this test")
	}
	yaml = bytes.Replace(yaml, []byte("\nname: rf-detr\n"), []byte("\nname: "+name+"\n"), 1)
	work := t.TempDir()
	manifestPath := filepath.Join(work, "tt-model.yaml")
	if err := os.WriteFile(manifestPath, append(yaml, hangProfile...), 0o644); err != nil {
		t.Fatal(err)
	}
	ttModel := buildTTModel(t)
	pkgCmd := exec.Command(ttModel, "package", "--container", manifestPath, "--out", filepath.Join(work, "build"))
	pkgCmd.Dir = root // source.extra_code roots resolve against the working directory
	if out, err := pkgCmd.CombinedOutput(); err != nil {
		t.Fatalf("tt-model package: %v\n%s", err, out)
	}
	pkg, err := LoadPackage(filepath.Join(work, "build", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range []string{"default", "hang"} {
			d.c.ContainerRemove(ctx, InstanceName(name, p), client.ContainerRemoveOptions{Force: true})
		}
		d.c.ImageRemove(ctx, pkg.Wire.Container.Image.Tag, client.ImageRemoveOptions{Force: true})
	})

	// The real weights cannot be downloaded here: a random checkpoint stands in.
	ckpt := filepath.Join(work, "checkpoint")
	if err := (rfdetr.RandomCheckpoint{Seed: 7}).Write(ckpt); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cfg := hub.Config{Endpoint: "http://127.0.0.1:1", HFHome: home, CacheDir: filepath.Join(home, "hub")}
	if _, err := (hub.Cache{Dir: cfg.CacheDir}).Import("Roboflow/rf-detr-base", rfdetrPin, ckpt); err != nil {
		t.Fatal(err)
	}
	snaps, err := PullWeights(ctx, hub.NewClient(cfg), pkg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(profile string) (*Spec, *Instance) {
		t.Helper()
		others, err := d.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		opts := PlanOptions{Profile: profile, CacheRoot: t.TempDir(), DevDir: filepath.Join(work, "no-chips")}
		spec, inst, err := Serve(ctx, d, pkg, others, opts, func(s *Spec) error {
			s.HF, s.Weights = cfg, snaps
			return nil
		}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if err := WaitReady(ctx, d, inst, spec.Launch, 5*time.Minute, &logs); err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		return spec, inst
	}

	_, inst := serve("default")
	if n, err := predict(inst.Port); err != nil || n < 1 {
		t.Fatalf("/predict: %d detections, %v", n, err)
	}
	if res, err := d.Stop(ctx, inst, 2*time.Minute, io.Discard); err != nil || res.ExitCode != 0 {
		t.Fatalf("stop: %+v, %v", res, err)
	}

	_, inst = serve("hang")
	if n, err := predict(inst.Port); err != nil || n < 1 {
		t.Fatalf("/predict before the hang: %d detections, %v", n, err)
	}
	// The server exits 75 now; wait (bounded) for the supervisor to bring it back.
	health := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/health", inst.Port)
	var out bytes.Buffer
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		out.Reset()
		if err := d.Logs(ctx, inst, false, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Count(out.String(), "server spawned") >= 2 && healthOK(ctx, health, url) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back after exit 75:\n%s", out.String())
		}
	}
	if n, err := predict(inst.Port); err != nil || n < 1 {
		t.Fatalf("/predict after the restart: %d detections, %v", n, err)
	}
	cur, err := d.Find(ctx, inst.Name)
	if err != nil || cur == nil || cur.Restarts != 0 || !cur.Running {
		t.Errorf("container after the hang: %+v, %v; want running, never restarted by the engine", cur, err)
	}
	if !strings.Contains(out.String(), "exit 75") {
		t.Errorf("container output does not show the server's exit 75:\n%s", out.String())
	}
	if _, err := d.Stop(ctx, inst, 2*time.Minute, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// predict posts a small generated PNG and returns the number of detections.
func predict(port int) (int, error) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := 0; y < 48; y++ {
		for x := 0; x < 64; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 5), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return 0, err
	}
	body, err := json.Marshal(map[string]any{"image": base64.StdEncoding.EncodeToString(buf.Bytes()), "threshold": 0.0, "max_detections": 5})
	if err != nil {
		return 0, err
	}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/predict", port), "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Detections []json.RawMessage `json:"detections"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("decode %s: %w", b, err)
	}
	return len(out.Detections), nil
}
