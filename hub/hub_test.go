package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub/hubtest"
)

// randomBytes is deterministic filler content.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

type fixture struct {
	srv    *hubtest.Server
	cfg    Config
	commit string
	files  []hubtest.File
}

const testRepo = "org/model"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	files := []hubtest.File{
		{Path: "config.json", Data: []byte(`{"hidden_size": 8}`)},
		{Path: "model.safetensors", Data: randomBytes(300_000, 1), LFS: true},
		{Path: "sub/dir/extra.bin", Data: randomBytes(70_000, 2), LFS: true},
		{Path: "README.md", Data: []byte("# model\n")},
	}
	commit := srv.AddCommit(testRepo, "main", files)
	return &fixture{
		srv:    srv,
		cfg:    Config{Endpoint: srv.URL, CacheDir: t.TempDir()},
		commit: commit,
		files:  files,
	}
}

func (f *fixture) client(opts ...Option) *Client { return NewClient(f.cfg, opts...) }

func (f *fixture) cdnGets() []hubtest.Request {
	var out []hubtest.Request
	for _, r := range f.srv.Requests() {
		if r.Host == "storage" {
			out = append(out, r)
		}
	}
	return out
}

func TestDownloadWritesHFCacheLayout(t *testing.T) {
	f := newFixture(t)
	var progress bytes.Buffer
	snap, err := f.client().Download(context.Background(), Request{Repo: testRepo, Revision: "main"}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != f.commit || snap.FromCache {
		t.Fatalf("snapshot = %+v, want commit %s from the network", snap, f.commit)
	}
	repoDir := filepath.Join(f.cfg.CacheDir, "models--org--model")
	if snap.Dir != filepath.Join(repoDir, "snapshots", f.commit) {
		t.Errorf("Dir = %s", snap.Dir)
	}
	ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main"))
	if err != nil || string(ref) != f.commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, f.commit)
	}
	for _, file := range f.files {
		etag := hubtest.GitBlobID(file.Data)
		if file.LFS {
			etag = hubtest.SHA256(file.Data)
		}
		pointer := filepath.Join(snap.Dir, filepath.FromSlash(file.Path))
		target, err := os.Readlink(pointer)
		if err != nil {
			t.Fatalf("%s: %v", file.Path, err)
		}
		depth := strings.Count(file.Path, "/")
		want := strings.Repeat("../", depth+2) + "blobs/" + etag
		if target != want {
			t.Errorf("%s -> %s, want relative link %s", file.Path, target, want)
		}
		got, err := os.ReadFile(pointer)
		if err != nil || !bytes.Equal(got, file.Data) {
			t.Errorf("%s: content differs (%v)", file.Path, err)
		}
		if _, err := os.Stat(filepath.Join(f.cfg.CacheDir, ".locks", "models--org--model", etag+".lock")); file.LFS && err != nil {
			t.Errorf("lock file for %s: %v", file.Path, err)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(repoDir, "blobs", "*.incomplete")); len(matches) > 0 {
		t.Errorf("leftover partial files: %v", matches)
	}
	if !strings.Contains(progress.String(), "Downloading org/model") {
		t.Errorf("no progress line on the progress writer: %q", progress.String())
	}
}

func TestPinnedCompleteSnapshotUsesNoNetwork(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	if _, err := c.Download(context.Background(), Request{Repo: testRepo, Revision: f.commit}, io.Discard); err != nil {
		t.Fatal(err)
	}
	before := len(f.srv.Requests())
	f.srv.Close() // any request now fails
	for _, offline := range []bool{false, true} {
		cfg := f.cfg
		cfg.Offline = offline
		snap, err := NewClient(cfg).Download(context.Background(), Request{Repo: testRepo, Revision: f.commit}, io.Discard)
		if err != nil {
			t.Fatalf("offline=%v: %v", offline, err)
		}
		if !snap.FromCache || len(snap.Files) != len(f.files) {
			t.Errorf("offline=%v: snapshot %+v, want all %d files from cache", offline, snap, len(f.files))
		}
	}
	if after := len(f.srv.Requests()); after != before {
		t.Errorf("%d requests after the pin was complete", after-before)
	}
}

