package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ttmodel/tt-model/internal/atomicfile"
)

// Request names the weights to bring into the cache.
type Request struct {
	Repo     string // "org/name"
	Revision string // branch, tag or commit; "" means "main"
	Allow    []string
	Ignore   []string
}

// Snapshot is a revision present in the cache.
type Snapshot struct {
	Repo      string
	Commit    string
	Dir       string   // <cache>/models--org--name/snapshots/<commit>
	Files     []string // the files selected by the patterns, all present
	Fetched   int64    // bytes received by this call (a resumed prefix is not counted)
	FromCache bool     // true when no network request was made
}

// listing is the file list of one commit as the revision API returned it,
// kept beside the cache (<repo folder>/.tt-model/<commit>.json) so a pinned
// commit can later be checked for completeness with no network at all. A
// commit never changes, so the copy never goes stale. huggingface_hub ignores
// the folder (it reads only blobs/, refs/ and snapshots/).
type listing struct {
	Commit string     `json:"commit"`
	Files  []RepoFile `json:"siblings"`
}

func (c Cache) listingPath(repo, commit string) string {
	return filepath.Join(c.RepoDir(repo), ".tt-model", commit+".json")
}

func (c Cache) writeListing(repo string, l listing) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode file list: %w", err)
	}
	if err := atomicfile.Write(c.listingPath(repo, l.Commit), b); err != nil {
		return fmt.Errorf("save file list of %s@%s: %w", repo, l.Commit, err)
	}
	return nil
}

func (c Cache) readListing(repo, commit string) (*listing, error) {
	b, err := os.ReadFile(c.listingPath(repo, commit))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read file list of %s@%s: %w", repo, commit, err)
	}
	var l listing
	if err := json.Unmarshal(b, &l); err != nil || l.Commit != commit {
		// A damaged cache entry is only a cache miss: the network has the truth.
		slog.Warn("ignoring a damaged cached file list", "path", c.listingPath(repo, commit), "err", err)
		return nil, nil
	}
	return &l, nil
}

