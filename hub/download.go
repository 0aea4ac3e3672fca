package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fetchBlob makes blobs/<etag> for f: it resumes blobs/<etag>.incomplete with
// a Range request, verifies the whole file (sha256 for LFS files, the git
// blob sha1 otherwise, and the size), and only then renames it into place,
// so a blob in the cache is always a verified one. A transfer that fails or
// goes silent is resumed with backoff, huggingface_hub's http_get policy.
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
	for attempt := 0; ; attempt++ {
		err := c.downloadInto(ctx, incomplete, repo, meta, prog)
		if err == nil {
			break
		}
		var oversize *oversizeError
		if errors.As(err, &oversize) {
			prog.track(incomplete).Store(0)
			if rmErr := os.Remove(incomplete); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				return fmt.Errorf("download %s of %s: %w (and removing the bad download: %v)", f.Path, repo, err, rmErr)
			}
			return fmt.Errorf("download %s of %s: %w; the bad download was removed", f.Path, repo, err)
		}
		var perm permanentError
		if ctx.Err() != nil || errors.As(err, &perm) || attempt >= c.backoff.Retries {
			return fmt.Errorf("download %s of %s (%d attempts): %w", f.Path, repo, attempt+1, err)
		}
		wait := c.backoff.wait(attempt, nil)
		slog.Warn("download interrupted, resuming", "repo", repo, "file", f.Path, "attempt", attempt+1, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("download %s of %s: %w", f.Path, repo, ctx.Err())
		case <-t.C:
		}
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
	if f.LFS == nil {
		return nil // small: hashed again at each use (see verify.go)
	}
	return c.cache.recordVerified(repo, meta.Etag)
}

// permanentError is a failure that retrying cannot fix (4xx, a wrong size).
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// errIdle is the cause of a transfer abandoned for silence.
var errIdle = errors.New("no data received")

// downloadInto appends the missing tail of the file at meta.Location to
// path. A server that ignores the Range header (200 instead of 206) makes it
// start over from byte 0. A transfer that receives nothing for c.idle is
// abandoned (and resumed by the caller).
func (c *Client) downloadInto(ctx context.Context, path, repo string, meta FileMeta, prog *progress) error {
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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(c.idle, func() { cancel(fmt.Errorf("%w for %s", errIdle, c.idle)) })
	defer idle.Stop()
	cl := call{method: http.MethodGet, url: meta.Location, repo: repo}
	if have > 0 {
		cl.header = http.Header{"Range": {"bytes=" + strconv.FormatInt(have, 10) + "-"}}
	}
	// One attempt here: fetchBlob's loop resumes from whatever reached disk.
	resp, err := c.doOnce(ctx, cl)
	var httpErr *HTTPError
	if errors.As(err, &httpErr) && !retryableStatus(httpErr.Status) {
		return permanentError{err}
	}
	if err != nil {
		return idleCause(ctx, err)
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
	default:
		return permanentError{fmt.Errorf("GET %s: unexpected HTTP %d", meta.Location, resp.StatusCode)}
	}
	want := meta.Size - have
	if resp.ContentLength > want {
		return &oversizeError{Listed: meta.Size, Received: have + resp.ContentLength, Announced: true}
	}
	body := countingReader{r: resp.Body, file: counter, wire: &prog.wire, touch: func() { idle.Reset(c.idle) }}
	// Never more than the listed size reaches the disk: the free-space check
	// and the progress bar were made with it.
	n, err := io.Copy(out, io.LimitReader(body, want))
	if err != nil {
		return fmt.Errorf("after %d of %d bytes: %w", have+n, meta.Size, idleCause(ctx, err))
	}
	if have+n != meta.Size {
		return fmt.Errorf("the server closed the transfer at %d of %d bytes", have+n, meta.Size)
	}
	// A byte past the listed size means the body is not the listed file. A
	// failure after the last listed byte loses nothing: the hash decides.
	extra, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, oversizeProbe))
	if extra > 0 {
		return &oversizeError{Listed: meta.Size, Received: meta.Size + extra, AtLeast: extra == oversizeProbe}
	}
	return nil
}

// oversizeProbe is how far past the listed size a body is read to say how
// much too long it is; the rest is never read.
const oversizeProbe = 64 << 10

// oversizeError is a body longer than the size the Hub lists for the file:
// not the listed file, so what was received is thrown away.
type oversizeError struct {
	Listed, Received int64
	AtLeast          bool // the body went on past Received
	Announced        bool // Content-Length said so before any byte was read
}

func (e *oversizeError) Error() string {
	switch {
	case e.Announced:
		return fmt.Sprintf("the server announced %d bytes (Content-Length) for a file the Hub lists at %d bytes", e.Received, e.Listed)
	case e.AtLeast:
		return fmt.Sprintf("the server sent more than the listed %d bytes (at least %d)", e.Listed, e.Received)
	}
	return fmt.Sprintf("the server sent %d bytes for a file the Hub lists at %d bytes", e.Received, e.Listed)
}

// idleCause names the idle timeout when it is what cut the transfer.
func idleCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
		return cause
	}
	return err
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
