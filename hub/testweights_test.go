package hub

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ttmodel/tt-model/hub/hubtest"
)

// TestTestWeightsMarkerTravels: a marked checkpoint keeps its mark through `weights import`, and
// through a download from a Hub serving it, even when the allow patterns name only the weights.
func TestTestWeightsMarkerTravels(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "model.safetensors"), randomBytes(4000, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteTestWeightsMarker(src, "a unit test, seed 5"); err != nil {
		t.Fatal(err)
	}
	if what, ok := TestWeightsIn(src); !ok || what != "a unit test, seed 5" {
		t.Fatalf("TestWeightsIn(checkpoint) = %q, %v", what, ok)
	}
	const commit = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"
	cache := Cache{Dir: t.TempDir()}
	snap, err := cache.Import("Roboflow/rf-detr-base", commit, src)
	if err != nil {
		t.Fatal(err)
	}
	if what, ok := TestWeightsIn(snap.Dir); !ok || what != "a unit test, seed 5" {
		t.Errorf("TestWeightsIn(imported snapshot) = %q, %v", what, ok)
	}

	srv := hubtest.New()
	t.Cleanup(srv.Close)
	data, _ := os.ReadFile(filepath.Join(src, "model.safetensors"))
	mark, _ := os.ReadFile(filepath.Join(src, TestWeightsFile))
	srv.AddCommitAt("Roboflow/rf-detr-base", "main", commit, []hubtest.File{
		{Path: "model.safetensors", Data: data, LFS: true}, {Path: TestWeightsFile, Data: mark},
	})
	c := NewClient(Config{Endpoint: srv.URL, CacheDir: t.TempDir()})
	got, err := c.Download(context.Background(), Request{Repo: "Roboflow/rf-detr-base", Revision: commit, Allow: []string{"model.safetensors"}}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if what, ok := TestWeightsIn(got.Dir); !ok || what != "a unit test, seed 5" {
		t.Errorf("TestWeightsIn(downloaded snapshot) = %q, %v", what, ok)
	}
	// Without a marker the same file is real weights.
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "model.safetensors"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if what, ok := TestWeightsIn(plain); ok {
		t.Errorf("an unmarked folder reported as test weights (%q)", what)
	}
}

// TestTestWeightsFromSafetensorsGenerator: an unmarked checkpoint that a tt-model generator
// stamped in its safetensors header is test weights (a snapshot an older demo stored).
func TestTestWeightsFromSafetensorsGenerator(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{`{"__metadata__":{"format":"pt","generator":"tt-model random RF-DETR-base, seed 1"}}`, true},
		{`{"__metadata__":{"format":"pt"}}`, false},
		{`not json`, false},
	} {
		dir := t.TempDir()
		b := make([]byte, 8, 8+len(tc.header))
		n := uint64(len(tc.header))
		for i := range 8 {
			b[i] = byte(n >> (8 * i))
		}
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), append(b, tc.header...), 0o644); err != nil {
			t.Fatal(err)
		}
		if what, ok := TestWeightsIn(dir); ok != tc.want {
			t.Errorf("header %s: TestWeightsIn = %q, %v, want %v", tc.header, what, ok, tc.want)
		}
	}
}

// TestDropSnapshotKeepsSharedBlobs: dropping one commit removes its folder, its file list and the
// blobs only it used; a blob another commit links to stays, and that commit stays complete.
func TestDropSnapshotKeepsSharedBlobs(t *testing.T) {
	cache := Cache{Dir: t.TempDir()}
	const repo = "org/model"
	a, b := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shared, own := randomBytes(3000, 1), randomBytes(3000, 2)
	write := func(files map[string][]byte) string {
		dir := t.TempDir()
		for p, d := range files {
			if err := os.WriteFile(filepath.Join(dir, p), d, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	if _, err := cache.Import(repo, a, write(map[string][]byte{"shared.safetensors": shared, "own.safetensors": own})); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Import(repo, b, write(map[string][]byte{"shared.safetensors": shared})); err != nil {
		t.Fatal(err)
	}
	if err := cache.DropSnapshot(repo, a); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{cache.SnapshotDir(repo, a), cache.listingPath(repo, a), cache.BlobPath(repo, hubtest.SHA256(own))} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	if _, err := os.Stat(cache.BlobPath(repo, hubtest.SHA256(shared))); err != nil {
		t.Errorf("the shared blob went: %v", err)
	}
	rep, err := cache.VerifySnapshot(repo, b, nil, nil, true)
	if err != nil || len(rep.Missing)+len(rep.Corrupt) > 0 {
		t.Errorf("the other commit after the drop: %+v, %v", rep, err)
	}
	if err := cache.DropSnapshot(repo, "main"); err == nil {
		t.Error("a branch name accepted")
	}
}
