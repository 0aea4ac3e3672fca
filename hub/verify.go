package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/internal/atomicfile"
)

// An LFS blob (the weights) is hashed in full once, when it is downloaded or
// imported (or the first time tt-model meets one another tool wrote), and
// the size and modification time it had then are recorded beside the cache
// in <repo folder>/.tt-model/verified/<etag>. Every later use compares the
// two with a stat: a blob that changed is hashed again before it is served.
// A file stored in git is small (the Hub keeps files of 10 MiB or more in
// LFS): it is simply hashed at each use, with no record to write.
// huggingface_hub ignores the folder (it reads only blobs/, refs/,
// snapshots/ and trees/).

func (c Cache) verifiedPath(repo, etag string) string {
	return filepath.Join(c.RepoDir(repo), ".tt-model", "verified", etag)
}

// recordVerified notes the size and mtime of a blob that was just hashed.
func (c Cache) recordVerified(repo, etag string) error {
	fi, err := os.Stat(c.BlobPath(repo, etag))
	if err != nil {
		return fmt.Errorf("record the verified blob %s of %s: %w", etag, repo, err)
	}
	rec := fmt.Sprintf("%d %d\n", fi.Size(), fi.ModTime().UnixNano())
	if err := atomicfile.Write(c.verifiedPath(repo, etag), []byte(rec)); err != nil {
		return fmt.Errorf("record the verified blob %s of %s: %w", etag, repo, err)
	}
	return nil
}

// unchangedSinceVerified reports whether the blob has the size and mtime
// recorded when it was last hashed.
func (c Cache) unchangedSinceVerified(repo, etag string) bool {
	b, err := os.ReadFile(c.verifiedPath(repo, etag))
	if err != nil {
		return false
	}
	size, mtime, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok {
		return false
	}
	fi, err := os.Stat(c.BlobPath(repo, etag))
	return err == nil && strconv.FormatInt(fi.Size(), 10) == size && strconv.FormatInt(fi.ModTime().UnixNano(), 10) == mtime
}

// CorruptError is a cached file whose content no longer matches its hash.
type CorruptError struct {
	Repo, Path, Blob string
	Err              error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: %s (blob %s) is corrupt: %v", e.Repo, e.Path, e.Blob, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// checkBlob makes sure the blob behind f still holds what the Hub lists:
// a stat against the record when there is one, the full hash otherwise (and
// always when full is set). It returns whether it hashed the blob.
func (c Cache) checkBlob(repo string, f RepoFile, full bool) (hashed bool, err error) {
	etag := f.Etag()
	if !full && f.LFS != nil && c.unchangedSinceVerified(repo, etag) {
		return false, nil
	}
	if err := verifyFile(c.BlobPath(repo, etag), f, f.Size); err != nil {
		return true, &CorruptError{Repo: repo, Path: f.Path, Blob: c.BlobPath(repo, etag), Err: err}
	}
	if f.LFS == nil {
		return true, nil
	}
	return true, c.recordVerified(repo, etag)
}

// VerifyReport is what VerifySnapshot found.
type VerifyReport struct {
	Files   []string // checked
	Hashed  int      // of them, how many were read in full
	Corrupt []*CorruptError
	Missing []string
}

// VerifySnapshot checks every selected file of a cached commit: present, and
// its content hashing to what the Hub lists. With full it reads every blob;
// otherwise only those whose size or mtime changed since they were last
// hashed. The commit's file list must be in the cache (saved by a pull).
func (c Cache) VerifySnapshot(repo, commit string, allow, ignore []string, full bool) (*VerifyReport, error) {
	files, err := c.readListing(repo, commit)
	if err != nil {
		return nil, err
	}
	if files == nil {
		return nil, fmt.Errorf("%s@%s: no saved file list in %s: pull it once with the Hub reachable", repo, commit, c.Dir)
	}
	rep := &VerifyReport{}
	for _, f := range selectFiles(files, allow, ignore) {
		rep.Files = append(rep.Files, f.Path)
		if !c.present(repo, commit, f) {
			rep.Missing = append(rep.Missing, f.Path)
			continue
		}
		hashed, err := c.checkBlob(repo, f, full)
		if hashed {
			rep.Hashed++
		}
		var corrupt *CorruptError
		if errors.As(err, &corrupt) {
			rep.Corrupt = append(rep.Corrupt, corrupt)
		} else if err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// dropBlob removes a corrupt blob and its verification record so the next
// download fetches it anew. Snapshot links to it dangle until then.
func (c Cache) dropBlob(repo, etag string) error {
	if err := os.Remove(c.BlobPath(repo, etag)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the corrupt blob %s of %s: %w", etag, repo, err)
	}
	if err := os.Remove(c.verifiedPath(repo, etag)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the record of %s of %s: %w", etag, repo, err)
	}
	return nil
}

// verifyFile checks a file against what the Hub lists: its size, and its
// sha256 (LFS) or git blob sha1 (other files).
func verifyFile(path string, f RepoFile, size int64) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer fh.Close()
	var h hash.Hash
	var want, algo string
	if f.LFS != nil {
		h, want, algo = sha256.New(), f.LFS.SHA256, "sha256"
	} else {
		// A git blob id is sha1("blob <size>\x00" + content).
		h, want, algo = sha1.New(), f.BlobID, "git blob sha1"
		fmt.Fprintf(h, "blob %d\x00", size)
	}
	n, err := io.Copy(h, fh)
	if err != nil {
		return fmt.Errorf("verify: read %s: %w", path, err)
	}
	if n != size || n != f.Size {
		return fmt.Errorf("size mismatch: have %d bytes, the Hub lists %d", n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s mismatch: got %s, the Hub lists %s", algo, got, want)
	}
	return nil
}
