package commands

import (
	"bytes"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// hubEnv starts a local Hub accepting acme's write token and points the CLI
// at it with a fresh HF_HOME and tt-model cache.
func hubEnv(t *testing.T) *hubtest.Server {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("write-token", hubtest.Token{User: "acme", Write: true})
	srv.AddToken("read-token", hubtest.Token{User: "acme"})
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "write-token")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	return srv
}

// stagedWithCode is runnertest's staged package plus a code/ folder: source
// files and n binary files (LFS on the Hub), so pushes send several objects.
func stagedWithCode(t *testing.T, name string, n int) string {
	t.Helper()
	// Nothing here is served: any executable file stands in for the server.
	server := filepath.Join(t.TempDir(), "tt-model-server")
	if err := os.WriteFile(server, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, _ := runnertest.StagedPackage(t, name, server, strings.Repeat("a", 40))
	r := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{"code/go.mod": []byte("module demo\n"), "code/cmd/main.go": []byte("package main\n\nfunc main() {}\n")}
	for i := 0; i < n; i++ {
		b := make([]byte, 200_000)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		files[filepath.Join("code", "testdata", "blob"+string(rune('a'+i))+".bin")] = b
	}
	for p, b := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHubRoundTripCLI pushes, pulls, lists, summarizes and removes a package
// through the CLI against a local Hub, and checks the cache pull writes is
// laid out exactly as huggingface_hub lays it out.
func TestHubRoundTripCLI(t *testing.T) {
	srv := hubEnv(t)
	dir := stagedWithCode(t, "hubcli", 3)
	weights := strings.Repeat("a", 40) // the commit stagedWithCode pins
	srv.AddCommitAt("org/weights", "main", weights, []hubtest.File{
		{Path: "config.json", Data: []byte(`{}`)}, {Path: "model.safetensors", Data: []byte("weights"), LFS: true}})
	code, out, errOut := runCLI("push", dir, "--repo", "acme/hubcli")
	if code != 0 || !strings.Contains(out, "acme/hubcli pushed") || !strings.Contains(out, "private, created now") ||
		!strings.Contains(out, "commit    "+srv.URL+"/acme/hubcli/commit/") || !strings.Contains(out, "tt-model serve acme/hubcli") {
		t.Fatalf("push: exit %d\n%s%s", code, out, errOut)
	}
	head := srv.Head("acme/hubcli", "main")
	if code, out, _ = runCLI("push", dir, "--repo", "acme/hubcli"); code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("second push: exit %d\n%s", code, out)
	}
	code, out, errOut = runCLI("pull", "acme/hubcli")
	if code != 0 || !strings.Contains(out, "acme/hubcli@"+head) || !strings.Contains(out, "(blobs verified)") {
		t.Fatalf("pull: exit %d\n%s%s", code, out, errOut)
	}
	checkHFCacheLayout(t, filepath.Join(os.Getenv("HF_HOME"), "hub"), "acme/hubcli", head, srv.Files("acme/hubcli", "main"))

	if code, out, _ = runCLI("list"); code != 0 || !strings.Contains(out, "acme/hubcli") || !strings.Contains(out, "main ("+head[:12]+")") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI("info", "acme/hubcli"); code != 0 || !strings.Contains(out, "hubcli") || !strings.Contains(out, "org/weights@") ||
		!strings.Contains(out, "(not in the cache)") {
		t.Errorf("info: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI("profiles", "acme/hubcli"); code != 0 || !strings.Contains(out, "default (default)") || !strings.Contains(out, "stubborn") {
		t.Errorf("profiles of a pulled package: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI("profiles", dir); code != 0 || !strings.Contains(out, "stubborn") {
		t.Errorf("profiles of a built package: exit %d\n%s", code, out)
	}
	// --print shows the host command with the server args after --, and runs nothing.
	code, out, errOut = runCLI("serve", "acme/hubcli", "--host", "--print", "--local-only", "--", "--log-level", "debug")
	if code != 0 || !strings.Contains(out, "supervise") || !strings.Contains(out, "--log-level debug") ||
		!strings.Contains(errOut, "the weights are not in the HF cache yet") {
		t.Errorf("serve --print: exit %d\n%s%s", code, out, errOut)
	}
	// serve listens on loopback unless --bind says otherwise; --api-key-file
	// gives the server the file, never the key; a server flag it lacks is
	// refused before anything runs.
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte("the-key-itself\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI("serve", "acme/hubcli", "--host", "--print", "--local-only", "--api-key-file", keyFile)
	if code != 0 || !strings.Contains(out, "TT_API_KEY_FILE="+keyFile+" ") || !strings.Contains(out, "--host 127.0.0.1") ||
		strings.Contains(out+errOut, "the-key-itself") {
		t.Errorf("serve --print --api-key-file: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI("serve", "acme/hubcli", "--host", "--print", "--local-only", "--bind", "0.0.0.0"); code != 0 || !strings.Contains(out, "--host 0.0.0.0") {
		t.Errorf("serve --print --bind 0.0.0.0: exit %d\n%s", code, out)
	}
	if code, _, errOut = runCLI("serve", "acme/hubcli", "--host", "--print", "--local-only", "--", "--threads", "3"); code != exitUsage ||
		!strings.Contains(errOut, "flag provided but not defined: -threads") {
		t.Errorf("serve -- --threads 3: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
	// --no-weights leaves HF_MODEL the repo id; --refresh asks the Hub again.
	before := len(srv.Requests())
	code, out, errOut = runCLI("serve", "acme/hubcli", "--host", "--print", "--no-weights", "--refresh")
	if code != 0 || !strings.Contains(out, "HF_MODEL=org/weights ") || !strings.Contains(errOut, "--no-weights: the weights are not pulled") ||
		len(srv.Requests()) == before {
		t.Errorf("serve --print --no-weights --refresh: exit %d, %d requests\n%s%s", code, len(srv.Requests())-before, out, errOut)
	}
	if code, out, errOut = runCLI("pull", "acme/hubcli", "--with-weights"); code != 0 || !strings.Contains(out, "weights  org/weights@"+weights+"  2 files") {
		t.Errorf("pull --with-weights: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI("list"); code != 0 || !strings.Contains(out, "present") {
		t.Errorf("list after pulling the weights: exit %d\n%s", code, out)
	}
	// With the weights cached, HF_MODEL names their pinned snapshot folder.
	code, out, errOut = runCLI("serve", "acme/hubcli", "--host", "--print", "--local-only")
	if snap := filepath.Join(os.Getenv("HF_HOME"), "hub", "models--org--weights", "snapshots", weights); code != 0 || !strings.Contains(out, "HF_MODEL="+snap) {
		t.Errorf("serve --print with the weights cached: exit %d, want HF_MODEL=%s\n%s%s", code, snap, out, errOut)
	}
	if code, out, _ = runCLI("rm", "acme/hubcli"); code != 0 || !strings.Contains(out, "removed acme/hubcli") {
		t.Errorf("rm: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI("list"); code != 0 || strings.Contains(out, "acme/hubcli") {
		t.Errorf("list after rm: exit %d\n%s", code, out)
	}
}

// checkHFCacheLayout builds the expected cache tree of one pulled commit
// from huggingface_hub's documented rules (a blob per file named by its
// etag: the sha256 of an LFS file, the git blob sha1 of any other;
// refs/main holding the commit; snapshot entries as relative links to
// ../../blobs/<etag>, one more ../ per folder level; trees/<commit>.json the
// file list) and compares it with what is on disk.
func checkHFCacheLayout(t *testing.T, cacheDir, repo, commit string, files []hubtest.File) {
	t.Helper()
	repoDir := filepath.Join(cacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
	want := map[string]string{
		"refs/main":                 "file " + commit,
		"trees/" + commit + ".json": "file",
		".tt-model/verified":        "dir",
		"snapshots/" + commit + "/": "dir",
	}
	for _, f := range files {
		etag := hubtest.GitBlobID(f.Data)
		if f.LFS {
			etag = hubtest.SHA256(f.Data)
		}
		want["blobs/"+etag] = "file " + hubtest.SHA256(f.Data)
		want["snapshots/"+commit+"/"+f.Path] = "link " + strings.Repeat("../", strings.Count(f.Path, "/")+2) + "blobs/" + etag
		if f.LFS {
			want[".tt-model/verified/"+etag] = "file" // tt-model's own record of a hashed LFS blob
		}
	}
	got := map[string]string{}
	err := filepath.WalkDir(repoDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == repoDir {
			return err
		}
		rel, _ := filepath.Rel(repoDir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[rel] = "link " + target
		case d.IsDir():
			if rel == "snapshots/"+commit || rel == ".tt-model/verified" {
				got[rel+map[bool]string{true: "/", false: ""}[strings.HasPrefix(rel, "snapshots/")]] = "dir"
			}
		case strings.HasPrefix(rel, "blobs/"):
			b, _ := os.ReadFile(p)
			got[rel] = "file " + hubtest.SHA256(b)
		case rel == "refs/main":
			b, _ := os.ReadFile(p)
			got[rel] = "file " + string(b)
		default:
			got[rel] = "file"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if want[k] != got[k] {
			t.Errorf("cache entry %s: got %q, want %q", k, got[k], want[k])
		}
	}
}

func TestHubBadInputsCLI(t *testing.T) {
	srv := hubEnv(t)
	dir := stagedWithCode(t, "hubbad", 1)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"not a staged package", nil, []string{"push", t.TempDir(), "--repo", "acme/x"}, 1, "not a staged package"},
		{"bad repo name", nil, []string{"push", dir, "--repo", "acme/bad name!"}, 1, "only letters, digits"},
		{"token refused", map[string]string{"HF_TOKEN": "not-a-token"}, []string{"push", dir, "--repo", "acme/x"}, 1, "the Hub refused the token"},
		{"read-only token", map[string]string{"HF_TOKEN": "read-token"}, []string{"push", dir, "--repo", "acme/x"}, 1, "lacks the permission this needs on acme/x"},
		{"no token", map[string]string{"HF_TOKEN": "", "HF_HOME": t.TempDir()}, []string{"push", dir, "--repo", "acme/x"}, 1, "no Hub token"},
		{"pull of a missing repo", nil, []string{"pull", "acme/none"}, 1, "acme/none does not exist"},
		{"pull of a bad ref", nil, []string{"pull", "not a repo"}, 2, "ORG/NAME"},
		{"serve offline with nothing cached", map[string]string{"HF_HUB_OFFLINE": "1"}, []string{"serve", "acme/hubbad", "--host"}, 1, `no ref "main"`},
		{"serve --local-only with nothing cached", nil, []string{"serve", "acme/hubbad", "--host", "--local-only"}, 1, "not complete in the local store"},
		{"refresh and local-only", nil, []string{"serve", "acme/hubbad", "--refresh", "--local-only"}, 2, "choose one"},
		{"--tag without --no-hub", nil, []string{"push", dir, "--tag", "v1"}, 2, "--no-hub"},
		{"rm of an unknown package", nil, []string{"rm", "acme/none"}, 1, "no package acme/none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errOut := runCLI(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q (stdout %q); want exit %d mentioning %q", code, errOut, out, tc.code, tc.want)
			}
		})
	}
	if n := srv.Commits("acme/x"); n != 0 {
		t.Errorf("a refused push left %d commits", n)
	}
}

func TestLoginStoresTokenAsHuggingfaceHub(t *testing.T) {
	hubEnv(t)
	t.Setenv("HF_TOKEN", "")
	home := os.Getenv("HF_HOME")
	stored := filepath.Join(home, "stored_tokens")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stored, []byte("[other]\nhf_token = hf_other\nrefresh_token = r\nexpires_at = 1\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("login", "--token", "write-token")
	if code != 0 || !strings.Contains(out, "as acme") {
		t.Fatalf("login: exit %d\n%s%s", code, out, errOut)
	}
	tok, err := os.ReadFile(filepath.Join(home, "token"))
	if err != nil || string(tok) != "write-token" {
		t.Errorf("token file = %q, %v", tok, err)
	}
	ini, _ := os.ReadFile(stored)
	if want := "[other]\nhf_token = hf_other\nrefresh_token = r\nexpires_at = 1\n\n[tt-model-test]\nhf_token = write-token\n\n"; string(ini) != want {
		t.Errorf("stored_tokens =\n%s\nwant\n%s", ini, want)
	}
	for _, p := range []string{filepath.Join(home, "token"), stored} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", p, fi.Mode(), err)
		}
	}
	// The saved token is now the one push uses.
	dir := stagedWithCode(t, "hublogin", 0)
	if code, out, errOut := runCLI("push", dir, "--repo", "acme/hublogin"); code != 0 {
		t.Errorf("push with the saved token: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("login", "--token", "not-a-token"); code != 1 || !strings.Contains(errOut, "not saved") {
		t.Errorf("login with a refused token: exit %d, %q", code, errOut)
	}
}

// TestPushChild is the `tt-model push` TestInterruptedPushResumes runs as a
// separate process and kills.
func TestPushChild(t *testing.T) {
	dir := os.Getenv("TT_PUSH_TEST_CHILD")
	if dir == "" {
		t.Skip("runs only as the child of TestInterruptedPushResumes")
	}
	code, _, errOut := runCLI("push", dir, "--repo", "acme/resume")
	t.Fatalf("the push was meant to be killed; it exited %d: %s", code, errOut)
}

// A push killed mid-upload, run again, sends only the objects the Hub does
// not hold yet and makes one commit.
func TestInterruptedPushResumes(t *testing.T) {
	srv := hubEnv(t)
	const objects = 8
	dir := stagedWithCode(t, "resume", objects)
	const before = 3
	srv.StallUploadsFrom(before)
	child := exec.Command(os.Args[0], "-test.run=^TestPushChild$")
	child.Env = append(os.Environ(), "TT_PUSH_TEST_CHILD="+dir)
	var childOut bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken child from hanging the suite.
	for deadline := time.Now().Add(2 * time.Minute); srv.Objects("acme/resume") < before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatalf("the child never stored %d objects:\n%s", before, childOut.String())
		}
	}
	time.Sleep(200 * time.Millisecond) // let the other uploads reach the stall
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	held := srv.Objects("acme/resume")
	if srv.Commits("acme/resume") != 1 {
		t.Fatalf("the killed push committed (%d commits)", srv.Commits("acme/resume"))
	}
	srv.StallUploadsFrom(0)
	mark := len(srv.Requests())
	code, out, errOut := runCLI("push", dir, "--repo", "acme/resume")
	if code != 0 {
		t.Fatalf("re-run: exit %d\n%s%s", code, out, errOut)
	}
	var puts int
	for _, r := range srv.Requests()[mark:] {
		if r.Host == "storage" && r.Method == "PUT" {
			puts++
		}
	}
	total := objects + 1 // the binary code files and the image layer
	t.Logf("killed with %d of %d objects on the Hub; the re-run sent %d", held, total, puts)
	if puts != total-held || srv.Commits("acme/resume") != 2 {
		t.Errorf("re-run sent %d objects (want %d = %d - %d held) and made %d commits (want 1)\n%s", puts, total-held, total, held, srv.Commits("acme/resume")-1, out)
	}
	if !strings.Contains(out, "already on the Hub") {
		t.Errorf("re-run output:\n%s", out)
	}
}
