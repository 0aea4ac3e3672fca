package commands

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

// curl --print writes the sample body to a fresh private file: a link
// planted at the old predictable /tmp/tt-model-curl-<pkg>.json is never
// followed, and nobody else can read the body.
func TestCurlPrintUsesPrivateTempFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/info" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"task":"object-detection"}`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(tmp, "tt-model-curl-rf-detr.json")); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	inst := &runner.Instance{Name: "rf-detr-p150", Package: "rf-detr", Running: true, Port: p}
	if err := curlInstance(cmd, inst, curlOptions{print: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the planted link was followed: victim now holds %q", b)
	}
	_, file, ok := strings.Cut(out.String(), "-d @")
	if !ok {
		t.Fatalf("no -d @FILE in %q", out.String())
	}
	file = strings.TrimSpace(file)
	fi, err := os.Lstat(file)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || filepath.Dir(file) != tmp {
		t.Errorf("%s: mode %v in %s, want a regular 0600 file in %s", file, fi.Mode(), filepath.Dir(file), tmp)
	}
	if b, _ := os.ReadFile(file); !bytes.Contains(b, []byte(`"image"`)) {
		t.Errorf("%s does not hold the sample body: %.80q", file, b)
	}
}

// curl's summary of a /predict answer: the detector's count above its
// threshold and its top detections, the policy's chunk shape and first
// action; an answer of another shape as it came.
func TestSummarizePredict(t *testing.T) {
	var dets []string
	for i := range 7 {
		dets = append(dets, fmt.Sprintf(`{"label": "cup", "label_id": 47, "score": 0.9%d, "box": [1, 2, 30, 40]}`, 9-i))
	}
	detector := `{"detections": [` + strings.Join(dets, ",") + `], "num_detections": 7, "threshold": 0.5, "timing_ms": {"total": 41.6}}`
	policy := `{"actions": [[0.12345, -1, 2, 3, 4], [0, 0, 0, 0, 0]], "action_horizon": 2, "action_dim": 5, "denoising_steps": 10}`
	for _, c := range []struct {
		answer string
		want   []string
	}{
		{detector, []string{"7 detections above threshold 0.5 (42 ms)", "cup            0.990  box [1 2 30 40]", "… 2 more (--json shows all)"}},
		{`{"detections": [], "num_detections": 0, "threshold": 0.9}`, []string{"0 detections above threshold 0.9"}},
		{policy, []string{"action chunk 2x5 (horizon x action dim), 10 denoising steps", "first action [0.1235 -1.0000 2.0000 3.0000] …"}},
		{`{"other": 1}`, []string{`{"other": 1}`}},
		{`not json`, []string{"not json"}},
	} {
		got := summarizePredict([]byte(c.answer))
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("summary of %.40s… lacks %q:\n%s", c.answer, w, got)
			}
		}
	}
	if got := summarizeModels([]byte(`{"object": "list", "data": [{"id": "Roboflow/rf-detr-base"}]}`)); got != "model Roboflow/rf-detr-base" {
		t.Errorf("summarizeModels = %q", got)
	}
}

// A printed curl command reads the key where it is kept, never shows it.
func TestCurlAuth(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := curlAuth("", getenv); got != "" {
		t.Errorf("no key: %q", got)
	}
	env["TT_API_KEY"] = "secret"
	if got := curlAuth("", getenv); got != ` -H "Authorization: Bearer $TT_API_KEY"` {
		t.Errorf("TT_API_KEY: %q", got)
	}
	if got := curlAuth("/k/key", getenv); got != ` -H "Authorization: Bearer $(cat /k/key)"` || strings.Contains(got, "secret") {
		t.Errorf("--api-key-file: %q", got)
	}
}
