package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/internal/atomicfile"
	"github.com/ttmodel/tt-model/internal/safename"
)

// IsCommit reports whether rev is a full commit sha (a pin that cannot move).
func IsCommit(rev string) bool { return isHex(rev, 40) }

// Cache is one huggingface_hub cache directory (HF_HUB_CACHE).
type Cache struct{ Dir string }

// RepoFolderName is huggingface_hub's repo_folder_name for a model repo:
// "org/name" becomes "models--org--name".
func RepoFolderName(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// RepoDir is the per-repository folder.
func (c Cache) RepoDir(repo string) string { return filepath.Join(c.Dir, RepoFolderName(repo)) }

// BlobPath is where a file's content lives, named by its etag.
func (c Cache) BlobPath(repo, etag string) string {
	return filepath.Join(c.RepoDir(repo), "blobs", etag)
}

// SnapshotDir is the folder of one commit's files (symlinks into blobs/).
func (c Cache) SnapshotDir(repo, commit string) string {
	return filepath.Join(c.RepoDir(repo), "snapshots", commit)
}

// LockPath is the lock huggingface_hub takes while writing a blob.
func (c Cache) LockPath(repo, etag string) string {
	return filepath.Join(c.Dir, ".locks", RepoFolderName(repo), etag+".lock")
}

// PointerPath is a file's path inside a snapshot. It refuses paths that would
// leave the snapshot folder, as huggingface_hub's _get_pointer_path does.
func (c Cache) PointerPath(repo, commit, file string) (string, error) {
	p, err := safename.Join(c.SnapshotDir(repo, commit), filepath.FromSlash(file))
	if err != nil {
		return "", fmt.Errorf("file %q of %s escapes the snapshot folder", file, repo)
	}
	return p, nil
}

// refPath is the file of a ref, refs/<ref> in the repo folder. The ref comes
// from a manifest, a command line or the Hub, so it is checked against the
// revision rules and must stay inside refs/.
func (c Cache) refPath(repo, ref string) (string, error) {
	if err := safename.Revision(ref); err != nil {
		return "", fmt.Errorf("ref of %s: %w", repo, err)
	}
	p, err := safename.Join(filepath.Join(c.RepoDir(repo), "refs"), filepath.FromSlash(ref))
	if err != nil {
		return "", fmt.Errorf("ref of %s: %w", repo, err)
	}
	return p, nil
}

// ReadRef returns the commit a ref (a branch or tag name) points at, or ""
// when the cache has no such ref. A ref file that does not hold a 40-hex
// commit is an error, never a commit to look up.
func (c Cache) ReadRef(repo, ref string) (string, error) {
	path, err := c.refPath(repo, ref)
	if err != nil {
		return "", err
	}
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ref %s of %s: %w", ref, repo, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", fmt.Errorf("read ref %s of %s: %w", ref, repo, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("ref %s of %s: %s is not a regular file", ref, repo, path)
	}
	// A ref holds 40 hex digits (and maybe a newline); more is not a ref.
	b, err := io.ReadAll(io.LimitReader(fh, 128))
	if err != nil {
		return "", fmt.Errorf("read ref %s of %s: %w", ref, repo, err)
	}
	commit := strings.TrimSpace(string(b))
	if !IsCommit(commit) {
		return "", fmt.Errorf("ref %s of %s: %s does not hold a 40-hex commit id", ref, repo, path)
	}
	return commit, nil
}

// WriteRef records that ref points at commit, atomically, and only when it
// changed (huggingface_hub's _cache_commit_hash_for_specific_revision).
func (c Cache) WriteRef(repo, ref, commit string) error {
	if ref == commit {
		return nil
	}
	if !IsCommit(commit) {
		return fmt.Errorf("write ref %s of %s: %q is not a 40-hex commit id", ref, repo, commit)
	}
	path, err := c.refPath(repo, ref)
	if err != nil {
		return err
	}
	if cur, err := c.ReadRef(repo, ref); err == nil && cur == commit {
		return nil
	}
	if err := atomicfile.Write(path, []byte(commit)); err != nil {
		return fmt.Errorf("write ref %s of %s: %w", ref, repo, err)
	}
	return nil
}

// link points the snapshot entry for file at its blob with a RELATIVE
// symlink (../../blobs/<etag>, one more ../ per folder level), so the cache
// can be moved or bind-mounted elsewhere, as in a container under /hf.
func (c Cache) link(repo, commit, file, etag string) error {
	pointer, err := c.PointerPath(repo, commit, file)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return fmt.Errorf("snapshot folder for %s: %w", file, err)
	}
	rel, err := filepath.Rel(filepath.Dir(pointer), c.BlobPath(repo, etag))
	if err != nil {
		return fmt.Errorf("relative blob path for %s: %w", file, err)
	}
	if cur, err := os.Readlink(pointer); err == nil && cur == rel {
		return nil
	}
	tmp := pointer + ".tt-model-link"
	_ = os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("link %s: %w", file, err)
	}
	if err := os.Rename(tmp, pointer); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("link %s: %w", file, err)
	}
	return nil
}

// blobSize is the size of a finished blob, or -1 when it is absent.
func (c Cache) blobSize(repo, etag string) int64 {
	fi, err := os.Stat(c.BlobPath(repo, etag))
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	return fi.Size()
}

// EnsureDefaultRef points refs/main at commit when the cache has no
// refs/main. A commit-pinned download leaves no ref behind, and a loader that
// names the weights by repo id while offline (HF_HUB_OFFLINE=1 in the
// container) resolves that id through refs/main. An existing ref is someone
// else's cache state and is left alone (upstream tt-model does the same).
func (c Cache) EnsureDefaultRef(repo, commit string) error {
	cur, err := c.ReadRef(repo, "main")
	if err != nil || cur != "" {
		return err
	}
	return c.WriteRef(repo, "main", commit)
}