// Download brings the selected files of req into the cache and returns the
// snapshot. A commit pin whose files are all in the cache is answered with
// no network request at all. Progress goes to progressOut (stderr).
func (c *Client) Download(ctx context.Context, req Request, progressOut io.Writer) (*Snapshot, error) {
	if err := checkRepoID(req.Repo); err != nil {
		return nil, err
	}
	rev := req.Revision
	if rev == "" {
		rev = "main"
	}
	if snap, err := c.fromCache(req, rev, c.cfg.Offline); snap != nil || err != nil {
		return snap, err
	}
	info, err := c.RevisionInfo(ctx, req.Repo, rev)
	var httpErr *HTTPError
	if err != nil && !errors.As(err, &httpErr) && ctx.Err() == nil {
		// The Hub cannot be reached (DNS, refused, timeout): what the cache
		// holds is what huggingface_hub would fall back to as well.
		if snap, cacheErr := c.fromCache(req, rev, true); cacheErr == nil && snap != nil {
			slog.Warn("the Hub is unreachable; using the cached snapshot", "repo", req.Repo, "revision", rev, "err", err)
			return snap, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if IsCommit(rev) && info.Commit != rev {
		return nil, fmt.Errorf("resolve %s@%s: the Hub answered commit %s", req.Repo, rev, info.Commit)
	}
	if err := c.cache.writeListing(req.Repo, listing{Commit: info.Commit, Files: info.Files}); err != nil {
		return nil, err
	}
	selected := selectFiles(info.Files, req.Allow, req.Ignore)
	if len(selected) == 0 {
		return nil, fmt.Errorf("%s@%s: no file matches allow_patterns %q / ignore_patterns %q", req.Repo, rev, req.Allow, req.Ignore)
	}
	fetched, err := c.fetchAll(ctx, req.Repo, info.Commit, selected, progressOut)
	if err != nil {
		return nil, err
	}
	if err := c.cache.WriteRef(req.Repo, rev, info.Commit); err != nil {
		return nil, err
	}
	return &Snapshot{
		Repo: req.Repo, Commit: info.Commit, Dir: c.cache.SnapshotDir(req.Repo, info.Commit),
		Files: paths(selected), Fetched: fetched,
	}, nil
}

// fromCache answers from the cache alone when it can: always for a commit
// pin that is complete, and for anything present when offline. It returns
// (nil, nil) when the network must be asked.
func (c *Client) fromCache(req Request, rev string, offline bool) (*Snapshot, error) {
	commit := rev
	if !IsCommit(rev) {
		if !offline {
			return nil, nil // a branch or tag can move: ask the Hub
		}
		ref, err := c.cache.ReadRef(req.Repo, rev)
		if err != nil {
			return nil, err
		}
		if ref == "" {
			return nil, fmt.Errorf("%s@%s: no ref %q in cache %s: %w", req.Repo, rev, rev, c.cache.Dir, ErrOfflineMiss)
		}
		commit = ref
	}
	dir := c.cache.SnapshotDir(req.Repo, commit)
	l, err := c.cache.readListing(req.Repo, commit)
	if err != nil {
		return nil, err
	}
	if l == nil {
		if !offline {
			return nil, nil
		}
		// Written by another tool (huggingface_hub keeps no file list): like
		// huggingface_hub offline, trust the snapshot folder if it exists.
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("%s@%s: no snapshot in cache %s: %w", req.Repo, rev, c.cache.Dir, ErrOfflineMiss)
		}
		slog.Warn("offline: using a snapshot whose file list tt-model never saw; its completeness is unchecked", "dir", dir)
		return &Snapshot{Repo: req.Repo, Commit: commit, Dir: dir, FromCache: true}, nil
	}
	selected := selectFiles(l.Files, req.Allow, req.Ignore)
	var missing []string
	for _, f := range selected {
		if !c.present(req.Repo, commit, f) {
			missing = append(missing, f.Path)
		}
	}
	if len(missing) > 0 {
		if offline {
			return nil, fmt.Errorf("%s@%s: %d file(s) missing from cache %s (%s): %w",
				req.Repo, rev, len(missing), c.cache.Dir, strings.Join(first(missing, 5), ", "), ErrOfflineMiss)
		}
		return nil, nil
	}
	return &Snapshot{Repo: req.Repo, Commit: commit, Dir: dir, Files: paths(selected), FromCache: true}, nil
}

// present reports whether f's snapshot entry resolves to a blob of its size.
// Blobs are only renamed into place after verification, so size suffices.
func (c *Client) present(repo, commit string, f RepoFile) bool {
	p, err := c.cache.PointerPath(repo, commit, f.Path)
	if err != nil {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == f.Size
}

// fetchAll brings every selected file into the snapshot, several at once.
func (c *Client) fetchAll(ctx context.Context, repo, commit string, files []RepoFile, progressOut io.Writer) (int64, error) {
	var todo []RepoFile
	var total int64
	for _, f := range files {
		if c.present(repo, commit, f) {
			continue
		}
		// The blob may be there already, shared with another commit.
		if c.cache.blobSize(repo, f.Etag()) == f.Size {
			if err := c.cache.link(repo, commit, f.Path, f.Etag()); err != nil {
				return 0, err
			}
			continue
		}
		todo = append(todo, f)
		total += f.Size
	}
	if len(todo) == 0 {
		return 0, nil
	}
	if err := c.checkSpace(repo, todo); err != nil {
		return 0, err
	}
	prog := newProgress(progressOut, fmt.Sprintf("Downloading %s (%d files)", repo, len(todo)), total)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, c.workers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, f := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := c.fetchFile(ctx, repo, commit, f, prog); err != nil {
				if errors.Is(err, context.Canceled) && ctx.Err() != nil {
					return // a consequence of another file's failure, or of the caller's cancel
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	prog.finish()
	if len(errs) > 0 {
		return prog.wire.Load(), errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		return prog.wire.Load(), err
	}
	return prog.wire.Load(), nil
}

// fetchFile asks the Hub where f lives and under which etag, downloads the
// blob and links it into the snapshot.
func (c *Client) fetchFile(ctx context.Context, repo, commit string, f RepoFile, prog *progress) error {
	meta, err := c.FileMetadata(ctx, repo, commit, f.Path)
	if err != nil {
		return err
	}
	if meta.Commit != "" && meta.Commit != commit {
		return fmt.Errorf("%s of %s: resolve answered commit %s, want %s", f.Path, repo, meta.Commit, commit)
	}
	if meta.Size != f.Size {
		return fmt.Errorf("%s of %s: resolve says %d bytes, the revision API %d", f.Path, repo, meta.Size, f.Size)
	}
	if err := c.fetchBlob(ctx, repo, f, meta, prog); err != nil {
		return err
	}
	return c.cache.link(repo, commit, f.Path, meta.Etag)
}

func selectFiles(files []RepoFile, allow, ignore []string) []RepoFile {
	keep := map[string]bool{}
	for _, p := range Filter(paths(files), allow, ignore) {
		keep[p] = true
	}
	var out []RepoFile
	for _, f := range files {
		if keep[f.Path] {
			out = append(out, f)
		}
	}
	return out
}

func paths(files []RepoFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// checkRepoID accepts "name" or "org/name" made of the characters the Hub
// allows, so a repo id can never make a path outside the cache.
func checkRepoID(repo string) error {
	parts := strings.Split(repo, "/")
	if repo == "" || len(parts) > 2 {
		return fmt.Errorf("repo id %q: want org/name", repo)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			return fmt.Errorf("repo id %q: want org/name of letters, digits, '-', '_' and '.'", repo)
		}
	}
	return nil
}
