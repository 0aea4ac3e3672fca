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

// TestWeightsTestWeightsRefresh: generated test weights imported at the pin are named by import,
// pull and verify; `weights pull --refresh` replaces them with the Hub's files, and refuses (the
// test weights kept) while the Hub cannot be reached. import says it wrote refs/main.
func TestWeightsTestWeightsRefresh(t *testing.T) {
	srv, yamlPath, commit := weightsFixture(t)
	src := t.TempDir()
	for name, data := range map[string]string{"config.json": `{}`, "model.safetensors": "random", ".tt-model-test-weights": "a unit test\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI("weights", "import", src, "org/detector-weights@"+commit)
	if code != 0 || !strings.Contains(out, "wrote refs/main -> "+commit) || !strings.Contains(out, "random test weights, not org/detector-weights (a unit test)") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("weights", "pull", yamlPath)
	if code != 0 || !strings.Contains(out, "complete in the cache, no network used\n") ||
		!strings.Contains(out, "WARNING: random test weights, not org/detector-weights (a unit test)") ||
		!strings.Contains(out, "tt-model weights pull --refresh "+yamlPath) || !strings.Contains(out, "tt-model rm --weights org/detector-weights@"+commit+"` removes them") {
		t.Fatalf("pull of test weights: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI("weights", "verify", yamlPath); code != 0 || !strings.Contains(out, "random test weights, not org/detector-weights") {
		t.Errorf("verify of test weights: exit %d\n%s", code, out)
	}
	snap := filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--detector-weights", "snapshots", commit)

	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	if code, _, errOut = runCLI("weights", "pull", "--refresh", yamlPath); code != 1 || !strings.Contains(errOut, "so they stay") {
		t.Errorf("--refresh with the Hub unreachable: exit %d, %s", code, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(snap, "model.safetensors")); err != nil || string(b) != "random" {
		t.Errorf("the test weights went although the Hub could not replace them: %q, %v", b, err)
	}

	t.Setenv("HF_ENDPOINT", srv.URL)
	code, out, errOut = runCLI("weights", "pull", "--refresh", yamlPath)
	if code != 0 || !strings.Contains(errOut, "removed the random test weights at org/detector-weights@"+commit) || strings.Contains(out, "random test weights") {
		t.Fatalf("--refresh: exit %d\n%s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(snap, "model.safetensors")); err != nil || !bytes.Equal(b, bytes.Repeat([]byte("weights!"), 40_000)) {
		t.Errorf("model.safetensors after --refresh: %d bytes, %v; want the Hub's", len(b), err)
	}
	if _, err := os.Lstat(filepath.Join(snap, ".tt-model-test-weights")); !os.IsNotExist(err) {
		t.Errorf("the marker survived --refresh: %v", err)
	}
	if code, out, _ = runCLI("weights", "verify", yamlPath); code != 0 || strings.Contains(out, "test weights") {
		t.Errorf("verify after --refresh: exit %d\n%s", code, out)
	}
}

// TestRmWeights: `rm --weights ORG/NAME@REV` removes that revision and the refs naming it, leaving
// the repo's other revisions; `rm --weights ORG/NAME` removes the repo; a bad name is exit 2.
func TestRmWeights(t *testing.T) {
	_, yamlPath, commit := weightsFixture(t)
	if code, _, errOut := runCLI("weights", "pull", yamlPath); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "model.safetensors"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("c", 40)
	if code, _, errOut := runCLI("weights", "import", src, "org/detector-weights@"+other); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	repoDir := filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--detector-weights")
	code, out, errOut := runCLI("rm", "--weights", "org/detector-weights@main")
	if code != 0 || !strings.Contains(out, "removed ref main of org/detector-weights") || !strings.Contains(out, "removed org/detector-weights@"+commit) {
		t.Fatalf("rm --weights @main: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Lstat(filepath.Join(repoDir, "snapshots", commit)); !os.IsNotExist(err) {
		t.Errorf("the snapshot is still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(repoDir, "snapshots", other, "model.safetensors")); err != nil || string(b) != "other" {
		t.Errorf("the other revision: %q, %v", b, err)
	}
	if code, _, errOut = runCLI("rm", "--weights", "org/detector-weights@"+commit); code != 1 || !strings.Contains(errOut, "no snapshot") {
		t.Errorf("second rm of the revision: exit %d, %s", code, errOut)
	}
	if code, out, _ = runCLI("rm", "--weights", "org/detector-weights"); code != 0 || !strings.Contains(out, "removed org/detector-weights") {
		t.Errorf("rm --weights of the repo: exit %d\n%s", code, out)
	}
	if _, err := os.Lstat(repoDir); !os.IsNotExist(err) {
		t.Errorf("the repo folder is still there: %v", err)
	}
	if code, _, errOut = runCLI("rm", "--weights", "../etc"); code != 2 {
		t.Errorf("rm --weights ../etc: exit %d, %s", code, errOut)
	}
}
