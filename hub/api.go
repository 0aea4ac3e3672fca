package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// RepoFile is one entry of a revision's file list ("siblings" of
// GET /api/models/{repo}/revision/{rev}?blobs=true).
type RepoFile struct {
	Path   string   `json:"rfilename"`
	Size   int64    `json:"size"`
	BlobID string   `json:"blob_id"` // git blob sha1
	LFS    *LFSInfo `json:"lfs,omitempty"`
}

// LFSInfo is the LFS pointer of a large file.
type LFSInfo struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Etag is the blob name the Hub reports for the file: the sha256 of an LFS
// file, the git blob sha1 of any other.
func (f RepoFile) Etag() string {
	if f.LFS != nil && f.LFS.SHA256 != "" {
		return f.LFS.SHA256
	}
	return f.BlobID
}

// Revision is a revision resolved to its commit with the commit's files.
type Revision struct {
	Commit string     `json:"sha"`
	Files  []RepoFile `json:"siblings"`
}

// FileMeta is what HEAD /{repo}/resolve/{rev}/{file} says about a file.
type FileMeta struct {
	Commit   string // X-Repo-Commit
	Etag     string // X-Linked-Etag, else ETag, with W/ and quotes stripped
	Size     int64  // X-Linked-Size, else Content-Length
	Location string // where to GET the content (the CDN URL for LFS files)
}

// HTTPError is a Hub answer other than success.
type HTTPError struct {
	Method, URL string
	Status      int
	Message     string // X-Error-Message or the JSON "error", when the Hub sent one
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (the repo may be gated or private: set HF_TOKEN to a token with read access)"
	case http.StatusNotFound:
		msg += " (no such repo, revision or file, or a private repo this token cannot see)"
	}
	return msg
}

// ErrOfflineMiss means HF_HUB_OFFLINE is set and the cache cannot answer.
var ErrOfflineMiss = errors.New("not in the local cache and HF_HUB_OFFLINE is set")

// Client talks to one Hub endpoint and writes one cache.
type Client struct {
	cfg     Config
	cache   Cache
	http    *http.Client
	workers int
}

// NewClient builds a client for cfg. It downloads 8 files at once, as
// huggingface_hub's snapshot_download does.
func NewClient(cfg Config) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 60 * time.Second
	c := &Client{
		cfg:     cfg,
		cache:   Cache{Dir: cfg.CacheDir},
		http:    &http.Client{Transport: tr},
		workers: 8,
	}
	return c
}

// Cache is the cache this client writes.
func (c *Client) Cache() Cache { return c.cache }

// RevisionInfo resolves rev (a branch, tag or commit) of a model repo to its
// commit and lists the commit's files with sizes, blob ids and LFS hashes.
func (c *Client) RevisionInfo(ctx context.Context, repo, rev string) (*Revision, error) {
	if c.cfg.Offline {
		return nil, fmt.Errorf("resolve %s@%s: %w", repo, rev, ErrOfflineMiss)
	}
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", c.cfg.Endpoint, repo, url.PathEscape(rev))
	req, err := c.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("resolve %s@%s: %w", repo, rev, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("resolve %s@%s: %w", repo, rev, responseError(resp))
	}
	var r Revision
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("resolve %s@%s: decode %s: %w", repo, rev, u, err)
	}
	if !IsCommit(r.Commit) {
		return nil, fmt.Errorf("resolve %s@%s: the Hub answered commit %q, not a 40-hex sha", repo, rev, r.Commit)
	}
	for i, f := range r.Files {
		if f.Path == "" || f.Etag() == "" {
			return nil, fmt.Errorf("resolve %s@%s: siblings[%d] (%q) lacks rfilename or blob_id", repo, rev, i, f.Path)
		}
	}
	return &r, nil
}

// FileMetadata asks HEAD /{repo}/resolve/{rev}/{file} without following the
// CDN redirect, as huggingface_hub's get_hf_file_metadata does: a relative
// redirect (a renamed repo) is followed, an absolute one is where the
// content lives.
func (c *Client) FileMetadata(ctx context.Context, repo, rev, file string) (FileMeta, error) {
	if c.cfg.Offline {
		return FileMeta{}, fmt.Errorf("metadata of %s in %s: %w", file, repo, ErrOfflineMiss)
	}
	u := c.resolveURL(repo, rev, file)
	noRedirect := *c.http
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for hops := 0; ; hops++ {
		req, err := c.newRequest(ctx, http.MethodHead, u)
		if err != nil {
			return FileMeta{}, err
		}
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := noRedirect.Do(req)
		if err != nil {
			return FileMeta{}, fmt.Errorf("metadata of %s in %s: %w", file, repo, err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && strings.HasPrefix(loc, "/") && hops < 5 {
			base, _ := url.Parse(u)
			next, err := base.Parse(loc)
			if err != nil {
				return FileMeta{}, fmt.Errorf("metadata of %s in %s: bad redirect %q: %w", file, repo, loc, err)
			}
			u = next.String()
			continue
		}
		if resp.StatusCode >= 400 || (resp.StatusCode >= 300 && loc == "") {
			return FileMeta{}, fmt.Errorf("metadata of %s in %s: %w", file, repo, responseError(resp))
		}
		m := FileMeta{
			Commit:   resp.Header.Get("X-Repo-Commit"),
			Etag:     normalizeEtag(firstNonEmpty(resp.Header.Get("X-Linked-Etag"), resp.Header.Get("ETag"))),
			Location: u,
		}
		if loc != "" {
			abs, err := req.URL.Parse(loc)
			if err != nil {
				return FileMeta{}, fmt.Errorf("metadata of %s in %s: bad redirect %q: %w", file, repo, loc, err)
			}
			m.Location = abs.String()
		}
		size := firstNonEmpty(resp.Header.Get("X-Linked-Size"), resp.Header.Get("Content-Length"))
		if m.Size, err = strconv.ParseInt(size, 10, 64); err != nil {
			return FileMeta{}, fmt.Errorf("metadata of %s in %s: no usable X-Linked-Size or Content-Length (%q)", file, repo, size)
		}
		if m.Etag == "" {
			return FileMeta{}, fmt.Errorf("metadata of %s in %s: the Hub sent no ETag or X-Linked-Etag", file, repo)
		}
		return m, nil
	}
}

func (c *Client) resolveURL(repo, rev, file string) string {
	segs := strings.Split(file, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.cfg.Endpoint, repo, url.PathEscape(rev), strings.Join(segs, "/"))
}

// newRequest adds the user agent and, for the Hub endpoint only, the token.
// Go's client drops Authorization on a redirect to another host, so the
// token never reaches the CDN.
func (c *Client) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	req.Header.Set("User-Agent", "tt-model-hub/1")
	if c.cfg.Token != "" && strings.HasPrefix(u, c.cfg.Endpoint+"/") {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	return req, nil
}

func responseError(resp *http.Response) error {
	e := &HTTPError{Method: resp.Request.Method, URL: resp.Request.URL.String(), Status: resp.StatusCode}
	e.Message = resp.Header.Get("X-Error-Message")
	if e.Message == "" && resp.Request.Method != http.MethodHead {
		var body struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body) == nil {
			e.Message = body.Error
		}
	}
	return e
}

// normalizeEtag strips a weak marker and quotes, as huggingface_hub's
// _normalize_etag.
func normalizeEtag(s string) string {
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
