package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/internal/safename"
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

// Download brings the selected files of req into the cache and returns the
// snapshot. A commit pin whose files are all in the cache is answered with no
// network request at all. When the Hub cannot be reached (or HF_HUB_OFFLINE
// is set) the cache answers only if every selected file of the revision is
// complete there. Progress goes to progressOut (stderr).
func (c *Client) Download(ctx context.Context, req Request, progressOut io.Writer) (*Snapshot, error) {
	if err := ValidateRepoID(req.Repo); err != nil {
		return nil, err
	}
	rev := req.Revision
	if rev == "" {
		rev = "main"
	}
	if err := safename.Revision(rev); err != nil {
		return nil, fmt.Errorf("%s: %w", req.Repo, err)
	}
	if IsCommit(rev) || c.cfg.Offline {
		snap, err := c.fromCache(req, rev)
		if snap != nil || c.cfg.Offline {
			if err != nil {
				err = fmt.Errorf("%w (%s: the Hub was not asked)", err, c.offlineWhy)
			}
			return snap, err
		}
	}
	commit := rev
	if !IsCommit(rev) {
		var err error
		if commit, err = c.ResolveRevision(ctx, req.Repo, rev); err != nil {
			return c.fallback(ctx, req, rev, err)
		}
	}
	files, err := c.cache.readListing(req.Repo, commit)
	if err != nil {
		return nil, err
	}
	var selected []RepoFile
	if files != nil {
		selected = withTestWeightsMarker(files, selectFiles(files, req.Allow, req.Ignore))
	} else {
		l, err := c.ListFiles(ctx, req.Repo, commit, req.Allow, req.Ignore)
		if err != nil {
			return c.fallback(ctx, req, rev, err)
		}
		if l.Unusable == 0 {
			if err := c.cache.writeListing(req.Repo, commit, l.Files); err != nil {
				return nil, err
			}
		}
		selected = withTestWeightsMarker(l.Files, l.Selected)
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("%s@%s: no file matches allow_patterns %q / ignore_patterns %q", req.Repo, rev, req.Allow, req.Ignore)
	}
	fetched, err := c.fetchAll(ctx, req.Repo, commit, selected, progressOut)
	if err != nil {
		return nil, err
	}
	if err := c.cache.WriteRef(req.Repo, rev, commit); err != nil {
		return nil, err
	}
	return &Snapshot{
		Repo: req.Repo, Commit: commit, Dir: c.cache.SnapshotDir(req.Repo, commit),
		Files: paths(selected), Fetched: fetched,
	}, nil
}

// fallback answers from the cache after a failed request, only when the
// failure says the Hub cannot be reached (huggingface_hub's ConnectError and
// TimeoutException); any answer the Hub gave is the error to report.
func (c *Client) fallback(ctx context.Context, req Request, rev string, cause error) (*Snapshot, error) {
	if ctx.Err() != nil || !Unreachable(cause) {
		return nil, cause
	}
	snap, err := c.fromCache(req, rev)
	if snap == nil {
		return nil, fmt.Errorf("the Hub cannot be reached (%v), and the cache cannot stand in: %w", cause, err)
	}
	slog.Warn("the Hub cannot be reached; every selected file is complete in the cache, using it", "repo", req.Repo, "revision", rev, "err", cause)
	return snap, nil
}

// fromCache returns the snapshot of rev when the cache alone can vouch that
// every selected file is complete, or nil and an error (wrapping
// ErrOfflineMiss) saying what is missing. A branch or tag goes through
// refs/.
func (c *Client) fromCache(req Request, rev string) (*Snapshot, error) {
	commit := rev
	if !IsCommit(rev) {
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
	files, err := c.cache.readListing(req.Repo, commit)
	if err != nil {
		return nil, err
	}
	if files == nil {
		return c.unlistedSnapshot(req, rev, commit)
	}
	selected := selectFiles(files, req.Allow, req.Ignore)
	if len(selected) == 0 {
		return nil, fmt.Errorf("%s@%s: no file of commit %s matches allow_patterns %q / ignore_patterns %q", req.Repo, rev, commit, req.Allow, req.Ignore)
	}
	var missing []string
	for _, f := range selected {
		if !c.cache.present(req.Repo, commit, f) {
			missing = append(missing, f.Path)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s@%s: %d file(s) of commit %s missing or incomplete in cache %s (%s): %w",
			req.Repo, rev, len(missing), commit, c.cache.Dir, strings.Join(first(missing, 5), ", "), ErrOfflineMiss)
	}
	var corrupt []error
	for _, f := range selected {
		if _, err := c.cache.checkBlob(req.Repo, f, false); err != nil {
			corrupt = append(corrupt, err)
		}
	}
	if len(corrupt) > 0 {
		return nil, fmt.Errorf("%s@%s: %w: %w", req.Repo, rev, errors.Join(corrupt...), ErrOfflineMiss)
	}
	return &Snapshot{Repo: req.Repo, Commit: commit, Dir: dir, Files: paths(selected), FromCache: true}, nil
}

// unlistedSnapshot judges a snapshot whose file list was never saved (a
// cache written by a huggingface_hub older than its tree cache). Nothing
// says which files the commit has, so it is used only when nothing hints at
// an interrupted download: every allow pattern matches a present file, no
// link dangles, and no partial blob of the repo is left.
func (c *Client) unlistedSnapshot(req Request, rev, commit string) (*Snapshot, error) {
	dir := c.cache.SnapshotDir(req.Repo, commit)
	miss := func(format string, args ...any) (*Snapshot, error) {
		return nil, fmt.Errorf("%s@%s: snapshot %s has no saved file list and %s: %w", req.Repo, rev, dir, fmt.Sprintf(format, args...), ErrOfflineMiss)
	}
	var present, dangling []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			dangling = append(dangling, filepath.ToSlash(rel))
			return nil
		}
		present = append(present, filepath.ToSlash(rel))
		return nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return miss("does not exist")
	case err != nil:
		return nil, fmt.Errorf("read snapshot %s: %w", dir, err)
	case len(dangling) > 0:
		return miss("links to missing blobs (%s)", strings.Join(first(dangling, 5), ", "))
	}
	partial, _ := filepath.Glob(filepath.Join(c.cache.RepoDir(req.Repo), "blobs", "*.incomplete"))
	if len(partial) > 0 {
		return miss("an interrupted download left %s", strings.Join(first(partial, 3), ", "))
	}
	selected := Filter(present, req.Allow, req.Ignore)
	if len(selected) == 0 {
		return miss("holds no file matching allow_patterns %q / ignore_patterns %q", req.Allow, req.Ignore)
	}
	for _, pat := range req.Allow {
		if len(Filter(selected, []string{pat}, nil)) == 0 {
			return miss("holds no file for allow pattern %q", pat)
		}
	}
	slog.Warn("using a snapshot whose file list tt-model never saw: every allow pattern has a file, but completeness cannot be proven", "dir", dir)
	return &Snapshot{Repo: req.Repo, Commit: commit, Dir: dir, Files: selected, FromCache: true}, nil
}

