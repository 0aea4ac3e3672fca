package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
)

// A transfer that stops sending bytes is abandoned after the idle timeout,
// resumed from the partial file with backoff, and after the last retry
// fails with the file named; the partial file is kept for the next run.
func TestSilentTransferResumesThenFails(t *testing.T) {
	f := newFixture(t)
	const chunk = 50_000
	f.srv.StallAfter(chunk)
	c := f.client(WithIdleTimeout(300*time.Millisecond), WithBackoff(2, 10*time.Millisecond, 20*time.Millisecond))
	req := Request{Repo: testRepo, Allow: []string{"model.safetensors"}}
	_, err := c.Download(context.Background(), req, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), "no data received") ||
		!strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err = %v, want the file named, the idle timeout and 3 attempts", err)
	}
	var ranges []string
	for _, r := range f.cdnGets() {
		ranges = append(ranges, r.Range)
	}
	if want := []string{"", "bytes=50000-", "bytes=100000-"}; strings.Join(ranges, ",") != strings.Join(want, ",") {
		t.Errorf("storage requests' Range = %q, want %q (each retry resumes)", ranges, want)
	}
	f.srv.StallAfter(0)
	snap, err := c.Download(context.Background(), req, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(f.files[1].Data) - 3*chunk); snap.Fetched != want {
		t.Errorf("the rerun fetched %d bytes, want %d (the rest of the partial file)", snap.Fetched, want)
	}
}

// flipByte changes one byte of a file in place, keeping its size.
func flipByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptCachedBlobIsCaught(t *testing.T) {
	f := newFixture(t)
	req := Request{Repo: testRepo, Revision: f.commit, Allow: []string{"*.json", "*.safetensors"}}
	if _, err := f.client().Download(context.Background(), req, io.Discard); err != nil {
		t.Fatal(err)
	}
	cache := Cache{Dir: f.cfg.CacheDir}
	blob := cache.BlobPath(testRepo, hubtest.SHA256(f.files[1].Data))
	fi, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, blob)

	// Offline: refused, the file named.
	cfg := f.cfg
	cfg.Offline = true
	_, err = NewClient(cfg).Download(context.Background(), req, io.Discard)
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) || corrupt.Path != "model.safetensors" || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("offline with a corrupt blob: err = %v, want a CorruptError for model.safetensors", err)
	}

	// A byte flipped with the mtime put back passes the stat check; the full
	// verify catches it.
	if err := os.Chtimes(blob, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	rep, err := cache.VerifySnapshot(testRepo, f.commit, req.Allow, nil, false)
	if err != nil || len(rep.Corrupt) != 0 || rep.Hashed != 1 { // config.json (git) only
		t.Fatalf("quick verify with the mtime restored: %+v, %v (want the LFS blob trusted by its record)", rep, err)
	}
	rep, err = cache.VerifySnapshot(testRepo, f.commit, req.Allow, nil, true)
	if err != nil || len(rep.Corrupt) != 1 || rep.Corrupt[0].Path != "model.safetensors" || rep.Hashed != 2 {
		t.Fatalf("full verify: %+v, %v; want model.safetensors corrupt, 2 files hashed", rep, err)
	}

	// Online: the blob is fetched again.
	flipByte(t, blob) // back to the good bytes, but a new mtime…
	flipByte(t, blob) // …and bad again
	before := len(f.cdnGets())
	snap, err := f.client().Download(context.Background(), req, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.cdnGets()) != before+1 || snap.FromCache {
		t.Errorf("the corrupt blob was not downloaded again (%d storage requests, snapshot %+v)", len(f.cdnGets())-before, snap)
	}
	got, _ := os.ReadFile(filepath.Join(snap.Dir, "model.safetensors"))
	if !bytes.Equal(got, f.files[1].Data) {
		t.Error("model.safetensors still corrupt after the re-download")
	}
}

// An HF snapshot folder is all links into ../../blobs: import follows them.
// Links out of the allowed roots, loops and non-regular files fail the whole
// import before anything is recorded.
func TestImportFollowsLinksInsideRoots(t *testing.T) {
	f := newFixture(t)
	src := Cache{Dir: t.TempDir()}
	cfg := f.cfg
	cfg.CacheDir = src.Dir
	snap, err := NewClient(cfg).Download(context.Background(), Request{Repo: testRepo, Revision: f.commit}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	const commit = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"
	dst := Cache{Dir: t.TempDir()}
	imported, err := dst.Import("Roboflow/rf-detr-base", commit, snap.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(imported.Files) != len(f.files) {
		t.Fatalf("imported %v, want all %d files of the snapshot", imported.Files, len(f.files))
	}
	for _, file := range f.files {
		got, err := os.ReadFile(filepath.Join(imported.Dir, file.Path))
		if err != nil || !bytes.Equal(got, file.Data) {
			t.Errorf("%s: %v", file.Path, err)
		}
	}

	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"link out of the folder", func(dir string) error { return os.Symlink(outside, filepath.Join(dir, "passwd")) }, "outside"},
		{"loop", func(dir string) error {
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
				return err
			}
			return os.Symlink("..", filepath.Join(dir, "d", "up"))
		}, "loop"},
		{"dangling", func(dir string) error { return os.Symlink("nowhere", filepath.Join(dir, "gone")) }, "cannot be followed"},
		{"fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644) }, "not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			c := Cache{Dir: t.TempDir()}
			_, err := c.Import("org/x", commit, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if files, _ := c.readListing("org/x", commit); files != nil {
				t.Error("a failed import recorded a file list")
			}
			if ref, _ := c.ReadRef("org/x", "main"); ref != "" {
				t.Error("a failed import wrote refs/main")
			}
		})
	}
}
