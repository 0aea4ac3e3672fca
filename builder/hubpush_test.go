package builder

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
)

// hubPushFixture packages the test package once per test and starts a local
// Hub that accepts acme's write token.
type hubPushFixture struct {
	srv    *hubtest.Server
	client *hub.Client
	dir    string // the staged package
}

func newHubPushFixture(t *testing.T, edit func(string) string) *hubPushFixture {
	t.Helper()
	m, work := testPackage(t, edit)
	mustPackage(t, packageOpts(m, work, fixtureBin(t), filepath.Join(work, "out"), VerifyRootfs))
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("w", hubtest.Token{User: "acme", Write: true})
	c := hub.NewClient(hub.Config{Endpoint: srv.URL, Token: "w", CacheDir: t.TempDir()}, hub.WithBackoff(2, time.Millisecond, 2*time.Millisecond))
	return &hubPushFixture{srv: srv, client: c, dir: filepath.Join(work, "out", "demo")}
}

// packageTree maps every file of the staged package to its bytes.
func packageTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPushHubRoundTrip(t *testing.T) {
	f := newHubPushFixture(t, nil)
	ctx := context.Background()
	res, err := PushHub(ctx, f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo", Log: testLog{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Visibility != "private" || res.NoChange || res.LFSUploaded == 0 || !hub.IsCommit(res.Commit) ||
		res.CommitURL != f.srv.URL+"/acme/demo/commit/"+res.Commit {
		t.Errorf("first push: %+v", res)
	}
	local := packageTree(t, f.dir)
	onHub := map[string]hubtest.File{}
	for _, hf := range f.srv.Files("acme/demo", "main") {
		onHub[hf.Path] = hf
	}
	for p, data := range local {
		got, ok := onHub[p]
		switch {
		case !ok:
			t.Errorf("%s was not pushed", p)
		case p == "README.md":
			if !bytes.Contains(got.Data, []byte("tt-model serve acme/demo")) {
				t.Errorf("the pushed card's quickstart does not serve acme/demo:\n%s", got.Data)
			}
		case !bytes.Equal(got.Data, data):
			t.Errorf("%s differs on the Hub", p)
		}
	}
	if len(onHub) != len(local)+1 { // + the repo's .gitattributes
		t.Errorf("%d files on the Hub, want the package's %d and .gitattributes", len(onHub), len(local))
	}

	// Nothing changed: no object sent, no commit.
	commits, before := f.srv.Commits("acme/demo"), len(f.srv.Requests())
	res, err = PushHub(ctx, f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NoChange || res.Visibility != "unchanged" || f.srv.Commits("acme/demo") != commits {
		t.Errorf("second push: %+v", res)
	}
	for _, r := range f.srv.Requests()[before:] {
		if r.Host == "storage" {
			t.Errorf("the second push sent %s %s", r.Method, r.Path)
		}
	}

	// A file another tool put at the root survives; a code/ file the package
	// no longer has is removed, in the same commit as the change.
	other, err := hub.PrepareFiles(ctx, []hub.LocalFile{{Path: "media/demo.txt", Local: filepath.Join(f.dir, "README.md")}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateCommit(ctx, hub.Commit{Repo: "acme/demo", Summary: "media", Files: other}, io.Discard); err != nil {
		t.Fatal(err)
	}
	var gone string
	for p := range local {
		if strings.HasPrefix(p, "code/") {
			gone = p
			break
		}
	}
	if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(gone))); err != nil {
		t.Fatal(err)
	}
	commits = f.srv.Commits("acme/demo")
	res, err = PushHub(ctx, f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo", Publish: false, Public: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 1 || res.Deleted[0] != gone || f.srv.Commits("acme/demo") != commits+1 || f.srv.Private("acme/demo") {
		t.Errorf("third push: deleted %v, %d new commits, private %v", res.Deleted, f.srv.Commits("acme/demo")-commits, f.srv.Private("acme/demo"))
	}
	paths := map[string]bool{}
	for _, hf := range f.srv.Files("acme/demo", "main") {
		paths[hf.Path] = true
	}
	if paths[gone] || !paths["media/demo.txt"] {
		t.Errorf("after the third push: %s present %v, media/demo.txt present %v", gone, paths[gone], paths["media/demo.txt"])
	}
}

// A flipped byte in an image blob is refused before anything is sent.
func TestPushHubRefusesTamperedBlob(t *testing.T) {
	f := newHubPushFixture(t, nil)
	blobs, _ := filepath.Glob(filepath.Join(f.dir, "image", "blobs", "sha256", "*"))
	var biggest string
	var size int64
	for _, b := range blobs {
		if fi, err := os.Stat(b); err == nil && fi.Size() > size {
			biggest, size = b, fi.Size()
		}
	}
	data, err := os.ReadFile(biggest)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(biggest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = PushHub(context.Background(), f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo"})
	if err == nil || !strings.Contains(err.Error(), "tampered") || !strings.Contains(err.Error(), filepath.Base(biggest)) {
		t.Fatalf("err = %v, want the tampered blob named", err)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d requests reached the Hub before the refusal", n)
	}
}

func TestPushHubBadInputs(t *testing.T) {
	f := newHubPushFixture(t, nil)
	refused := hub.NewClient(hub.Config{Endpoint: f.srv.URL, Token: "not-a-token", CacheDir: t.TempDir()})
	cases := []struct {
		name string
		dir  string
		opts HubPushOptions
		want string
	}{
		{"not a package", t.TempDir(), HubPushOptions{Client: f.client, Repo: "acme/demo"}, "not a staged package"},
		{"bad characters", f.dir, HubPushOptions{Client: f.client, Repo: "acme/de mo"}, "only letters, digits"},
		{"no namespace", f.dir, HubPushOptions{Client: f.client, Repo: "demo"}, "want org/name"},
		{"publish without performance", f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo", Publish: true}, "card.performance and card.limitations"},
		{"public and private", f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo", Public: true, Private: true}, "contradict"},
		{"token refused", f.dir, HubPushOptions{Client: refused, Repo: "acme/demo"}, "the Hub refused the token"},
		{"another namespace", f.dir, HubPushOptions{Client: f.client, Repo: "someone/demo"}, "lacks the permission this needs on someone/demo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PushHub(context.Background(), tc.dir, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// failingRegistry starts a registry that fails every request and counts
// them, for the checks that must refuse before sending anything. It returns
// the repository prefix to push to.
func failingRegistry(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://") + "/ns", &requests
}

// A tampered blob is refused before any registry request.
func TestPushRefusesTamperedBlobBeforeSending(t *testing.T) {
	f := newHubPushFixture(t, nil)
	registry, requests := failingRegistry(t)
	blobs, _ := filepath.Glob(filepath.Join(f.dir, "image", "blobs", "sha256", "*"))
	data, err := os.ReadFile(blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(blobs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Push(context.Background(), f.dir, PushOptions{Registry: registry, Insecure: true})
	if err == nil || !strings.Contains(err.Error(), filepath.Base(blobs[0])) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("err = %v, want the tampered blob named", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d registry requests before the tampered blob was refused", n)
	}
}

// A tag outside the OCI grammar is refused before any registry request.
func TestPushRefusesBadTagBeforeSending(t *testing.T) {
	f := newHubPushFixture(t, nil)
	registry, requests := failingRegistry(t)
	for _, tag := range []string{"-lead", ".x", strings.Repeat("a", 129), "a:b"} {
		_, err := Push(context.Background(), f.dir, PushOptions{Registry: registry, Tags: []string{tag}, Insecure: true})
		if err == nil || !strings.Contains(err.Error(), "OCI distribution grammar") {
			t.Errorf("tag %q: err = %v, want it refused by the tag grammar", tag, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d registry requests before the bad tag was refused", n)
	}
}

// With a registry the image goes there and the Hub repo carries the
// manifest naming it, without image/.
func TestPushHubWithRegistry(t *testing.T) {
	testenv.Require(t, "registry")
	addr := servertest.StartRegistry(t)
	f := newHubPushFixture(t, nil)
	res, err := PushHub(context.Background(), f.dir, HubPushOptions{Client: f.client, Repo: "acme/demo", Registry: addr + "/tt", Insecure: true, Log: testLog{}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := manifest.ReadWire(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != addr+"/tt/demo@"+w.Container.Image.Digest {
		t.Errorf("image = %s, want %s/tt/demo@%s", res.Image, addr, w.Container.Image.Digest)
	}
	ref, err := name.NewDigest(res.Image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(ref); err != nil {
		t.Errorf("the registry does not hold %s: %v", res.Image, err)
	}
	var pointer []byte
	for _, hf := range f.srv.Files("acme/demo", "main") {
		if strings.HasPrefix(hf.Path, "image/") {
			t.Errorf("%s pushed to the Hub although the image went to the registry", hf.Path)
		}
		if hf.Path == manifest.WireFile {
			pointer = hf.Data
		}
	}
	pw, err := manifest.ParseWire(pointer)
	if err != nil {
		t.Fatal(err)
	}
	if pw.Container.Image.Registry != addr+"/tt" || pw.Container.Image.Digest != w.Container.Image.Digest {
		t.Errorf("the Hub's manifest points at %s %s, want %s/tt %s", pw.Container.Image.Registry, pw.Container.Image.Digest, addr, w.Container.Image.Digest)
	}
}
