package runner

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/runner/runnertest"
)

// pi05Golden is runner/testdata/pi05/request_golden.json, written by
// tools/reference/pi05.py request on kernels/pi05/testdata/tiny.
type pi05Golden struct {
	Request struct {
		Images   [][][][3]uint8 `json:"images"` // HxWx3 per camera
		Tokens   []int          `json:"tokens"`
		Noise    [][]float32    `json:"noise"`
		NumSteps int            `json:"num_steps"`
	} `json:"request"`
	ActionsBF16 [][]float64 `json:"actions_bf16"`
}

// TestPI05EndToEnd is the pi0.5 chain as a user runs it, through the
// tt-model CLI: `weights import` of the tiny random pi0.5 checkpoint at the
// pinned revision, `package` of a copy of models/pi05/tt-model.yaml (one
// image for every subtest), then for EVERY profile of that manifest and
// both runners (the Docker engine and `serve --host`): `serve` (which waits
// for /health ok), /health, /v1/actions/generations and /predict answering
// the committed golden request with the golden's actions, then `stop`
// (exit 0). A profile whose environment the server refuses fails its
// subtest with the server's own error, which `serve` prints.
func TestPI05EndToEnd(t *testing.T) {
	d := e2eDocker(t)
	e := packagePI05(t, d, "pi05-e2e", buildBinaries(t))
	golden := readPI05Golden(t)
	for _, kind := range []string{"docker", "host"} {
		for _, profile := range e.Profiles {
			t.Run(kind+"/"+profile, func(t *testing.T) {
				url := e.serve(t, profile, kind == "host")
				checkHealth(t, url)
				checkGenerations(t, url, golden)
				checkPredict(t, url, golden)
				e.stop(t, profile)
			})
		}
	}
}

// pi05E2E is models/pi05 packaged through the CLI (runnertest.PackagePI05)
// with the tt-model-server beside the tt-model that packaged it.
type pi05E2E struct {
	*runnertest.PI05Package
}

// packagePI05 packages a copy of models/pi05 named <tag>-<pid> with bin
// (tt-model, the server to pack beside it); its containers and images are
// removed when the test ends.
func packagePI05(t *testing.T, d *Docker, tag, bin string) *pi05E2E {
	t.Helper()
	name := fmt.Sprintf("%s-%d", tag, os.Getpid())
	t.Cleanup(func() { removeE2EArtifacts(t, d, name) })
	return &pi05E2E{runnertest.PackagePI05(t, repoRoot(t), bin, name)}
}