func TestOffline(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name    string
		prepare func(c *Client) // run online before going offline
		req     Request
		wantErr bool
	}{
		{"empty cache", nil, Request{Repo: testRepo, Revision: "main"}, true},
		{"branch via refs", func(c *Client) {
			c.Download(context.Background(), Request{Repo: testRepo}, io.Discard)
		}, Request{Repo: testRepo, Revision: "main"}, false},
		{"pin with a file missing", func(c *Client) {
			c.Download(context.Background(), Request{Repo: testRepo, Revision: f.commit, Allow: []string{"*.json"}}, io.Discard)
		}, Request{Repo: testRepo, Revision: f.commit}, true},
		{"pin narrowed by patterns", func(c *Client) {
			c.Download(context.Background(), Request{Repo: testRepo, Revision: f.commit, Allow: []string{"*.json"}}, io.Discard)
		}, Request{Repo: testRepo, Revision: f.commit, Allow: []string{"config.*"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.cfg
			cfg.CacheDir = t.TempDir()
			if tc.prepare != nil {
				tc.prepare(NewClient(cfg))
			}
			before := len(f.srv.Requests())
			cfg.Offline = true
			_, err := NewClient(cfg).Download(context.Background(), tc.req, io.Discard)
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrOfflineMiss) {
				t.Errorf("err = %v, want ErrOfflineMiss", err)
			}
			if n := len(f.srv.Requests()) - before; n != 0 {
				t.Errorf("%d network requests while offline", n)
			}
		})
	}
}

