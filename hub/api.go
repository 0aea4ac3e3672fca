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
)

// The read side of the Hub API, field by field as huggingface_hub reads it
// (docs/hub-wire.md lists each field with its source line).

// RepoFile is one file of a commit, as the tree API lists it.
type RepoFile struct {
	Path    string
	Size    int64
	BlobID  string   // the git blob sha1 (for an LFS file: of its pointer)
	LFS     *LFSInfo // nil for a file stored in git
	XetHash string   // the Xet content hash, when the Hub sends one
}

// LFSInfo is the LFS pointer of a large file.
type LFSInfo struct {
	SHA256      string
	Size        int64
	PointerSize int64
}

// Etag is the blob name the Hub gives the file: the sha256 of an LFS file,
// the git blob sha1 of any other (what HEAD resolve sends as X-Linked-Etag
// or ETag).
func (f RepoFile) Etag() string {
	if f.LFS != nil {
		return f.LFS.SHA256
	}
	return f.BlobID
}

// ResolveRevision asks GET /api/models/{repo}/revision/{rev} for the commit
// a branch, tag or commit names (huggingface_hub's repo_info; only "sha" is
// read).
func (c *Client) ResolveRevision(ctx context.Context, repo, rev string) (string, error) {
	if c.cfg.Offline {
		return "", fmt.Errorf("resolve %s@%s: %w (HF_HUB_OFFLINE is set)", repo, rev, ErrOfflineMiss)
	}
	u := fmt.Sprintf("%s/api/models/%s/revision/%s", c.cfg.Endpoint, repo, url.PathEscape(rev))
	var info struct {
		SHA *string `json:"sha"`
	}
	if err := c.getJSON(ctx, u, repo, &info); err != nil {
		return "", fmt.Errorf("resolve %s@%s: %w", repo, rev, err)
	}
	switch {
	case info.SHA == nil:
		return "", &ParseError{Endpoint: "GET " + u, Field: "sha", Problem: "missing"}
	case !IsCommit(*info.SHA):
		return "", &ParseError{Endpoint: "GET " + u, Field: "sha", Problem: fmt.Sprintf("%q is not a 40-hex commit id", *info.SHA)}
	}
	return *info.SHA, nil
}

// treeEntry is one entry of GET /api/models/{repo}/tree/{rev}: huggingface_hub's
// RepoFile / RepoFolder constructors read type, path, size, oid and
// lfs.{oid,size,pointerSize}; xetHash is kept for its tree cache.
type treeEntry struct {
	Type    string  `json:"type"`
	Path    *string `json:"path"`
	Size    *int64  `json:"size"`
	OID     *string `json:"oid"`
	XetHash string  `json:"xetHash"`
	LFS     *struct {
		OID         *string `json:"oid"`
		Size        *int64  `json:"size"`
		PointerSize *int64  `json:"pointerSize"`
	} `json:"lfs"`

	endpoint string // the page it came from, for errors
	index    int
}

// file checks the fields a download needs and converts the entry.
func (e treeEntry) file() (RepoFile, error) {
	bad := func(field, problem string) error {
		return &ParseError{Endpoint: "GET " + e.endpoint, Field: fmt.Sprintf("[%d].%s", e.index, field), Problem: problem + " (file " + strconv.Quote(*e.Path) + ")"}
	}
	f := RepoFile{Path: *e.Path, XetHash: e.XetHash}
	switch {
	case !safeRepoPath(f.Path):
		return f, bad("path", "not a relative path inside the repo")
	case e.OID == nil:
		return f, bad("oid", "missing")
	case !isHex(*e.OID, 40):
		return f, bad("oid", fmt.Sprintf("%q is not a 40-hex git blob id", *e.OID))
	case e.Size == nil:
		return f, bad("size", "missing")
	case *e.Size < 0:
		return f, bad("size", "negative")
	}
	f.BlobID, f.Size = *e.OID, *e.Size
	if e.LFS == nil {
		return f, nil
	}
	switch {
	case e.LFS.OID == nil:
		return f, bad("lfs.oid", "missing")
	case !isHex(*e.LFS.OID, 64):
		return f, bad("lfs.oid", fmt.Sprintf("%q is not a 64-hex sha256", *e.LFS.OID))
	case e.LFS.Size == nil:
		return f, bad("lfs.size", "missing")
	case *e.LFS.Size != f.Size:
		return f, bad("lfs.size", fmt.Sprintf("%d differs from size %d", *e.LFS.Size, f.Size))
	case e.LFS.PointerSize == nil:
		return f, bad("lfs.pointerSize", "missing")
	}
	f.LFS = &LFSInfo{SHA256: *e.LFS.OID, Size: *e.LFS.Size, PointerSize: *e.LFS.PointerSize}
	return f, nil
}

