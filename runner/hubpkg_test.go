package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHubRef(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join("build", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		arg  string
		ok   bool
		want HubRef
	}{
		{"acme/rf-detr", true, HubRef{Repo: "acme/rf-detr"}},
		{"acme/rf-detr@dev", true, HubRef{Repo: "acme/rf-detr", Revision: "dev"}},
		{"acme/rf-detr@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a", true, HubRef{Repo: "acme/rf-detr", Revision: "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"}},
		{"build/pkg", false, HubRef{}},     // an existing folder
		{"build/missing", false, HubRef{}}, // a mistyped path under an existing folder
		{"rf-detr", false, HubRef{}},       // no namespace
		{"acme/a--b", false, HubRef{}},     // not a valid repo id
		{"tt-model.yaml", false, HubRef{}},
	}
	for _, tc := range cases {
		got, ok := ParseHubRef(tc.arg)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseHubRef(%q) = %+v, %v; want %+v, %v", tc.arg, got, ok, tc.want, tc.ok)
		}
	}
}

// TestMaterializeLayoutConfinesLinks: a snapshot's image/ links into the
// repo's blobs/ are hard-linked into the servable layout; a link that leaves
// the repo's cache folder is refused, naming the link.
func TestMaterializeLayoutConfinesLinks(t *testing.T) {
	cases := []struct {
		name    string
		target  func(repoDir, outside string) string // the blob link's target
		wantErr string
	}{
		{"into blobs", func(string, string) string { return "../../../../../blobs/b1" }, ""},
		{"outside the cache folder", func(_, outside string) string { return outside }, "outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			repoDir := filepath.Join(dir, "hub", "models--a--b")
			src := filepath.Join(repoDir, "snapshots", "c1", "image")
			outside := filepath.Join(dir, "secret")
			write := func(p, data string) {
				t.Helper()
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(filepath.Join(repoDir, "blobs", "b1"), "blob")
			write(outside, "secret")
			write(filepath.Join(src, "index.json"), `{"schemaVersion":2}`)
			write(filepath.Join(src, "oci-layout"), `{"imageLayoutVersion":"1.0.0"}`)
			link := filepath.Join(src, "blobs", "sha256", "b1")
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.target(repoDir, outside), link); err != nil {
				t.Fatal(err)
			}
			dst, err := materializeLayout(src, repoDir, filepath.Join(dir, "images"))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "blobs/sha256/b1") {
					t.Fatalf("err %v, want one naming blobs/sha256/b1 and %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dst, "blobs", "sha256", "b1"))
			if err != nil || string(got) != "blob" {
				t.Fatalf("blob in the layout: %q, %v", got, err)
			}
			if fi, err := os.Lstat(filepath.Join(dst, "index.json")); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("index.json in the layout: %v, %v", fi, err)
			}
		})
	}
}
