package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/internal/fslink"
)

// lfsMinSize and isLFSFormat decide which imported files are stored as LFS
// files (sha256 etag), following the Hub's default .gitattributes: weight
// formats, and anything over 10 MiB.
const lfsMinSize = 10 << 20

func isLFSFormat(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".gguf", ".h5", ".msgpack", ".npz", ".npy":
		return true
	}
	return false
}

// Import stores every file under dir in the cache as commit of repo,
// exactly as a download would have: blobs named by the etag the Hub would
// give (sha256 for LFS-sized or weight files, the git blob sha1 otherwise),
// relative snapshot links, refs/main when absent, and the file list, so a
// pin on this commit is complete with no network. It is how locally made
// weights (a test or demo checkpoint) stand in for a Hub repo.
//
// Symbolic links are followed when they resolve inside dir or, when dir is
// a snapshot of a Hugging Face cache, inside that repo's folder (a snapshot
// is all links into ../../blobs). A link that leaves those roots, a loop, a
// dangling link or anything but a regular file or folder fails the import
// before anything is recorded.
func (c Cache) Import(repo, commit, dir string) (*Snapshot, error) {
	if err := ValidateRepoID(repo); err != nil {
		return nil, err
	}
	if !IsCommit(commit) {
		return nil, fmt.Errorf("import %s: revision %q is not a 40-hex commit", repo, commit)
	}
	sources, err := importSources(dir)
	if err != nil {
		return nil, fmt.Errorf("import %s into %s@%s: %w", dir, repo, commit, err)
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("import %s: no files", dir)
	}
	files := make([]RepoFile, 0, len(sources))
	for _, src := range sources {
		f, err := c.importFile(repo, commit, src.rel, src.path)
		if err != nil {
			return nil, fmt.Errorf("import %s into %s@%s: %s: %w", dir, repo, commit, src.rel, err)
		}
		files = append(files, f)
	}
	if err := c.writeListing(repo, commit, files); err != nil {
		return nil, err
	}
	if err := c.EnsureDefaultRef(repo, commit); err != nil {
		return nil, err
	}
	return &Snapshot{Repo: repo, Commit: commit, Dir: c.SnapshotDir(repo, commit), Files: paths(files)}, nil
}

// importSource is one file to import: its path in the repo and where its
// content is read from (a link resolved).
type importSource struct{ rel, path string }

// importSources lists the files under dir, following links within the
// allowed roots (see Import).
func importSources(dir string) ([]importSource, error) {
	root, err := fslink.OnHost(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", dir)
	}
	allowed := []string{root}
	// …/models--org--name/snapshots/<commit>: its links point into blobs/.
	if snaps := filepath.Dir(root); filepath.Base(snaps) == "snapshots" && strings.HasPrefix(filepath.Base(filepath.Dir(snaps)), "models--") {
		allowed = append(allowed, filepath.Dir(snaps))
	}
	var roots []*fslink.Root
	for _, d := range allowed {
		r, err := fslink.NewRoot(d)
		if err != nil {
			return nil, err
		}
		roots = append(roots, r)
	}
	inRoots := func(p string) bool {
		for _, r := range roots {
			if r.Contains(p) {
				return true
			}
		}
		return false
	}
	var out []importSource
	// walk visits real folder path real as repo path rel; onStack holds the
	// real folders being walked, to refuse a link back into one (a loop).
	var walk func(real, rel string, onStack map[string]bool) error
	walk = func(real, rel string, onStack map[string]bool) error {
		onStack[real] = true
		defer delete(onStack, real)
		entries, err := os.ReadDir(real)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := path.Join(rel, e.Name())
			p := filepath.Join(real, e.Name())
			if e.Type()&fs.ModeSymlink != 0 {
				target, err := fslink.OnHost(p)
				if err != nil {
					return fmt.Errorf("%s: the link cannot be followed: %w", name, err)
				}
				if !inRoots(target) {
					return fmt.Errorf("%s links to %s, outside %s", name, target, strings.Join(allowed, " and "))
				}
				p = target
			}
			fi, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			switch {
			case fi.IsDir():
				if onStack[p] {
					return fmt.Errorf("%s links back to a folder that contains it (a loop)", name)
				}
				if err := walk(p, name, onStack); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				out = append(out, importSource{rel: name, path: p})
			default:
				return fmt.Errorf("%s is a %s, not a regular file", name, fi.Mode().Type())
			}
		}
		return nil
	}
	if err := walk(root, "", map[string]bool{}); err != nil {
		return nil, err
	}
	return out, nil
}

// importFile copies one file into blobs/ (hashing it on the way) and links
// it into the snapshot.
func (c Cache) importFile(repo, commit, rel, src string) (RepoFile, error) {
	in, err := os.Open(src)
	if err != nil {
		return RepoFile{}, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return RepoFile{}, err
	}
	blobs := filepath.Join(c.RepoDir(repo), "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return RepoFile{}, err
	}
	tmp, err := os.CreateTemp(blobs, ".import-*")
	if err != nil {
		return RepoFile{}, err
	}
	defer os.Remove(tmp.Name())
	s256, s1 := sha256.New(), sha1.New()
	fmt.Fprintf(s1, "blob %d\x00", fi.Size())
	if _, err := io.Copy(io.MultiWriter(tmp, s256, s1), in); err != nil {
		tmp.Close()
		return RepoFile{}, err
	}
	if err := tmp.Close(); err != nil {
		return RepoFile{}, err
	}
	f := RepoFile{Path: rel, Size: fi.Size(), BlobID: hex.EncodeToString(s1.Sum(nil))}
	if fi.Size() >= lfsMinSize || isLFSFormat(rel) {
		sum := hex.EncodeToString(s256.Sum(nil))
		// The git blob of an LFS file is its pointer, as on the Hub.
		pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sum, fi.Size())
		p1 := sha1.New()
		fmt.Fprintf(p1, "blob %d\x00%s", len(pointer), pointer)
		f.BlobID = hex.EncodeToString(p1.Sum(nil))
		f.LFS = &LFSInfo{SHA256: sum, Size: fi.Size(), PointerSize: int64(len(pointer))}
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return RepoFile{}, err
	}
	if err := os.Rename(tmp.Name(), c.BlobPath(repo, f.Etag())); err != nil {
		return RepoFile{}, err
	}
	if f.LFS != nil {
		if err := c.recordVerified(repo, f.Etag()); err != nil {
			return RepoFile{}, err
		}
	}
	return f, c.link(repo, commit, rel, f.Etag())
}
