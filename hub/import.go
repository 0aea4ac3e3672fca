package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// Import stores every regular file under dir in the cache as commit of
// repo, exactly as a download would have: blobs named by the etag the Hub
// would give (sha256 for LFS-sized or weight files, the git blob sha1
// otherwise), relative snapshot links, refs/main when absent, and the file
// list, so a pin on this commit is complete with no network. It is how
// locally made weights (a test or demo checkpoint) stand in for a Hub repo.
func (c Cache) Import(repo, commit, dir string) (*Snapshot, error) {
	if err := checkRepoID(repo); err != nil {
		return nil, err
	}
	if !IsCommit(commit) {
		return nil, fmt.Errorf("import %s: revision %q is not a 40-hex commit", repo, commit)
	}
	var files []RepoFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		f, err := c.importFile(repo, commit, filepath.ToSlash(rel), path)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("import %s into %s@%s: %w", dir, repo, commit, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("import %s: no files", dir)
	}
	if err := c.writeListing(repo, listing{Commit: commit, Files: files}); err != nil {
		return nil, err
	}
	if err := c.EnsureDefaultRef(repo, commit); err != nil {
		return nil, err
	}
	return &Snapshot{Repo: repo, Commit: commit, Dir: c.SnapshotDir(repo, commit), Files: paths(files)}, nil
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
		f.LFS = &LFSInfo{SHA256: sum, Size: fi.Size()}
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return RepoFile{}, err
	}
	if err := os.Rename(tmp.Name(), c.BlobPath(repo, f.Etag())); err != nil {
		return RepoFile{}, err
	}
	return f, c.link(repo, commit, rel, f.Etag())
}
