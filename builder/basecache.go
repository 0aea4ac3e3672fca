package builder

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/internal/atomicfile"
)

// baseScan is what the builder reads of a base, kept in the build cache by
// the base's digest: reading a multi-gigabyte base's file system is most of
// a warm build otherwise.
type baseScan struct {
	Types        map[string]byte   `json:"types"`
	Links        map[string]string `json:"links"`
	Passwd       []byte            `json:"passwd"`
	Group        []byte            `json:"group"`
	Uncompressed int64             `json:"uncompressed"`
}

// scanCached is scan through the build cache.
func (b *baseImage) scanCached() error {
	dir := userCacheDir("bases")
	var file string
	if h, err := v1.NewHash(b.Digest); err == nil && dir != "" {
		file = filepath.Join(dir, h.Hex+".scan.json")
		if data, err := os.ReadFile(file); err == nil {
			var s baseScan
			if json.Unmarshal(data, &s) == nil && s.Types != nil {
				b.Tree.Types, b.Tree.Links = s.Types, s.Links
				if b.Tree.Links == nil {
					b.Tree.Links = map[string]string{}
				}
				b.Passwd, b.Group, b.Uncompressed = s.Passwd, s.Group, s.Uncompressed
				now := time.Now()
				_ = os.Chtimes(file, now, now)
				return nil
			}
		}
	}
	if err := b.scan(); err != nil {
		return err
	}
	if file != "" {
		data, err := json.Marshal(baseScan{Types: b.Tree.Types, Links: b.Tree.Links, Passwd: b.Passwd, Group: b.Group, Uncompressed: b.Uncompressed})
		if err == nil {
			_ = atomicfile.Write(file, data) // the cache is an optimisation
		}
		pruneCache(dir)
	}
	return nil
}

// blobFiles maps the blobs of an image that already lie on this machine
// (the base's OCI layout, the layer cache) to their files.
func blobFiles(base *baseImage, ours []oci.LayerBlob) map[string]string {
	out := map[string]string{}
	if base != nil && base.LayoutDir != "" {
		if layers, err := base.Image.Layers(); err == nil {
			for _, l := range layers {
				if d, err := l.Digest(); err == nil {
					out[d.Hex] = filepath.Join(base.LayoutDir, "blobs", d.Algorithm, d.Hex)
				}
			}
		}
	}
	for _, l := range ours {
		if l.File == "" {
			continue
		}
		if d, err := l.Layer.Digest(); err == nil {
			out[d.Hex] = l.File
		}
	}
	return out
}

// linkBlobs hard-links known blob files into a new layout's blobs/sha256,
// where the layout writer then skips them. Where a link cannot be made
// (another file system) the writer copies as usual.
func linkBlobs(layoutDir string, files map[string]string) error {
	dir := filepath.Join(layoutDir, "blobs", "sha256")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for hex, file := range files {
		_ = os.Link(file, filepath.Join(dir, hex))
	}
	return nil
}
