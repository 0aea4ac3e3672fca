package commands

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/kubetest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
)

// TestK8sAcceptance checks the k8s commands end to end against a real API server:
// `tt-model k8s render build/rf-detr | kubectl apply --dry-run=server -f -`
// works, `k8s apply` creates the objects, `k8s status` reads them back and
// `k8s delete` removes them.
func TestK8sAcceptance(t *testing.T) {
	testenv.Require(t, "kubectl")
	srv := kubetest.Run(t)
	pkg := kubetest.StagedPackage(t, "..", "rf-detr", nil)

	code, yaml, errOut := run(t, "k8s", "render", pkg, "--registry", "registry.example/ml")
	if code != 0 {
		t.Fatalf("render: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "pod security: the pods meet Pod Security level restricted") || !strings.Contains(errOut, "chips: dra (render's default") {
		t.Errorf("render did not print the Pod Security level: %q", errOut)
	}
	kubectl := exec.Command("kubectl", "--kubeconfig", srv.Kubeconfig, "apply", "--dry-run=server", "-f", "-")
	kubectl.Stdin = strings.NewReader(yaml)
	out, err := kubectl.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{"configmap/rf-detr-default-manifest created (server dry run)",
		"resourceclaimtemplate.resource.k8s.io/rf-detr-default-chips created (server dry run)", "service/rf-detr-default created (server dry run)",
		"service/rf-detr-default-pods created (server dry run)", "statefulset.apps/rf-detr-default created (server dry run)"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("kubectl said %s, want a line %q", out, want)
		}
	}
	if bytes.Contains(bytes.ToLower(out), []byte("warning")) {
		t.Errorf("kubectl reported a warning:\n%s", out)
	}

	kc := "--kubeconfig=" + srv.Kubeconfig
	code, stdout, errOut := run(t, "k8s", "apply", pkg, kc, "--replicas", "2", "--registry", "registry.example/ml")
	if code != 0 || !strings.Contains(stdout, "StatefulSet default/rf-detr-default applied") || strings.Contains(errOut, "warning") ||
		!strings.Contains(errOut, "chips: dra (what the API server serves") || !strings.Contains(stdout, "ResourceClaimTemplate default/rf-detr-default-chips applied") {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, errOut)
	}
	code, stdout, errOut = run(t, "k8s", "status", "rf-detr-default", kc)
	if code != 0 || !strings.Contains(stdout, "rf-detr-default in namespace default: 0/2 replicas ready") ||
		!strings.Contains(stdout, "@"+kubetest.FakeDigest) || strings.Count(stdout, "no pod") != 2 {
		t.Fatalf("status: exit %d\n%s%s", code, stdout, errOut)
	}
	code, stdout, errOut = run(t, "k8s", "status", pkg, kc, "--json")
	if code != 0 || !strings.Contains(stdout, `"replicas": 2`) {
		t.Fatalf("status --json of the package: exit %d\n%s%s", code, stdout, errOut)
	}
	code, stdout, errOut = run(t, "k8s", "delete", pkg, kc)
	if code != 0 || strings.Count(stdout, "deleted") != 5 || !strings.Contains(stdout, "ResourceClaimTemplate/rf-detr-default-chips deleted") {
		t.Fatalf("delete: exit %d\n%s%s", code, stdout, errOut)
	}
	code, _, errOut = run(t, "k8s", "status", "rf-detr-default", kc)
	if code != 1 || !strings.Contains(errOut, "no tt-model objects labelled app.kubernetes.io/instance=rf-detr-default in namespace default") {
		t.Errorf("status after delete: exit %d: %s", code, errOut)
	}
}