func TestPatternsSelectFiles(t *testing.T) {
	f := newFixture(t)
	snap, err := f.client().Download(context.Background(), Request{
		Repo: testRepo, Allow: []string{"*.json", "*.safetensors", "sub/"}, Ignore: []string{"sub/dir/*.bin"},
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "model.safetensors"}
	if strings.Join(snap.Files, ",") != strings.Join(want, ",") {
		t.Errorf("files = %v, want %v", snap.Files, want)
	}
	if _, err := os.Lstat(filepath.Join(snap.Dir, "README.md")); err == nil {
		t.Error("README.md was fetched although not allowed")
	}
	if n := len(f.cdnGets()); n != 1 {
		t.Errorf("%d CDN downloads, want 1", n)
	}
}

func TestCorruptDownloadIsRejected(t *testing.T) {
	f := newFixture(t)
	f.srv.Corrupt(true)
	_, err := f.client().Download(context.Background(), Request{Repo: testRepo, Allow: []string{"model.safetensors"}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("err = %v, want a sha256 mismatch", err)
	}
	sum := hubtest.SHA256(f.files[1].Data)
	blobs := filepath.Join(f.cfg.CacheDir, "models--org--model", "blobs")
	for _, p := range []string{sum, sum + ".incomplete"} {
		if _, err := os.Stat(filepath.Join(blobs, p)); err == nil {
			t.Errorf("%s left in the cache after a bad download", p)
		}
	}
	f.srv.Corrupt(false)
	if _, err := f.client().Download(context.Background(), Request{Repo: testRepo, Allow: []string{"model.safetensors"}}, io.Discard); err != nil {
		t.Fatalf("retry after the corruption: %v", err)
	}
}

// A partial file from a previous run is continued with a Range request, or
// restarted when the server ignores Range; a partial with wrong bytes is
// caught by the sha256 check and removed.
func TestResumeFromIncomplete(t *testing.T) {
	cases := []struct {
		name        string
		prefix      func(data []byte) []byte
		ignoreRange bool
		wantRange   string
		wantErr     string
	}{
		{"range", func(d []byte) []byte { return d[:100_000] }, false, "bytes=100000-", ""},
		{"server ignores range", func(d []byte) []byte { return bytes.Repeat([]byte{7}, 5000) }, true, "bytes=5000-", ""},
		{"bad partial", func(d []byte) []byte { return bytes.Repeat([]byte{7}, 5000) }, false, "bytes=5000-", "sha256 mismatch"},
		{"longer than the file", func(d []byte) []byte { return append(append([]byte{}, d...), 1, 2, 3) }, false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.srv.IgnoreRange(tc.ignoreRange)
			data := f.files[1].Data
			sum := hubtest.SHA256(data)
			incomplete := filepath.Join(f.cfg.CacheDir, "models--org--model", "blobs", sum+".incomplete")
			if err := os.MkdirAll(filepath.Dir(incomplete), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(incomplete, tc.prefix(data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := f.client().Download(context.Background(), Request{Repo: testRepo, Allow: []string{"model.safetensors"}}, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, err := os.Stat(incomplete); err == nil {
					t.Error("bad partial file kept")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gets := f.cdnGets()
			if len(gets) != 1 || gets[0].Range != tc.wantRange {
				t.Errorf("CDN requests = %+v, want one with Range %q", gets, tc.wantRange)
			}
		})
	}
}

func TestSharedBlobNotDownloadedTwice(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	if _, err := c.Download(context.Background(), Request{Repo: testRepo}, io.Discard); err != nil {
		t.Fatal(err)
	}
	second := f.srv.AddCommit(testRepo, "main", append(f.files, hubtest.File{Path: "new.txt", Data: []byte("new")}))
	n := len(f.cdnGets())
	snap, err := c.Download(context.Background(), Request{Repo: testRepo}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != second || len(snap.Files) != len(f.files)+1 {
		t.Errorf("snapshot = %+v, want commit %s with %d files", snap, second, len(f.files)+1)
	}
	if got := len(f.cdnGets()) - n; got != 0 {
		t.Errorf("%d LFS downloads for blobs already in the cache", got)
	}
}

func TestHubErrors(t *testing.T) {
	f := newFixture(t)
	f.srv.AddToken("s3cret", hubtest.Token{User: "org"})
	f.srv.AddToken("other", hubtest.Token{User: "someone"})
	f.srv.SetPrivate(testRepo, true)
	cases := []struct {
		name, token string
		req         Request
		want        string
	}{
		{"private repo, no token", "", Request{Repo: testRepo}, "HTTP 401"},
		{"private repo, no token, hint", "", Request{Repo: testRepo}, "private and this token cannot see it"},
		{"token the Hub refuses", "nope", Request{Repo: testRepo}, "the Hub refused the token"},
		{"private repo, another user", "other", Request{Repo: testRepo}, "HTTP 404"},
		{"unknown repo", "s3cret", Request{Repo: "org/none"}, "org/none does not exist"},
		{"unknown revision", "s3cret", Request{Repo: testRepo, Revision: "v9"}, "no such revision in org/model"},
		{"bad repo id", "s3cret", Request{Repo: "../x"}, "repo id"},
		{"nothing selected", "s3cret", Request{Repo: testRepo, Allow: []string{"*.gguf"}}, "no file matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.cfg
			cfg.Token = tc.token
			cfg.CacheDir = t.TempDir()
			_, err := NewClient(cfg).Download(context.Background(), tc.req, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	cfg := f.cfg
	cfg.Token = "s3cret"
	if _, err := NewClient(cfg).Download(context.Background(), Request{Repo: testRepo}, io.Discard); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	for _, r := range f.srv.Requests() {
		if r.Host == "storage" && r.Authorization != "" {
			t.Errorf("the token reached the storage server: %+v", r)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "hf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "hf", "token"), []byte("filetoken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"defaults", map[string]string{"HOME": home}, Config{
			Endpoint: DefaultEndpoint, CacheDir: home + "/.cache/huggingface/hub", HFHome: home + "/.cache/huggingface"}},
		{"xdg", map[string]string{"HOME": home, "XDG_CACHE_HOME": "/x"}, Config{
			Endpoint: DefaultEndpoint, CacheDir: "/x/huggingface/hub", HFHome: "/x/huggingface"}},
		{"hf_home with token file", map[string]string{"HF_HOME": home + "/hf", "HF_ENDPOINT": "http://h:1/", "HF_HUB_OFFLINE": "yes"}, Config{
			Endpoint: "http://h:1", Token: "filetoken", CacheDir: home + "/hf/hub", HFHome: home + "/hf", Offline: true}},
		{"explicit", map[string]string{"HF_HOME": "/h", "HF_HUB_CACHE": "/c", "HF_TOKEN": "t", "HF_HUB_OFFLINE": "0"}, Config{
			Endpoint: DefaultEndpoint, Token: "t", CacheDir: "/c", HFHome: "/h"}},
		{"transformers offline", map[string]string{"HF_HOME": "/h", "TRANSFORMERS_OFFLINE": "1"}, Config{
			Endpoint: DefaultEndpoint, CacheDir: "/h/hub", HFHome: "/h", Offline: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestEnsureDefaultRef(t *testing.T) {
	const a, b = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	cases := []struct {
		name, existing, want string
	}{
		{"absent", "", a},
		{"kept", b, b},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Cache{Dir: t.TempDir()}
			if tc.existing != "" {
				if err := c.WriteRef(testRepo, "main", tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.EnsureDefaultRef(testRepo, a); err != nil {
				t.Fatal(err)
			}
			if got, err := c.ReadRef(testRepo, "main"); err != nil || got != tc.want {
				t.Errorf("refs/main = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestUnreachableHubFallsBackToCache(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	if _, err := c.Download(context.Background(), Request{Repo: testRepo, Revision: "main", Allow: []string{"*.json"}}, io.Discard); err != nil {
		t.Fatal(err)
	}
	f.srv.Close()
	snap, err := c.Download(context.Background(), Request{Repo: testRepo, Revision: "main", Allow: []string{"*.json"}}, io.Discard)
	if err != nil || !snap.FromCache || snap.Commit != f.commit {
		t.Errorf("branch with the Hub gone: %+v, %v; want the cached snapshot", snap, err)
	}
	// Files the cache lacks cannot come from anywhere: the error says the Hub
	// is unreachable and names what is missing.
	_, err = c.Download(context.Background(), Request{Repo: testRepo, Revision: "main"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot be reached") || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("incomplete cache with the Hub gone: err = %v, want the connection error and the missing files", err)
	}
}

func TestImportMakesACompletePin(t *testing.T) {
	src := t.TempDir()
	files := map[string][]byte{"config.json": []byte(`{"a": 1}`), "model.safetensors": randomBytes(5000, 3), "sub/notes.txt": []byte("x")}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := Cache{Dir: t.TempDir()}
	const commit = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"
	snap, err := cache.Import("Roboflow/rf-detr-base", commit, src)
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range files {
		got, err := os.ReadFile(filepath.Join(snap.Dir, p))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %v", p, err)
		}
	}
	// Etags as the Hub gives them: sha256 for the weights, git sha1 otherwise.
	if target, _ := os.Readlink(filepath.Join(snap.Dir, "model.safetensors")); target != "../../blobs/"+hubtest.SHA256(files["model.safetensors"]) {
		t.Errorf("model.safetensors -> %s", target)
	}
	if target, _ := os.Readlink(filepath.Join(snap.Dir, "sub/notes.txt")); target != "../../../blobs/"+hubtest.GitBlobID(files["sub/notes.txt"]) {
		t.Errorf("sub/notes.txt -> %s", target)
	}
	// The pin is complete: a client with an unreachable endpoint, online or offline, serves it.
	for _, offline := range []bool{false, true} {
		c := NewClient(Config{Endpoint: "http://127.0.0.1:1", CacheDir: cache.Dir, Offline: offline})
		got, err := c.Download(context.Background(), Request{Repo: "Roboflow/rf-detr-base", Revision: commit, Allow: []string{"*.json", "*.safetensors"}}, io.Discard)
		if err != nil || !got.FromCache || len(got.Files) != 2 {
			t.Errorf("offline=%v: %+v, %v", offline, got, err)
		}
	}
	if _, err := cache.Import("Roboflow/rf-detr-base", "main", src); err == nil {
		t.Error("import under a branch name accepted")
	}
}