// serve runs `tt-model serve` of the package's profile (on the bare host
// with host) and returns the URL its ready card prints. The instance is
// stopped when the test ends, whatever happened.
func (e *pi05E2E) serve(t *testing.T, profile string, host bool) string {
	t.Helper()
	args := []string{"serve", e.Dir, "--profile", profile, "--timeout", "3m"}
	if host {
		args = append(args, "--host")
	}
	t.Cleanup(func() { _, _, _ = e.Exec("", "stop", e.Name, "--profile", profile, "--grace", "10s") })
	out, errOut, err := e.Exec("", args...)
	if err != nil {
		t.Fatalf("tt-model %s: %v\n%s\n%s", strings.Join(args, " "), err, out, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "url" {
			return f[1]
		}
	}
	t.Fatalf("serve printed no url:\n%s", out)
	return ""
}

func (e *pi05E2E) stop(t *testing.T, profile string) {
	t.Helper()
	out := e.Run(t, "", "stop", e.Name, "--profile", profile, "--grace", "60s")
	if !strings.Contains(out, "stopped (exit 0)") {
		t.Errorf("stop: %s", out)
	}
}

func readPI05Golden(t *testing.T) *pi05Golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pi05", "request_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g pi05Golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func checkHealth(t *testing.T, url string) {
	t.Helper()
	var h map[string]any
	if code := getJSON(t, url+"/health", &h); code != http.StatusOK || h["status"] != "ok" || h["model"] != "lerobot/pi05_base" {
		t.Errorf("/health: %d %v", code, h)
	}
}

// checkGenerations sends the golden request to SGLang's action API, the
// frames as HxWx3 arrays under camera names in slot order.
func checkGenerations(t *testing.T, url string, g *pi05Golden) {
	t.Helper()
	images := map[string]any{}
	for i, img := range g.Request.Images {
		images[fmt.Sprintf("cam%d", i)] = img
	}
	body := map[string]any{
		"model": "lerobot/pi05_base",
		"input": map[string]any{
			"tokens":      g.Request.Tokens,
			"observation": map[string]any{"images": images, "noise": g.Request.Noise},
		},
		"parameters": map[string]any{"num_inference_steps": g.Request.NumSteps},
	}
	var out struct {
		Data []struct {
			Action struct {
				Values [][]float64 `json:"values"`
			} `json:"action"`
		} `json:"data"`
	}
	if code := postJSON(t, url+"/v1/actions/generations", body, &out); code != http.StatusOK || len(out.Data) != 1 {
		t.Fatalf("/v1/actions/generations: HTTP %d, %d results", code, len(out.Data))
	}
	compareActions(t, "/v1/actions/generations", out.Data[0].Action.Values, g.ActionsBF16)
}

// checkPredict sends the golden request to the seed's /predict, the frames
// as base64 PNGs (lossless, so the pixels are the golden's).
func checkPredict(t *testing.T, url string, g *pi05Golden) {
	t.Helper()
	var frames []string
	for _, img := range g.Request.Images {
		frames = append(frames, pngBase64(t, img))
	}
	body := map[string]any{"images": frames, "tokens": g.Request.Tokens, "noise": g.Request.Noise, "num_steps": g.Request.NumSteps}
	var out struct {
		Actions [][]float64 `json:"actions"`
		Steps   int         `json:"denoising_steps"`
	}
	if code := postJSON(t, url+"/predict", body, &out); code != http.StatusOK || out.Steps != g.Request.NumSteps {
		t.Fatalf("/predict: HTTP %d, %d denoising steps", code, out.Steps)
	}
	compareActions(t, "/predict", out.Actions, g.ActionsBF16)
}

func compareActions(t *testing.T, route string, got, want [][]float64) {
	t.Helper()
	if len(got) != len(want) || len(got) == 0 || len(got[0]) != len(want[0]) {
		t.Fatalf("%s: actions %dx%d, golden %dx%d", route, len(got), len(first(got)), len(want), len(first(want)))
	}
	worst, at := 0.0, [2]int{}
	for r := range want {
		for c := range want[r] {
			if d := math.Abs(got[r][c] - want[r][c]); d > worst || math.IsNaN(d) {
				worst, at = d, [2]int{r, c}
			}
		}
	}
	if !(worst <= runnertest.PI05GoldenTolerance) {
		t.Errorf("%s: actions differ from the golden by %g at [%d][%d] (%g vs %g), want <= %g",
			route, worst, at[0], at[1], got[at[0]][at[1]], want[at[0]][at[1]], runnertest.PI05GoldenTolerance)
	}
}

func first(rows [][]float64) []float64 {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

func pngBase64(t *testing.T, img [][][3]uint8) string {
	t.Helper()
	h, w := len(img), len(img[0])
	rgba := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			o := rgba.PixOffset(x, y)
			copy(rgba.Pix[o:o+3], img[y][x][:])
			rgba.Pix[o+3] = 255
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, rgba); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

var e2eHTTP = &http.Client{Timeout: 2 * time.Minute}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := e2eHTTP.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return decodeResponse(t, url, resp, out)
}

func postJSON(t *testing.T, url string, body, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e2eHTTP.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return decodeResponse(t, url, resp, out)
}

func decodeResponse(t *testing.T, url string, resp *http.Response, out any) int {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Logf("%s: HTTP %d: %s", url, resp.StatusCode, b)
		return resp.StatusCode
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %.300s", url, err, b)
	}
	return resp.StatusCode
}
