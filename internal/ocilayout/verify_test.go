package ocilayout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestVerifyBlobs(t *testing.T) {
	dir := t.TempDir()
	img, err := random.Image(50_000, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if err := VerifyBlobs(dir, nil); err != nil {
		t.Fatalf("a freshly written layout: %v", err)
	}
	layer, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := layer[0].Digest()
	blob := filepath.Join(dir, "blobs", "sha256", d.Hex)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifyBlobs(dir, nil); err == nil || !strings.Contains(err.Error(), d.Hex) {
		t.Errorf("a flipped byte: err = %v, want the blob named", err)
	}
	if err := VerifyBlobs(dir, func(name, _ string) bool { return name == d.Hex }); err != nil {
		t.Errorf("a skipped blob is not read: %v", err)
	}
}