// Listing is the file list of one commit.
type Listing struct {
	Files    []RepoFile // every usable file of the commit
	Selected []RepoFile // the files the patterns select
	// Unusable counts files the patterns skip whose entries lacked a field a
	// download needs: they are left out of Files, so the listing is not
	// saved (a later pull with other patterns must ask again).
	Unusable int
}

// The bounds of one listing. A real model repo is far inside them (the
// tree API sends at most 1000 entries a page); a Hub answer past one is an
// error naming the bound, never a larger allocation.
const (
	// MaxJSONBytes is the largest JSON answer read (one tree page, a
	// revision's info, a commit's answer).
	MaxJSONBytes = 32 << 20
	// MaxTreePages is how many Link: rel="next" pages one listing follows.
	MaxTreePages = 1000
	// MaxTreeEntries is how many entries (files and folders) one listing
	// may have.
	MaxTreeEntries = 100_000
	// MaxTreeBytes is the JSON of all pages of one listing together.
	MaxTreeBytes = 256 << 20
	// MaxPathBytes is the longest file path a listing may name.
	MaxPathBytes = 4096
)

// ListFiles lists every file of commit, following the tree API's Link
// pagination (huggingface_hub's list_repo_tree with recursive=True, as
// snapshot_download calls it), within the bounds above. Each page is decoded
// as a stream, one entry at a time, so only the files are kept. Only the
// files the patterns select are checked field by field: an entry the caller
// skips can never fail the listing.
func (c *Client) ListFiles(ctx context.Context, repo, commit string, allow, ignore []string) (*Listing, error) {
	if c.cfg.Offline {
		return nil, fmt.Errorf("list %s@%s: %w (HF_HUB_OFFLINE is set)", repo, commit, ErrOfflineMiss)
	}
	var entries []treeEntry
	seen, budget := 0, int64(MaxTreeBytes)
	next := fmt.Sprintf("%s/api/models/%s/tree/%s?recursive=true&expand=false", c.cfg.Endpoint, repo, url.PathEscape(commit))
	for pages := 0; next != ""; pages++ {
		if pages == MaxTreePages {
			return nil, fmt.Errorf("list %s@%s: the tree API kept paginating past %d pages (at most %d are followed)", repo, commit, pages, MaxTreePages)
		}
		page := next
		link, err := c.streamPage(ctx, page, repo, &budget, func(i int, e treeEntry) error {
			if seen++; seen > MaxTreeEntries {
				return fmt.Errorf("the listing has more than %d entries (the most one listing may have)", MaxTreeEntries)
			}
			if e.Type != "file" {
				return nil // folders; "unknown" entries are not files either
			}
			switch {
			case e.Path == nil || *e.Path == "":
				return &ParseError{Endpoint: "GET " + page, Field: fmt.Sprintf("[%d].path", i), Problem: "missing"}
			case len(*e.Path) > MaxPathBytes:
				return &ParseError{Endpoint: "GET " + page, Field: fmt.Sprintf("[%d].path", i), Problem: fmt.Sprintf("%d bytes long (at most %d)", len(*e.Path), MaxPathBytes)}
			}
			e.endpoint, e.index = page, i
			entries = append(entries, e)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list %s@%s: %w", repo, commit, err)
		}
		next = link
	}
	keep := map[string]bool{}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = *e.Path
	}
	for _, p := range Filter(names, allow, ignore) {
		keep[p] = true
	}
	l := &Listing{}
	for _, e := range entries {
		f, err := e.file()
		if err != nil {
			if keep[*e.Path] {
				return nil, fmt.Errorf("list %s@%s: %w", repo, commit, err)
			}
			l.Unusable++
			continue
		}
		l.Files = append(l.Files, f)
		if keep[f.Path] {
			l.Selected = append(l.Selected, f)
		}
	}
	return l, nil
}

