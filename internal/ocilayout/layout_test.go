package ocilayout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// namedLayout writes a layout holding one random image per name (an empty
// name writes the entry without the annotation) and returns the digests.
func namedLayout(t *testing.T, names ...string) (string, []v1.Hash) {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var digests []v1.Hash
	for _, n := range names {
		img, err := random.Image(100, 1)
		if err != nil {
			t.Fatal(err)
		}
		var opts []layout.Option
		if n != "" {
			opts = append(opts, layout.WithAnnotations(map[string]string{RefName: n}))
		}
		if err := p.AppendImage(img, opts...); err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	return dir, digests
}

func TestImage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		names  []string
		tag    string
		orOnly bool
		want   int    // index of the image opened; -1 for an error
		err    string // part of the error
	}{
		{"only image, no tag", []string{"a"}, "", false, 0, ""},
		{"named among two", []string{"a", "b"}, "b", false, 1, ""},
		{"two, no tag", []string{"a", "b"}, "", false, -1, "lists 2 images, want 1"},
		{"name missing", []string{"a"}, "x", false, -1, "lists 0 images named x"},
		{"name twice", []string{"a", "a"}, "a", true, -1, "lists 2 images named a"},
		{"name missing, only image", []string{""}, "x", true, 0, ""},
		{"named wins over fallback", []string{"a", "b"}, "a", true, 0, ""},
		{"name missing, two images", []string{"a", "b"}, "x", true, -1, "lists 2 images (none named x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, digests := namedLayout(t, tc.names...)
			open := Image
			if tc.orOnly {
				open = ImageOrOnly
			}
			img, err := open(dir, tc.tag)
			if tc.want < 0 {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("err = %v, want %q naming %s", err, tc.err, dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := img.Digest(); d != digests[tc.want] {
				t.Errorf("opened %s, want %s", d, digests[tc.want])
			}
		})
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	// A partial write left by an earlier run is replaced, not read.
	if err := os.MkdirAll(filepath.Join(dir+".partial", "junk"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(1000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(dir, img); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + ".partial"); !os.IsNotExist(err) {
		t.Errorf("%s.partial is left behind: %v", dir, err)
	}
	got, err := Image(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("read back %s, want %s", d, want)
	}
	if err := VerifyBlobs(dir, nil); err != nil {
		t.Error(err)
	}
	// The rename does not replace an existing layout: the second write
	// fails and cleans up after itself.
	if err := WriteAtomic(dir, img); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("second write: err = %v, want it to fail naming %s", err, dir)
	}
	if _, err := os.Stat(dir + ".partial"); !os.IsNotExist(err) {
		t.Errorf("a failed write left %s.partial: %v", dir, err)
	}
}