// TestK8sBadInput: each bad input is one clear error and its exit code.
func TestK8sBadInput(t *testing.T) {
	pkg := kubetest.StagedPackage(t, "..", "rf-detr", nil)
	noDigest := kubetest.StagedPackage(t, "..", "rf-detr", func(w *manifest.Wire) { w.Container.Image.Digest = "" })

	// A server that is not an API server: it answers 404 to /version.
	notKube := httptest.NewServer(http.NotFoundHandler())
	defer notKube.Close()
	dir := t.TempDir()
	kubeconfig := func(name, server string) string {
		path := filepath.Join(dir, name)
		cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
			"\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dead := kubeconfig("dead", "https://127.0.0.1:1")
	wrong := kubeconfig("wrong", notKube.URL)

	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"k8s", "render", pkg, "--profile", "fast"}, 2, `no serve profile named "fast"; available: default`},
		{[]string{"k8s", "render", pkg}, 2, `image.registry is "hf", which no node can pull from: push the image (tt-model push --registry HOST/NS) and render with --registry HOST/NS, or load it onto the nodes and name it with --image-name`},
		{[]string{"k8s", "render", pkg, "--registry", "r.example", "--chips", "gpu"}, 2, `--chips "gpu": want one of dra, device-plugin, none`},
		{[]string{"k8s", "render", noDigest}, 2, "container.image.digest is empty"},
		{[]string{"k8s", "render", "../models/rf-detr/tt-model.yaml"}, 2, "is an authored manifest: render needs a staged package"},
		{[]string{"k8s", "render", pkg, "--cache-size", "lots"}, 2, `--cache-size "lots"`},
		{[]string{"k8s", "render", pkg, "--registry", "r.example", "--hf-endpoint", "https://user:tok@hf.example"}, 2, `--hf-endpoint "https://user:tok@hf.example": want an http(s) URL`},
		{[]string{"k8s", "apply", pkg, "--kubeconfig", dead}, 1, "the API server https://127.0.0.1:1 (kubeconfig " + dead + `, context "x") does not answer`},
		{[]string{"k8s", "status", "x", "--kubeconfig", wrong}, 1, "the API server " + notKube.URL},
		{[]string{"k8s", "delete", "x", "--kubeconfig", filepath.Join(dir, "missing")}, 1, "missing (no current context): no such file"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args[:2], " ")+" "+tc.want, func(t *testing.T) {
			code, _, errOut := run(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}

// TestK8sRenderOut writes one file per object and nothing on a failed render.
func TestK8sRenderOut(t *testing.T) {
	pkg := kubetest.StagedPackage(t, "..", "pi05", nil)
	out := filepath.Join(t.TempDir(), "deploy")
	code, stdout, errOut := run(t, "k8s", "render", pkg, "--profile", "single-robot", "--out", out, "--registry", "registry.example/ml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{"configmap-pi05-single-robot-manifest.yaml", "resourceclaimtemplate-pi05-single-robot-chips.yaml",
		"service-pi05-single-robot.yaml", "service-pi05-single-robot-pods.yaml", "statefulset-pi05-single-robot.yaml"}
	for _, f := range want {
		if !strings.Contains(stdout, filepath.Join(out, f)) {
			t.Errorf("stdout %q lacks %s", stdout, f)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "statefulset-pi05-single-robot.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("image: registry.example/ml/pi05@"+kubetest.FakeDigest)) || !bytes.Contains(data, []byte("value: sp")) {
		t.Errorf("statefulset file:\n%s", data)
	}
	if strings.Contains(errOut, "image.registry") {
		t.Errorf("a pushed image drew the registry note: %q", errOut)
	}
	if !strings.Contains(errOut, "carries no tt-smi") {
		t.Errorf("no note that a scratch image cannot reset chips: %q", errOut)
	}

	// A file that cannot be replaced (a folder stands at its path) fails the
	// render and leaves no temporary file in the folder.
	blocked := filepath.Join(t.TempDir(), "deploy")
	if err := os.MkdirAll(filepath.Join(blocked, "service-pi05-single-robot.yaml", "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "k8s", "render", pkg, "--profile", "single-robot", "--out", blocked, "--registry", "registry.example/ml")
	if code == 0 || !strings.Contains(errOut, "service-pi05-single-robot.yaml") {
		t.Errorf("render over a blocked file: exit %d, stderr %q; want a failure naming the file", code, errOut)
	}
	ents, err := os.ReadDir(blocked)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a failed render left %s in %s", e.Name(), blocked)
		}
	}
}
