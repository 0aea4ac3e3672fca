package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/internal/atomicfile"
)

// The build cache under the user's cache folder (~/.cache/tt-model):
// compressed layers by what their bytes depend on, and what the builder
// reads of a base (its file tree, account files, sizes) by the base's
// digest. A rebuild then compresses only the layers whose inputs changed
// and reads the base once. Entries unused for cacheMaxAge are removed.
const cacheMaxAge = 14 * 24 * time.Hour

// userCacheDir returns (and makes) a folder of the build cache, "" when the user
// has no cache folder (the builder then works without a cache).
func userCacheDir(sub string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "tt-model", sub)
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return dir
}

// layerKey is everything a layer's compressed bytes depend on: each
// entry's header fields and content, the epoch, the gzip level and the
// compressor (Go's version).
func layerKey(entries []oci.Entry, epoch time.Time) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "tt-model layer v1\x00%s\x00%d\x00%d\x00", runtime.Version(), oci.GzipLevel, epoch.Unix())
	for _, e := range oci.SortedEntries(entries) {
		fmt.Fprintf(h, "%s\x00%c\x00%o\x00%d\x00%d\x00%s\x00", e.Path, e.Type, e.Mode, e.UID, e.GID, e.Linkname)
		switch {
		case e.Source != "":
			f, err := os.Open(e.Source)
			if err != nil {
				return "", fmt.Errorf("read %s for %s: %w", e.Source, e.Path, err)
			}
			c := sha256.New()
			_, err = io.Copy(c, f)
			f.Close()
			if err != nil {
				return "", fmt.Errorf("read %s for %s: %w", e.Source, e.Path, err)
			}
			h.Write(c.Sum(nil))
		default:
			c := sha256.Sum256(e.Data)
			h.Write(c[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cachedLayerMeta is what a cached blob's sidecar records.
type cachedLayerMeta struct {
	Uncompressed int64 `json:"uncompressed"`
	Files        int   `json:"files"`
}

// readCachedLayer returns the blob file and sizes of a cached layer.
func readCachedLayer(dir, key string) (string, cachedLayerMeta, bool) {
	var meta cachedLayerMeta
	blob := filepath.Join(dir, key+".tar.gz")
	b, err := os.ReadFile(filepath.Join(dir, key+".json"))
	if err != nil || json.Unmarshal(b, &meta) != nil {
		return "", meta, false
	}
	if _, err := os.Stat(blob); err != nil {
		return "", meta, false
	}
	now := time.Now()
	_ = os.Chtimes(blob, now, now) // used: keep it past the next prune
	return blob, meta, true
}

// writeCachedLayer stores a built layer, the blob before its sidecar, each
// renamed into place, so a reader never sees half a layer.
func writeCachedLayer(dir, key string, blob []byte, meta cachedLayerMeta) (string, error) {
	final := filepath.Join(dir, key+".tar.gz")
	if err := atomicfile.Write(final, blob); err != nil {
		return "", err
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	return final, atomicfile.Write(filepath.Join(dir, key+".json"), b)
}

// pruneCache removes the entries of dir unused for cacheMaxAge.
func pruneCache(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-cacheMaxAge)
	var old []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			old = append(old, e.Name())
		}
	}
	sort.Strings(old)
	for _, name := range old {
		os.RemoveAll(filepath.Join(dir, name))
	}
}

// cachedBuildLayer is oci.BuildLayer through the layer cache in dir ("" = no
// cache): equal inputs give the stored blob, byte for byte what oci.BuildLayer
// would write, without compressing again.
func cachedBuildLayer(dir string, entries []oci.Entry, epoch time.Time, description string) (oci.LayerBlob, error) {
	if dir == "" {
		return oci.BuildLayer(entries, epoch, description)
	}
	key, err := layerKey(entries, epoch)
	if err != nil {
		return oci.LayerBlob{}, err
	}
	if file, meta, ok := readCachedLayer(dir, key); ok {
		layer, err := tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer))
		info, statErr := os.Stat(file)
		if err == nil && statErr == nil {
			return oci.LayerBlob{Layer: layer, Uncompressed: meta.Uncompressed, Compressed: info.Size(),
				Description: description, Files: meta.Files, File: file, Cached: true}, nil
		}
	}
	lb, err := oci.BuildLayer(entries, epoch, description)
	if err != nil {
		return lb, err
	}
	if file, err := writeCachedLayer(dir, key, lb.Blob, cachedLayerMeta{Uncompressed: lb.Uncompressed, Files: lb.Files}); err == nil {
		lb.File = file
	}
	return lb, nil
}

// buildLayers writes the planned layers, compressing them concurrently:
// gzip of the binaries is most of an image's assembly time, and each layer's
// bytes depend on its own entries only. A layer whose inputs did not change
// since an earlier build comes from the layer cache.
func buildLayers(plans []*oci.LayerPlan, epoch time.Time) ([]oci.LayerBlob, error) {
	dir := userCacheDir("layers")
	if dir != "" {
		defer pruneCache(dir)
	}
	blobs := make([]oci.LayerBlob, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			blobs[i], errs[i] = cachedBuildLayer(dir, p.Entries, epoch, p.Description)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return blobs, nil
}