// streamPage GETs one tree page and hands each entry of its JSON array to
// each as it is decoded. It reads at most MaxJSONBytes, and at most *budget,
// which it lowers by what it read. It returns the rel="next" URL.
func (c *Client) streamPage(ctx context.Context, u, repo string, budget *int64, each func(int, treeEntry) error) (string, error) {
	resp, err := c.do(ctx, call{method: http.MethodGet, url: u, repo: repo, header: http.Header{"Accept": {"application/json"}}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	endpoint := "GET " + u
	limit, what := int64(MaxJSONBytes), fmt.Sprintf("the %s one JSON answer may have", FormatBytes(MaxJSONBytes))
	if *budget < limit {
		limit, what = *budget, fmt.Sprintf("the %s all pages of one listing may have together", FormatBytes(MaxTreeBytes))
	}
	body := &cappedReader{r: resp.Body, left: limit, what: what}
	defer func() { *budget -= limit - body.left }()
	dec := json.NewDecoder(body)
	tok, err := dec.Token()
	if err != nil {
		return "", jsonError(err, endpoint, "")
	}
	if tok != json.Delim('[') {
		return "", &ParseError{Endpoint: endpoint, Field: "(top level)", Problem: fmt.Sprintf("%v where an array of entries was expected", tok)}
	}
	for i := 0; dec.More(); i++ {
		var e treeEntry
		if err := dec.Decode(&e); err != nil {
			return "", jsonError(err, endpoint, fmt.Sprintf("[%d]", i))
		}
		if err := each(i, e); err != nil {
			return "", err
		}
	}
	if _, err := dec.Token(); err != nil {
		return "", jsonError(err, endpoint, "")
	}
	return nextLink(resp), nil
}

// getJSON GETs u and decodes its JSON body into v.
func (c *Client) getJSON(ctx context.Context, u, repo string, v any) error {
	resp, err := c.do(ctx, call{method: http.MethodGet, url: u, repo: repo, header: http.Header{"Accept": {"application/json"}}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeJSON(resp.Body, "GET "+u, v)
}

// errTooLarge is an answer longer than the bound it is read under.
var errTooLarge = errors.New("answer too large")

// cappedReader fails with errTooLarge once more than left bytes arrive, so
// an oversized answer is an error rather than a JSON value cut short.
type cappedReader struct {
	r    io.Reader
	left int64
	what string // the bound, for the error
}

func (c *cappedReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a body of exactly the bound from a longer one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: larger than %s", errTooLarge, c.what)
		}
		return 0, err
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

// decodeJSON decodes one JSON value of at most MaxJSONBytes, naming the
// endpoint and field of a value of the wrong type.
func decodeJSON(r io.Reader, endpoint string, v any) error {
	capped := &cappedReader{r: r, left: MaxJSONBytes, what: fmt.Sprintf("the %s one JSON answer may have", FormatBytes(MaxJSONBytes))}
	if err := json.NewDecoder(capped).Decode(v); err != nil {
		return jsonError(err, endpoint, "")
	}
	return nil
}

// jsonError names the endpoint and the field (under prefix, an entry's
// "[3]") of a decoding failure.
func jsonError(err error, endpoint, prefix string) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.Is(err, errTooLarge):
		return &ParseError{Endpoint: endpoint, Field: "(body)", Problem: err.Error()}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		switch {
		case field != "" && prefix != "":
			field = prefix + "." + field
		case prefix != "":
			field = prefix
		case field == "":
			field = "(top level)"
		}
		return &ParseError{Endpoint: endpoint, Field: field, Problem: fmt.Sprintf("a JSON %s where a %s was expected", typeErr.Value, typeErr.Type)}
	case errors.As(err, &syntaxErr):
		return &ParseError{Endpoint: endpoint, Field: "(body)", Problem: fmt.Sprintf("not JSON at byte %d: %v", syntaxErr.Offset, err)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &ParseError{Endpoint: endpoint, Field: "(body)", Problem: "empty or cut short"}
	default:
		return &ParseError{Endpoint: endpoint, Field: "(body)", Problem: err.Error()}
	}
}

// nextLink is the URL of the Link header's rel="next" entry, resolved
// against the request URL, as httpx's response.links gives it.
func nextLink(resp *http.Response) string {
	for _, h := range resp.Header.Values("Link") {
		for _, part := range strings.Split(h, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.TrimSpace(k) == "rel" && strings.Trim(strings.TrimSpace(v), `"`) == "next" {
					ref, err := resp.Request.URL.Parse(strings.Trim(target, "<>"))
					if err == nil {
						return ref.String()
					}
				}
			}
		}
	}
	return ""
}

// FileMeta is what HEAD /{repo}/resolve/{rev}/{file} says about a file.
type FileMeta struct {
	Commit   string // X-Repo-Commit
	Etag     string // X-Linked-Etag, else ETag, with W/ and quotes stripped
	Size     int64  // X-Linked-Size, else (no redirect) Content-Length
	Location string // where to GET the content (the CDN URL for LFS files)
}

// FileMetadata asks HEAD /{repo}/resolve/{rev}/{file} without following the
// storage redirect, as huggingface_hub's get_hf_file_metadata does: a relative
// redirect (a renamed repo) is followed, an absolute one is where the content
// lives.
func (c *Client) FileMetadata(ctx context.Context, repo, rev, file string) (FileMeta, error) {
	if c.cfg.Offline {
		return FileMeta{}, fmt.Errorf("metadata of %s in %s: %w (HF_HUB_OFFLINE is set)", file, repo, ErrOfflineMiss)
	}
	u := c.ResolveURL(repo, rev, file)
	for hops := 0; ; hops++ {
		resp, err := c.do(ctx, call{method: http.MethodHead, url: u, repo: repo, noRedirect: true,
			header: http.Header{"Accept-Encoding": {"identity"}}})
		if err != nil {
			return FileMeta{}, fmt.Errorf("metadata of %s in %s: %w", file, repo, err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		redirect := resp.StatusCode >= 300 && resp.StatusCode < 400
		if redirect && strings.HasPrefix(loc, "/") && hops < 5 {
			next, err := resp.Request.URL.Parse(loc)
			if err != nil {
				return FileMeta{}, &ParseError{Endpoint: "HEAD " + u, Field: "Location", Problem: fmt.Sprintf("%q: %v", loc, err)}
			}
			u = next.String()
			continue
		}
		return fileMetaFrom(resp, u, redirect)
	}
}

// fileMetaFrom reads the headers get_hf_file_metadata reads, refusing an
// answer without them as it does (FileMetadataError).
func fileMetaFrom(resp *http.Response, u string, redirect bool) (FileMeta, error) {
	endpoint := "HEAD " + u
	h := resp.Header
	m := FileMeta{
		Commit:   h.Get("X-Repo-Commit"),
		Etag:     normalizeEtag(firstNonEmpty(h.Get("X-Linked-Etag"), h.Get("ETag"))),
		Location: u,
	}
	if loc := h.Get("Location"); loc != "" {
		abs, err := resp.Request.URL.Parse(loc)
		if err != nil {
			return FileMeta{}, &ParseError{Endpoint: endpoint, Field: "Location", Problem: fmt.Sprintf("%q: %v", loc, err)}
		}
		m.Location = abs.String()
	} else if redirect {
		return FileMeta{}, &ParseError{Endpoint: endpoint, Field: "Location", Problem: fmt.Sprintf("missing on a %d redirect", resp.StatusCode)}
	}
	size, field := h.Get("X-Linked-Size"), "X-Linked-Size"
	if size == "" && !redirect {
		size, field = h.Get("Content-Length"), "Content-Length"
	}
	var err error
	switch {
	case m.Commit == "":
		return FileMeta{}, &ParseError{Endpoint: endpoint, Field: "X-Repo-Commit", Problem: "missing (is this endpoint a Hugging Face Hub?)"}
	case m.Etag == "":
		return FileMeta{}, &ParseError{Endpoint: endpoint, Field: "X-Linked-Etag / ETag", Problem: "missing"}
	case size == "":
		return FileMeta{}, &ParseError{Endpoint: endpoint, Field: "X-Linked-Size / Content-Length", Problem: "missing"}
	}
	if m.Size, err = strconv.ParseInt(size, 10, 64); err != nil || m.Size < 0 {
		return FileMeta{}, &ParseError{Endpoint: endpoint, Field: field, Problem: fmt.Sprintf("%q is not a size", size)}
	}
	return m, nil
}

// ResolveURL is /{repo}/resolve/{rev}/{file} on the Hub, each path segment
// escaped, as huggingface_hub's hf_hub_url builds it.
func (c *Client) ResolveURL(repo, rev, file string) string {
	segs := strings.Split(file, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.cfg.Endpoint, repo, url.PathEscape(rev), strings.Join(segs, "/"))
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

// safeRepoPath reports whether p, a file path the Hub or a saved listing
// names, is a plain relative path ("a/b.json"): no "..", "." or empty
// component, not absolute, no backslash or control character. Only such a
// path is ever joined under a snapshot folder.
func safeRepoPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
