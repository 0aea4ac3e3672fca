package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
)

type uploadFixture struct {
	srv  *hubtest.Server
	cfg  Config
	dir  string
	data map[string][]byte
}

const pushRepo = "acme/detector"

func newUploadFixture(t *testing.T) *uploadFixture {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("write-token", hubtest.Token{User: "acme", Write: true})
	srv.AddToken("read-token", hubtest.Token{User: "acme"})
	f := &uploadFixture{srv: srv, dir: t.TempDir(), data: map[string][]byte{
		"README.md":                      []byte("---\ntags:\n- tt-model\n---\n# detector\n"),
		"code/main.go":                   []byte("package main\n"),
		"code/empty.txt":                 {},
		"image/blobs/sha256/layer":       randomBytes(300_000, 11),             // binary: LFS
		"image/blobs/sha256/big-text":    bytes.Repeat([]byte("text "), 3<<20), // 15 MB of text: LFS by size
		"tt_kernel_manifest.json":        []byte(`{"schema_version": "5.1"}`),
		"image/oci-layout":               []byte(`{"imageLayoutVersion": "1.0.0"}`),
		"image/blobs/sha256/config.json": []byte(`{"architecture": "amd64"}`),
	}}
	for p, b := range f.data {
		full := filepath.Join(f.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.cfg = Config{Endpoint: srv.URL, CacheDir: t.TempDir(), Token: "write-token"}
	return f
}

func (f *uploadFixture) client(opts ...Option) *Client {
	return NewClient(f.cfg, append([]Option{WithBackoff(3, time.Millisecond, 5*time.Millisecond)}, opts...)...)
}

func (f *uploadFixture) files(t *testing.T) []PreparedFile {
	t.Helper()
	var local []LocalFile
	for p := range f.data {
		local = append(local, LocalFile{Path: p, Local: filepath.Join(f.dir, filepath.FromSlash(p))})
	}
	prepared, err := PrepareFiles(context.Background(), local, 4)
	if err != nil {
		t.Fatal(err)
	}
	return prepared
}

func (f *uploadFixture) push(t *testing.T, c *Client) (*CommitResult, error) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateRepo(ctx, pushRepo, true); err != nil {
		return nil, err
	}
	return c.CreateCommit(ctx, Commit{Repo: pushRepo, Summary: "Upload detector", Files: f.files(t)}, io.Discard)
}

func TestCommitRoundTrip(t *testing.T) {
	f := newUploadFixture(t)
	c := f.client()
	res, err := f.push(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.LFSUploaded != 2 || res.Empty || !IsCommit(res.OID) || res.URL != f.srv.URL+"/"+pushRepo+"/commit/"+res.OID {
		t.Errorf("result = %+v, want 2 LFS uploads and a commit", res)
	}
	if !f.srv.Private(pushRepo) || f.srv.Head(pushRepo, "main") != res.OID {
		t.Errorf("repo private=%v head=%s", f.srv.Private(pushRepo), f.srv.Head(pushRepo, "main"))
	}
	hubFiles := map[string]hubtest.File{}
	for _, hf := range f.srv.Files(pushRepo, "main") {
		hubFiles[hf.Path] = hf
	}
	for p, want := range f.data {
		got, ok := hubFiles[p]
		if !ok || !bytes.Equal(got.Data, want) {
			t.Errorf("%s: on the Hub %v (%d bytes), want %d bytes", p, ok, len(got.Data), len(want))
		}
	}
	if !hubFiles["image/blobs/sha256/layer"].LFS || !hubFiles["image/blobs/sha256/big-text"].LFS || hubFiles["code/main.go"].LFS {
		t.Error("upload modes: want the binary and the >10 MiB file in LFS, the source in git")
	}
	if _, ok := hubFiles[".gitattributes"]; !ok {
		t.Error("the repo lost the .gitattributes of its initial commit")
	}
	// The pushed tree pulls back identical.
	snap, err := c.Download(context.Background(), Request{Repo: pushRepo}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range f.data {
		if got, err := os.ReadFile(filepath.Join(snap.Dir, filepath.FromSlash(p))); err != nil || !bytes.Equal(got, want) {
			t.Errorf("pulled %s differs: %v", p, err)
		}
	}

	// A second push with nothing changed sends no object and makes no commit.
	commits := f.srv.Commits(pushRepo)
	before := len(f.srv.Requests())
	res, err = f.push(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Empty || res.LFSUploaded != 0 || res.Unchanged != len(f.data) || f.srv.Commits(pushRepo) != commits {
		t.Errorf("second push: %+v, %d commits (was %d)", res, f.srv.Commits(pushRepo), commits)
	}
	for _, r := range f.srv.Requests()[before:] {
		if r.Host == "storage" {
			t.Errorf("second push sent %s %s", r.Method, r.Path)
		}
	}
}

func TestMultipartUpload(t *testing.T) {
	f := newUploadFixture(t)
	f.srv.SetMultipart(128 << 10)
	res, err := f.push(t, f.client())
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, r := range f.srv.Requests() {
		if r.Host == "storage" && r.Method == http.MethodPut {
			parts++
		}
	}
	// 300 000 bytes in 128 KiB parts: 3; 15 MiB: 120.
	if res.LFSUploaded != 2 || parts != 3+120 {
		t.Errorf("%d objects in %d part PUTs, want 2 in 123", res.LFSUploaded, parts)
	}
	for _, hf := range f.srv.Files(pushRepo, "main") {
		if want := f.data[hf.Path]; hf.Path != ".gitattributes" && !bytes.Equal(hf.Data, want) {
			t.Errorf("%s differs after a multipart upload", hf.Path)
		}
	}
}

func TestTamperedFileRefusedBeforeSending(t *testing.T) {
	f := newUploadFixture(t)
	layer := filepath.Join(f.dir, "image", "blobs", "sha256", "layer")
	_, err := PrepareFiles(context.Background(), []LocalFile{{Path: "image/blobs/sha256/layer", Local: layer, SHA256: hubtest.SHA256(f.data["image/blobs/sha256/layer"])}}, 1)
	if err != nil {
		t.Fatalf("the intact blob: %v", err)
	}
	flipByte(t, layer)
	_, err = PrepareFiles(context.Background(), []LocalFile{{Path: "image/blobs/sha256/layer", Local: layer, SHA256: hubtest.SHA256(f.data["image/blobs/sha256/layer"])}}, 1)
	if err == nil || !strings.Contains(err.Error(), "tampered") {
		t.Fatalf("err = %v, want the tampered blob refused", err)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d requests before the refusal", n)
	}
}

// A file that changes between hashing and sending fails its upload.
func TestFileChangedWhileUploadingFails(t *testing.T) {
	f := newUploadFixture(t)
	c := f.client()
	prepared := f.files(t)
	if _, err := c.CreateRepo(context.Background(), pushRepo, true); err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(f.dir, "image", "blobs", "sha256", "layer"))
	_, err := c.CreateCommit(context.Background(), Commit{Repo: pushRepo, Summary: "x", Files: prepared}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "changed since it was hashed") {
		t.Fatalf("err = %v, want the changed file caught while sending", err)
	}
	if f.srv.Commits(pushRepo) != 1 {
		t.Error("a commit was made with a changed file")
	}
}

func TestUploadRetriesTransientErrors(t *testing.T) {
	f := newUploadFixture(t)
	f.srv.Fail(http.MethodPut, "/upload/", http.StatusServiceUnavailable, 2)
	if _, err := f.push(t, f.client()); err != nil {
		t.Fatalf("two 503s on upload: %v", err)
	}
	g := newUploadFixture(t)
	g.srv.Fail(http.MethodPut, "/upload/", http.StatusInternalServerError, 100)
	_, err := g.push(t, g.client())
	var httpErr *HTTPError
	if !errors.As(err, &httpErr) || httpErr.Status != 500 || !strings.Contains(err.Error(), "upload image/blobs/sha256/") {
		t.Fatalf("persistent 500s: err = %v, want the last HTTP 500 naming the file", err)
	}
	if g.srv.Commits(pushRepo) != 1 {
		t.Error("a commit was made although an upload failed")
	}
}

func TestStaleParentRefused(t *testing.T) {
	f := newUploadFixture(t)
	c := f.client()
	if _, err := f.push(t, c); err != nil {
		t.Fatal(err)
	}
	stale := f.srv.Head(pushRepo, "main")
	f.srv.AddCommit(pushRepo, "main", []hubtest.File{{Path: "other.txt", Data: []byte("someone else")}})
	_, err := c.CreateCommit(context.Background(), Commit{Repo: pushRepo, Summary: "x", Parent: stale, Delete: []string{"code/main.go"}}, io.Discard)
	var httpErr *HTTPError
	if !errors.As(err, &httpErr) || httpErr.Status != http.StatusPreconditionFailed {
		t.Fatalf("err = %v, want 412", err)
	}
}

func TestUploadAuthErrors(t *testing.T) {
	cases := []struct{ token, want string }{
		{"", "no Hub token"},
		{"not-a-token", "the Hub refused the token"},
		{"read-token", "lacks the permission"},
	}
	for _, tc := range cases {
		t.Run(tc.token, func(t *testing.T) {
			f := newUploadFixture(t)
			f.cfg.Token = tc.token
			_, err := f.push(t, f.client())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWhoami(t *testing.T) {
	f := newUploadFixture(t)
	id, err := f.client().Whoami(context.Background())
	if err != nil || id.User != "acme" || id.Role != "write" || id.TokenName == "" {
		t.Fatalf("whoami = %+v, %v", id, err)
	}
}

func TestValidateRepoID(t *testing.T) {
	for _, ok := range []string{"gpt2", "acme/detector", "Org_1/model.v2-x"} {
		if err := ValidateRepoID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b/c", "acme/", "acme/de tector", "acme/-x", "acme/x.", "acme/a--b", "acme/a..b", "acme/x.git", "../x", strings.Repeat("a", 97)} {
		if err := ValidateRepoID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
