package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxAttempts bounds how often one file is resumed after a transient failure
// (a dropped connection, a 5xx) within one run.
const maxAttempts = 5

// fetchBlob makes blobs/<etag> for f: it resumes blobs/<etag>.incomplete with
// a Range request, verifies the whole file (sha256 for LFS files, the git
// blob sha1 otherwise, and the size), and only then renames it into place,
// so a blob in the cache is always a verified one.
func (c *Client) fetchBlob(ctx context.Context, repo string, f RepoFile, meta FileMeta, prog *progress) error {
	lock, err := lockFile(c.cache.LockPath(repo, meta.Etag), prog.out)
	if err != nil {
		return err
	}
	defer lock.unlock()
	blob := c.cache.BlobPath(repo, meta.Etag)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return fmt.Errorf("blobs folder of %s: %w", repo, err)
	}
	if c.cache.blobSize(repo, meta.Etag) == meta.Size {
		return nil // another process finished it while we waited
	}
	incomplete := blob + ".incomplete"
	for attempt := 1; ; attempt++ {
		err := c.downloadInto(ctx, incomplete, meta, prog)
		if err == nil {
			break
		}
		var perm permanentError
		if ctx.Err() != nil || errors.As(err, &perm) || attempt == maxAttempts {
			return fmt.Errorf("download %s of %s: %w", f.Path, repo, err)
		}
		slog.Warn("download interrupted, resuming", "repo", repo, "file", f.Path, "attempt", attempt, "err", err)
	}
	if err := verifyFile(incomplete, f, meta.Size); err != nil {
		prog.track(incomplete).Store(0)
		if rmErr := os.Remove(incomplete); rmErr != nil {
			return fmt.Errorf("%s of %s: %w (and removing the bad download: %v)", f.Path, repo, err, rmErr)
		}
		return fmt.Errorf("%s of %s: %w; the bad download was removed, run again to fetch it anew", f.Path, repo, err)
	}
	if err := os.Rename(incomplete, blob); err != nil {
		return fmt.Errorf("finish %s of %s: %w", f.Path, repo, err)
	}
	return nil
}

// permanentError is a failure that retrying cannot fix (4xx, a wrong size).
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// downloadInto appends the missing tail of the file at meta.Location to
// path. A server that ignores the Range header (200 instead of 206) makes it
// start over from byte 0.
func (c *Client) downloadInto(ctx context.Context, path string, meta FileMeta, prog *progress) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return permanentError{err}
	}
	defer out.Close()
	have, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return permanentError{err}
	}
	if have > meta.Size {
		slog.Warn("partial download longer than the file; starting over", "path", path, "have", have, "size", meta.Size)
		if err := restart(out); err != nil {
			return permanentError{err}
		}
		have = 0
	}
	counter := prog.track(path)
	counter.Store(have)
	if have == meta.Size {
		return nil
	}
	req, err := c.newRequest(ctx, http.MethodGet, meta.Location)
	if err != nil {
		return permanentError{err}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if start := contentRangeStart(resp.Header.Get("Content-Range")); start != have {
			return permanentError{fmt.Errorf("asked for bytes from %d, the server sent from %d (%q)", have, start, resp.Header.Get("Content-Range"))}
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 {
			slog.Info("server ignored the Range request; downloading the whole file", "url", meta.Location)
			counter.Store(0)
			if err := restart(out); err != nil {
				return permanentError{err}
			}
			have = 0
		}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return responseError(resp)
	default:
		return permanentError{responseError(resp)}
	}
	n, err := io.Copy(out, countingReader{resp.Body, counter, &prog.wire})
	if err != nil {
		return fmt.Errorf("after %d of %d bytes: %w", have+n, meta.Size, err)
	}
	if have+n != meta.Size {
		return fmt.Errorf("the server closed the transfer at %d of %d bytes", have+n, meta.Size)
	}
	return nil
}

func restart(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("truncate %s: %w", f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", f.Name(), err)
	}
	return nil
}

// contentRangeStart parses "bytes START-END/TOTAL"; -1 when malformed.
func contentRangeStart(h string) int64 {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return -1
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(start, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// verifyFile checks the downloaded file against what the revision API said:
// its size, and its sha256 (LFS) or git blob sha1 (other files).
func verifyFile(path string, f RepoFile, size int64) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer fh.Close()
	var h hash.Hash
	var want, algo string
	if f.LFS != nil && f.LFS.SHA256 != "" {
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
	if n != size || (f.Size > 0 && n != f.Size) {
		return fmt.Errorf("size mismatch: have %d bytes, the Hub lists %d", n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s mismatch: got %s, the Hub lists %s", algo, got, want)
	}
	return nil
}
