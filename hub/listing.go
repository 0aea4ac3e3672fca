package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/ttmodel/tt-model/internal/atomicfile"
)

// The file list of a commit is kept in the cache so a pinned commit can be
// checked for completeness with no network. It is huggingface_hub's own tree
// cache (_tree_cache.py, written by snapshot_download since mid-2026):
// <repo folder>/trees/<commit>.json, format_version 1, so either tool can
// check a snapshot the other wrote. A commit never changes, so the file
// never goes stale.

// treeCacheFormat is huggingface_hub's TREE_CACHE_FORMAT_VERSION.
const treeCacheFormat = 1

// treeCacheEntry is huggingface_hub's TreeCacheEntry.to_json.
type treeCacheEntry struct {
	Size      int64  `json:"size"`
	BlobID    string `json:"blob_id"`
	LFSSHA256 string `json:"lfs_sha256,omitempty"`
	LFSSize   *int64 `json:"lfs_size,omitempty"`
	XetHash   string `json:"xet_hash,omitempty"`
}

type treeCacheFile struct {
	FormatVersion int                       `json:"format_version"`
	Files         map[string]treeCacheEntry `json:"files"`
}

func (c Cache) listingPath(repo, commit string) string {
	return filepath.Join(c.RepoDir(repo), "trees", commit+".json")
}

// writeListing saves the file list of commit.
func (c Cache) writeListing(repo, commit string, files []RepoFile) error {
	out := treeCacheFile{FormatVersion: treeCacheFormat, Files: map[string]treeCacheEntry{}}
	for _, f := range files {
		e := treeCacheEntry{Size: f.Size, BlobID: f.BlobID, XetHash: f.XetHash}
		if f.LFS != nil {
			size := f.LFS.Size
			e.LFSSHA256, e.LFSSize = f.LFS.SHA256, &size
		}
		out.Files[f.Path] = e
	}
	b, err := json.MarshalIndent(out, "", " ") // indent=1, as json.dump writes it
	if err != nil {
		return fmt.Errorf("encode the file list of %s@%s: %w", repo, commit, err)
	}
	if err := atomicfile.Write(c.listingPath(repo, commit), b); err != nil {
		return fmt.Errorf("save the file list of %s@%s: %w", repo, commit, err)
	}
	return nil
}

// readListing returns the saved file list of commit, sorted by path, or nil
// when there is none. A damaged or newer-format file is only a cache miss,
// as huggingface_hub treats it.
func (c Cache) readListing(repo, commit string) ([]RepoFile, error) {
	path := c.listingPath(repo, commit)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the file list of %s@%s: %w", repo, commit, err)
	}
	var in treeCacheFile
	if err := json.Unmarshal(b, &in); err != nil || in.FormatVersion != treeCacheFormat || in.Files == nil {
		slog.Warn("ignoring an unreadable cached file list", "path", path, "err", err, "format_version", in.FormatVersion)
		return nil, nil
	}
	files := make([]RepoFile, 0, len(in.Files))
	for p, e := range in.Files {
		// The names become paths (snapshots/<commit>/<p>, blobs/<etag>):
		// a list that names anything else was not written by a pull.
		if !safeRepoPath(p) || !isHex(e.BlobID, 40) || (e.LFSSHA256 != "" && !isHex(e.LFSSHA256, 64)) {
			slog.Warn("ignoring a cached file list with a path or blob id no Hub listing has", "path", path, "file", p)
			return nil, nil
		}
		f := RepoFile{Path: p, Size: e.Size, BlobID: e.BlobID, XetHash: e.XetHash}
		if e.LFSSHA256 != "" {
			f.LFS = &LFSInfo{SHA256: e.LFSSHA256, Size: e.Size}
			if e.LFSSize != nil {
				f.LFS.Size = *e.LFSSize
			}
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
