package commands

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/manifest"
)

// weightsFixture serves two weights repos from a local Hub and writes a
// tt-model.yaml pinning them.
func weightsFixture(t *testing.T) (srv *hubtest.Server, yamlPath, commit string) {
	t.Helper()
	srv = hubtest.New()
	t.Cleanup(srv.Close)
	commit = srv.AddCommit("org/detector-weights", "main", []hubtest.File{
		{Path: "config.json", Data: []byte(`{"num_queries": 300}`)},
		{Path: "model.safetensors", Data: bytes.Repeat([]byte("weights!"), 40_000), LFS: true},
		{Path: "README.md", Data: []byte("# not selected by allow_patterns\n")},
	})
	aux := srv.AddCommit("org/aux", "main", []hubtest.File{{Path: "tokenizer.json", Data: []byte(`{}`)}})
	tmpl, err := os.ReadFile("testdata/weights/tt-model.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("{{COMMIT}}", commit, "{{AUXCOMMIT}}", aux).Replace(string(tmpl))
	yamlPath = filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := os.WriteFile(yamlPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	return srv, yamlPath, commit
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestWeightsPull(t *testing.T) {
	srv, yamlPath, commit := weightsFixture(t)
	code, out, errOut := runCLI("weights", "pull", yamlPath, "--profile", "fast")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	snap := filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--detector-weights", "snapshots", commit)
	for _, want := range []string{
		"org/detector-weights@" + commit + "  2 files",
		"org/aux@",
		"profile fast: the server gets HF_MODEL=" + snap,
		"/hf/hub/models--org--detector-weights/snapshots/" + commit,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Lstat(filepath.Join(snap, "README.md")); err == nil {
		t.Error("README.md downloaded although allow_patterns exclude it")
	}
	ref, err := os.ReadFile(filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--detector-weights", "refs", "main"))
	if err != nil || string(ref) != commit {
		t.Errorf("refs/main = %q, %v; want the pinned commit", ref, err)
	}

	// The pin is complete: a staged package folder pulls with the Hub gone.
	m, err := manifest.Load(yamlPath, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	staged := t.TempDir()
	if err := m.ToWire(manifest.WireInfo{}).WriteFile(filepath.Join(staged, manifest.WireFile)); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	code, out, errOut = runCLI("weights", "pull", staged)
	if code != 0 {
		t.Fatalf("offline re-pull: exit %d: %s", code, errOut)
	}
	if strings.Count(out, "no network used") != 2 {
		t.Errorf("want both repos answered from the cache:\n%s", out)
	}
}

func TestWeightsPullErrors(t *testing.T) {
	_, yamlPath, _ := weightsFixture(t)
	bad := filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := os.WriteFile(bad, []byte("schema: \"5.1\"\nname: x\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"unknown profile", []string{yamlPath, "--profile", "nope"}, nil, 2, "nope"},
		{"invalid manifest", []string{bad}, nil, 2, "bogus"},
		{"missing path", []string{filepath.Join(t.TempDir(), "none")}, nil, 1, "no such file"},
		{"offline and empty cache", []string{yamlPath}, map[string]string{"HF_HUB_OFFLINE": "1"}, 1, "HF_HUB_OFFLINE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, _, errOut := runCLI(append([]string{"weights", "pull"}, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, errOut, c.code, c.want)
			}
		})
	}
}

func TestWeightsImportThenPullOffline(t *testing.T) {
	_, yamlPath, commit := weightsFixture(t)
	src := t.TempDir()
	for name, data := range map[string]string{"config.json": `{"num_queries": 300}`, "model.safetensors": "local weights"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI("weights", "import", src, "org/detector-weights@"+commit)
	if code != 0 || !strings.Contains(out, "2 files imported") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	// The primary pin is now complete locally; only the auxiliary repo needs the Hub.
	code, out, errOut = runCLI("weights", "pull", yamlPath)
	if code != 0 || !strings.Contains(out, "org/detector-weights@"+commit+"  2 files  complete in the cache, no network used") {
		t.Errorf("pull after import: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = runCLI("weights", "import", src, "org/detector-weights"); code != 2 || !strings.Contains(errOut, "ORG/NAME@COMMIT") {
		t.Errorf("import without a commit: exit %d, %q", code, errOut)
	}
}

// TestWeightsPullChild is the `tt-model weights pull` that
// TestWeightsPullKilledResumes runs as a separate process and kills.
func TestWeightsPullChild(t *testing.T) {
	manifestPath := os.Getenv("TT_WEIGHTS_TEST_CHILD")
	if manifestPath == "" {
		t.Skip("runs only as the child of TestWeightsPullKilledResumes")
	}
	code, _, errOut := runCLI("weights", "pull", manifestPath)
	t.Fatalf("the pull was meant to be killed; it exited %d: %s", code, errOut)
}

func TestWeightsPullKilledResumes(t *testing.T) {
	srv, yamlPath, commit := weightsFixture(t)
	big := srv.AddCommit("org/detector-weights", "big", []hubtest.File{
		{Path: "config.json", Data: []byte(`{}`)},
		{Path: "model.safetensors", Data: bytes.Repeat([]byte("0123456789abcdef"), 256<<10), LFS: true}, // 4 MiB
	})
	text, err := os.ReadFile(yamlPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(yamlPath, bytes.Replace(text, []byte(commit), []byte(big), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	const stall = 1 << 20
	srv.StallAfter(stall)
	data := bytes.Repeat([]byte("0123456789abcdef"), 256<<10)
	blob := filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--detector-weights", "blobs", hubtest.SHA256(data))

	child := exec.Command(os.Args[0], "-test.run=^TestWeightsPullChild$")
	child.Env = append(os.Environ(), "TT_WEIGHTS_TEST_CHILD="+yamlPath)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken child from hanging the suite.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(blob + ".incomplete"); err == nil && fi.Size() == stall {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatal("the child never wrote the first MiB")
		}
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()

	srv.StallAfter(0)
	code, out, errOut := runCLI("weights", "pull", yamlPath)
	if code != 0 || !strings.Contains(out, "org/detector-weights@"+big) {
		t.Fatalf("re-run: exit %d\n%s%s", code, out, errOut)
	}
	var resumed bool
	for _, r := range srv.Requests() {
		resumed = resumed || (r.Host == "storage" && strings.HasSuffix(r.Path, "/"+hubtest.SHA256(data)) && r.Range == fmt.Sprintf("bytes=%d-", stall))
	}
	if !resumed {
		t.Errorf("the re-run did not resume with Range: bytes=%d-: %+v", stall, srv.Requests())
	}
	if got, err := os.ReadFile(blob); err != nil || !bytes.Equal(got, data) {
		t.Errorf("blob after resume: %d bytes, %v", len(got), err)
	}
}

func TestWeightsPullUnparsableAnswer(t *testing.T) {
	_, yamlPath, _ := weightsFixture(t)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/tree/") {
			io.WriteString(w, `[{"type": "file", "path": "model.safetensors", "size": 10, "oid": "not-a-sha"}]`)
			return
		}
		http.NotFound(w, r)
	}))
	defer bad.Close()
	t.Setenv("HF_ENDPOINT", bad.URL)
	code, _, errOut := runCLI("weights", "pull", yamlPath)
	if code == 0 || !strings.Contains(errOut, bad.URL+"/api/models/org/detector-weights/tree/") || !strings.Contains(errOut, "[0].oid") {
		t.Errorf("exit %d, stderr %q; want non-zero naming the tree endpoint and [0].oid", code, errOut)
	}
}

func TestWeightsPullOfflineSendsNoRequest(t *testing.T) {
	srv, yamlPath, _ := weightsFixture(t)
	if code, _, errOut := runCLI("weights", "pull", yamlPath); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut)
	}
	before := len(srv.Requests())
	t.Setenv("HF_HUB_OFFLINE", "1")
	code, out, errOut := runCLI("weights", "pull", yamlPath)
	if code != 0 || strings.Count(out, "no network used") != 2 {
		t.Errorf("offline pull of a complete pin: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(srv.Requests()) - before; n != 0 {
		t.Errorf("%d requests with HF_HUB_OFFLINE=1", n)
	}
}

func TestWeightsVerify(t *testing.T) {
	_, yamlPath, commit := weightsFixture(t)
	if code, _, errOut := runCLI("weights", "pull", yamlPath); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCLI("weights", "verify", yamlPath)
	if code != 0 || !strings.Contains(out, "org/detector-weights@"+commit+"  2 files, 2 hashed  ok") {
		t.Fatalf("verify of a good cache: exit %d\n%s%s", code, out, errOut)
	}
	blob := filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--detector-weights", "snapshots", commit, "model.safetensors")
	fi, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(blob)
	b[100] ^= 1
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(blob, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI("weights", "verify", yamlPath)
	if code != 1 || !strings.Contains(out, "corrupt  model.safetensors: sha256 mismatch") {
		t.Errorf("verify of a flipped byte: exit %d\n%s", code, out)
	}
	// --quick hashes the small git file, and trusts the LFS blob whose size and mtime did not change.
	if code, out, _ = runCLI("weights", "verify", yamlPath, "--quick"); code != 0 || !strings.Contains(out, "2 files, 1 hashed  ok") {
		t.Errorf("--quick trusts the unchanged size and mtime: exit %d\n%s", code, out)
	}
	// A changed mtime is caught by the next pull, which fetches the file again.
	if err := os.Chtimes(blob, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI("weights", "pull", yamlPath)
	if code != 0 || !strings.Contains(out, "org/detector-weights@"+commit+"  2 files  312.5 KiB downloaded") {
		t.Fatalf("pull after the change: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI("weights", "verify", yamlPath); code != 0 {
		t.Errorf("verify after the re-download: exit %d\n%s", code, out)
	}
}