// present reports whether f's snapshot entry resolves to a blob of its size
// named by its etag. Blobs are only renamed into place after verification,
// so name and size suffice here.
func (c Cache) present(repo, commit string, f RepoFile) bool {
	p, err := c.PointerPath(repo, commit, f.Path)
	if err != nil {
		return false
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return false
	}
	if target, err := os.Readlink(p); err == nil && filepath.Base(target) != f.Etag() {
		return false
	}
	return true
}

// fetchAll brings every selected file into the snapshot, several at once.
func (c *Client) fetchAll(ctx context.Context, repo, commit string, files []RepoFile, progressOut io.Writer) (int64, error) {
	var todo []RepoFile
	var total int64
	for _, f := range files {
		// The blob may be there already, linked or shared with another commit:
		// it is used once it still hashes to what the Hub lists.
		if c.cache.present(repo, commit, f) || c.cache.blobSize(repo, f.Etag()) == f.Size {
			_, err := c.cache.checkBlob(repo, f, false)
			var corrupt *CorruptError
			switch {
			case err == nil:
				if err := c.cache.link(repo, commit, f.Path, f.Etag()); err != nil {
					return 0, err
				}
				continue
			case errors.As(err, &corrupt):
				slog.Warn("a cached file is corrupt; downloading it again", "repo", repo, "file", f.Path, "err", corrupt.Err)
				if err := c.cache.dropBlob(repo, f.Etag()); err != nil {
					return 0, err
				}
			default:
				return 0, err
			}
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
	err := parallel(ctx, c.workers, todo, func(ctx context.Context, f RepoFile) error {
		return c.fetchFile(ctx, repo, commit, f, prog)
	})
	prog.finish()
	if err == nil {
		err = ctx.Err()
	}
	return prog.wire.Load(), err
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
		return fmt.Errorf("%s of %s: resolve says %d bytes, the tree API %d", f.Path, repo, meta.Size, f.Size)
	}
	if meta.Etag != f.Etag() {
		return fmt.Errorf("%s of %s: resolve names the blob %s, the tree API %s", f.Path, repo, meta.Etag, f.Etag())
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

// ValidateRepoID applies huggingface_hub's validate_repo_id
// (utils/_validators.py): "name" or "namespace/name", each part 1-96 of
// [A-Za-z0-9._-] starting and ending with a letter, digit or "_", no "--" or
// "..", no ".git" suffix; so a repo id can never make a path outside the cache.
func ValidateRepoID(repo string) error {
	parts := strings.Split(repo, "/")
	if repo == "" || len(parts) > 2 {
		return fmt.Errorf("repo id %q: want org/name", repo)
	}
	for _, p := range parts {
		edge := func(c byte) bool { return c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z') }
		switch {
		case len(p) == 0 || len(p) > 96:
			return fmt.Errorf("repo id %q: each part must have 1 to 96 characters", repo)
		case strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "":
			return fmt.Errorf("repo id %q: only letters, digits, '-', '_' and '.' are allowed", repo)
		case !edge(p[0]) || !edge(p[len(p)-1]):
			return fmt.Errorf("repo id %q: each part must start and end with a letter, digit or '_'", repo)
		case strings.Contains(p, "--") || strings.Contains(p, ".."):
			return fmt.Errorf("repo id %q: '--' and '..' are not allowed", repo)
		}
	}
	if strings.HasSuffix(repo, ".git") {
		return fmt.Errorf("repo id %q: must not end in .git", repo)
	}
	return nil
}
