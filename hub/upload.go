package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The write side of the Hub API as huggingface_hub's create_commit drives it
// (hf_api.py, _commit_api.py, lfs.py; docs/hub-wire.md has the lines):
// preupload, the git-lfs batch API and its upload and verify actions, then
// one NDJSON commit.

// Chunk sizes huggingface_hub uses: 256 files per preupload and per batch.
const uploadBatch = 256

// lfsHeaders are lfs.py's LFS_HEADERS.
var lfsHeaders = http.Header{"Accept": {"application/vnd.git-lfs+json"}, "Content-Type": {"application/vnd.git-lfs+json"}}

// Identity is what GET /api/whoami-v2 says about the token.
type Identity struct {
	User      string
	Orgs      []string
	TokenName string // auth.accessToken.displayName
	Role      string // auth.accessToken.role: "read", "write", "fineGrained"
}

// Whoami asks who the token belongs to (huggingface_hub's whoami).
func (c *Client) Whoami(ctx context.Context) (*Identity, error) {
	if c.cfg.Token == "" {
		return nil, errTokenless
	}
	u := c.cfg.Endpoint + "/api/whoami-v2"
	var w struct {
		Name *string `json:"name"`
		Orgs []struct {
			Name string `json:"name"`
		} `json:"orgs"`
		Auth struct {
			AccessToken struct {
				DisplayName string `json:"displayName"`
				Role        string `json:"role"`
			} `json:"accessToken"`
		} `json:"auth"`
	}
	if err := c.getJSON(ctx, u, "", &w); err != nil {
		return nil, fmt.Errorf("whoami: %w", err)
	}
	if w.Name == nil || *w.Name == "" {
		return nil, &ParseError{Endpoint: "GET " + u, Field: "name", Problem: "missing"}
	}
	id := &Identity{User: *w.Name, TokenName: w.Auth.AccessToken.DisplayName, Role: w.Auth.AccessToken.Role}
	for _, o := range w.Orgs {
		id.Orgs = append(id.Orgs, o.Name)
	}
	return id, nil
}

// postJSON sends v as JSON and decodes the answer into out (when not nil).
func (c *Client) postJSON(ctx context.Context, method, u, repo string, header http.Header, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", method, u, err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	for k, vals := range header {
		h[k] = vals
	}
	resp, err := c.do(ctx, call{method: method, url: u, repo: repo, header: h, retryNetwork: true, size: int64(len(body)),
		body: func() (io.Reader, error) { return bytes.NewReader(body), nil }})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	return decodeJSON(resp.Body, method+" "+u, out)
}

// CreateRepo creates a model repo (POST /api/repos/create, as create_repo);
// created is false when it exists already (409).
func (c *Client) CreateRepo(ctx context.Context, repo string, private bool) (created bool, err error) {
	if c.cfg.Token == "" {
		return false, errTokenless
	}
	if err := ValidateRepoID(repo); err != nil {
		return false, err
	}
	org, name, ok := strings.Cut(repo, "/")
	if !ok {
		return false, fmt.Errorf("repo id %q: pushing needs org/name", repo)
	}
	payload := map[string]any{"name": name, "organization": org, "type": "model", "private": private}
	err = c.postJSON(ctx, http.MethodPost, c.cfg.Endpoint+"/api/repos/create", repo, nil, payload, nil)
	var httpErr *HTTPError
	if errors.As(err, &httpErr) && httpErr.Status == http.StatusConflict {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create repo %s: %w", repo, err)
	}
	return true, nil
}

// SetPrivate changes a repo's visibility (PUT /api/models/{repo}/settings, as
// update_repo_settings).
func (c *Client) SetPrivate(ctx context.Context, repo string, private bool) error {
	u := fmt.Sprintf("%s/api/models/%s/settings", c.cfg.Endpoint, repo)
	if err := c.postJSON(ctx, http.MethodPut, u, repo, nil, map[string]any{"private": private}, nil); err != nil {
		return fmt.Errorf("set the visibility of %s: %w", repo, err)
	}
	return nil
}

// CreateBranch creates branch from main (POST /api/models/{repo}/branch/{b},
// as create_branch); created is false when it exists (409).
func (c *Client) CreateBranch(ctx context.Context, repo, branch string) (created bool, err error) {
	u := fmt.Sprintf("%s/api/models/%s/branch/%s", c.cfg.Endpoint, repo, url.PathEscape(branch))
	err = c.postJSON(ctx, http.MethodPost, u, repo, nil, map[string]any{}, nil)
	var httpErr *HTTPError
	if errors.As(err, &httpErr) && httpErr.Status == http.StatusConflict {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create branch %s of %s: %w", branch, repo, err)
	}
	return true, nil
}

// LocalFile is a file to upload.
type LocalFile struct {
	Path  string // in the repo, "/"-separated
	Local string // on disk
	// SHA256, when set, is what the content must hash to (an OCI blob's
	// name): a file that does not is refused before anything is sent.
	SHA256 string
}

// PreparedFile is a LocalFile hashed and sampled, ready to commit.
type PreparedFile struct {
	LocalFile
	Size    int64
	SHA256  string // of the content: the LFS oid
	GitSHA1 string // git blob id: the oid of a file stored in git
	Sample  []byte // the first 512 bytes, for preupload
	mtime   time.Time
}

// PrepareFiles hashes every file (in parallel), checks each against its
// expected sha256, and fails on the first that does not match, before any
// byte reaches the network.
func PrepareFiles(ctx context.Context, files []LocalFile, workers int) ([]PreparedFile, error) {
	out := make([]PreparedFile, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, max(workers, 1))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			out[i], errs[i] = prepareFile(f)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func prepareFile(f LocalFile) (PreparedFile, error) {
	fh, err := os.Open(f.Local)
	if err != nil {
		return PreparedFile{}, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return PreparedFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return PreparedFile{}, fmt.Errorf("%s: not a regular file", f.Local)
	}
	s256, s1 := sha256.New(), sha1.New()
	fmt.Fprintf(s1, "blob %d\x00", fi.Size())
	var sample bytes.Buffer
	n, err := io.Copy(io.MultiWriter(s256, s1, &limitedBuffer{&sample, 512}), fh)
	if err != nil {
		return PreparedFile{}, fmt.Errorf("read %s: %w", f.Local, err)
	}
	p := PreparedFile{LocalFile: f, Size: n, SHA256: hex.EncodeToString(s256.Sum(nil)),
		GitSHA1: hex.EncodeToString(s1.Sum(nil)), Sample: sample.Bytes(), mtime: fi.ModTime()}
	if f.SHA256 != "" && f.SHA256 != p.SHA256 {
		return PreparedFile{}, fmt.Errorf("%s is tampered with or damaged: its name says sha256 %s, its content hashes to %s", f.Local, f.SHA256, p.SHA256)
	}
	return p, nil
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Commit is one commit to create.
type Commit struct {
	Repo, Branch string
	Summary      string
	Description  string
	// Parent, when set, is the commit the caller based Delete on; the Hub
	// refuses the commit if the branch has moved since.
	Parent string
	Files  []PreparedFile
	Delete []string // paths to delete
}

// CommitResult says what a commit sent.
type CommitResult struct {
	OID, URL      string
	LFSUploaded   int   // LFS objects sent
	LFSReused     int   // LFS objects the Hub already held
	Unchanged     int   // files identical to the branch head: left out
	UploadedBytes int64 // LFS bytes sent
	Empty         bool  // nothing changed: no commit made (OID is the head)
}

type op struct {
	PreparedFile
	mode string // "lfs" or "regular"
}

// CreateCommit uploads the files and commits them with the deletions in one
// commit, as create_commit: preupload decides each file's mode, LFS objects
// the Hub lacks go through the batch API (in parallel, each read is hashed
// again while it is sent), files identical to the head are left out, and an
// empty commit is skipped.
func (c *Client) CreateCommit(ctx context.Context, cm Commit, progress io.Writer) (*CommitResult, error) {
	if c.cfg.Token == "" {
		return nil, errTokenless
	}
	branch := cm.Branch
	if branch == "" {
		branch = "main"
	}
	ops, err := c.preupload(ctx, cm.Repo, branch, cm.Files)
	if err != nil {
		return nil, err
	}
	res := &CommitResult{}
	var lfs []op
	var changed []op
	for _, o := range ops {
		if o.mode == "lfs" {
			lfs = append(lfs, o)
		}
	}
	uploaded, reused, sent, err := c.uploadLFS(ctx, cm.Repo, branch, lfs, progress)
	if err != nil {
		return nil, err
	}
	res.LFSUploaded, res.LFSReused, res.UploadedBytes = uploaded, reused, sent
	for _, o := range ops {
		if o.mode == "unchanged" {
			res.Unchanged++
			continue
		}
		changed = append(changed, o)
	}
	if len(changed) == 0 && len(cm.Delete) == 0 {
		head, err := c.ResolveRevision(ctx, cm.Repo, branch)
		if err != nil {
			return nil, err
		}
		res.OID, res.URL, res.Empty = head, c.commitURL(cm.Repo, head), true
		return res, nil
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	header := map[string]any{"summary": cm.Summary, "description": cm.Description}
	if cm.Parent != "" {
		header["parentCommit"] = cm.Parent
	}
	enc.Encode(map[string]any{"key": "header", "value": header})
	for _, o := range changed {
		if o.mode == "lfs" {
			enc.Encode(map[string]any{"key": "lfsFile", "value": map[string]any{"path": o.Path, "algo": "sha256", "oid": o.SHA256, "size": o.Size}})
			continue
		}
		data, err := os.ReadFile(o.Local)
		if err != nil {
			return nil, err
		}
		if sum := sha1Git(data); sum != o.GitSHA1 {
			return nil, fmt.Errorf("%s changed while pushing (it hashed to git %s, now %s)", o.Local, o.GitSHA1, sum)
		}
		enc.Encode(map[string]any{"key": "file", "value": map[string]any{"content": base64.StdEncoding.EncodeToString(data), "path": o.Path, "encoding": "base64"}})
	}
	for _, p := range cm.Delete {
		enc.Encode(map[string]any{"key": "deletedFile", "value": map[string]any{"path": p}})
	}
	u := fmt.Sprintf("%s/api/models/%s/commit/%s", c.cfg.Endpoint, cm.Repo, url.PathEscape(branch))
	payload := body.Bytes()
	// No retry: a commit whose answer was lost must not be made twice
	// (huggingface_hub's _send_commit does not retry either).
	resp, err := c.doOnce(ctx, call{method: http.MethodPost, url: u, repo: cm.Repo, size: int64(len(payload)),
		header: http.Header{"Content-Type": {"application/x-ndjson"}},
		body:   func() (io.Reader, error) { return bytes.NewReader(payload), nil }})
	if err != nil {
		return nil, fmt.Errorf("commit to %s@%s: %w", cm.Repo, branch, err)
	}
	defer resp.Body.Close()
	var out struct {
		CommitOID *string `json:"commitOid"`
		CommitURL *string `json:"commitUrl"`
	}
	if err := decodeJSON(resp.Body, "POST "+u, &out); err != nil {
		return nil, err
	}
	switch {
	case out.CommitOID == nil || !IsCommit(*out.CommitOID):
		return nil, &ParseError{Endpoint: "POST " + u, Field: "commitOid", Problem: "missing or not a 40-hex commit id"}
	case out.CommitURL == nil:
		return nil, &ParseError{Endpoint: "POST " + u, Field: "commitUrl", Problem: "missing"}
	}
	res.OID, res.URL = *out.CommitOID, *out.CommitURL
	return res, nil
}

func (c *Client) commitURL(repo, commit string) string {
	return fmt.Sprintf("%s/%s/commit/%s", c.cfg.Endpoint, repo, commit)
}

func sha1Git(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// preupload asks the upload mode of every file (_fetch_upload_modes); a file
// whose oid equals the head's is marked "unchanged".
func (c *Client) preupload(ctx context.Context, repo, branch string, files []PreparedFile) ([]op, error) {
	u := fmt.Sprintf("%s/api/models/%s/preupload/%s", c.cfg.Endpoint, repo, url.PathEscape(branch))
	var ops []op
	for start := 0; start < len(files); start += uploadBatch {
		chunk := files[start:min(start+uploadBatch, len(files))]
		req := map[string]any{"files": func() []map[string]any {
			var out []map[string]any
			for _, f := range chunk {
				out = append(out, map[string]any{"path": f.Path, "sample": base64.StdEncoding.EncodeToString(f.Sample), "size": f.Size})
			}
			return out
		}()}
		var resp struct {
			Files []struct {
				Path       *string `json:"path"`
				UploadMode *string `json:"uploadMode"`
				OID        *string `json:"oid"`
			} `json:"files"`
		}
		if err := c.postJSON(ctx, http.MethodPost, u, repo, nil, req, &resp); err != nil {
			return nil, fmt.Errorf("preupload to %s@%s: %w", repo, branch, err)
		}
		modes := map[string]string{}
		oids := map[string]string{}
		for i, f := range resp.Files {
			switch {
			case f.Path == nil:
				return nil, &ParseError{Endpoint: "POST " + u, Field: fmt.Sprintf("files[%d].path", i), Problem: "missing"}
			case f.UploadMode == nil || (*f.UploadMode != "lfs" && *f.UploadMode != "regular"):
				return nil, &ParseError{Endpoint: "POST " + u, Field: fmt.Sprintf("files[%d].uploadMode", i), Problem: "missing or not lfs|regular"}
			}
			modes[*f.Path] = *f.UploadMode
			if f.OID != nil {
				oids[*f.Path] = *f.OID
			}
		}
		for _, f := range chunk {
			mode, ok := modes[f.Path]
			if !ok {
				return nil, &ParseError{Endpoint: "POST " + u, Field: "files", Problem: fmt.Sprintf("no upload mode for %q", f.Path)}
			}
			if f.Size == 0 {
				mode = "regular" // empty files cannot go to LFS storage
			}
			local := f.GitSHA1
			if mode == "lfs" {
				local = f.SHA256
			}
			if remote, ok := oids[f.Path]; ok && remote == local {
				mode = "unchanged"
			}
			ops = append(ops, op{PreparedFile: f, mode: mode})
		}
	}
	return ops, nil
}

// batchObject is one object of a git-lfs batch answer.
type batchObject struct {
	OID     *string `json:"oid"`
	Size    *int64  `json:"size"`
	Actions *struct {
		Upload *struct {
			Href   *string           `json:"href"`
			Header map[string]string `json:"header"`
		} `json:"upload"`
		Verify *struct {
			Href   *string           `json:"href"`
			Header map[string]string `json:"header"`
		} `json:"verify"`
	} `json:"actions"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// upload is one LFS object to send and the batch API's actions for it.
type upload struct {
	op
	obj batchObject
}

// uploadLFS sends the LFS objects the Hub lacks (post_lfs_batch_info, then
// lfs_upload for each, five at a time as huggingface_hub).
func (c *Client) uploadLFS(ctx context.Context, repo, branch string, ops []op, progress io.Writer) (uploaded, reused int, sent int64, err error) {
	u := fmt.Sprintf("%s/%s.git/info/lfs/objects/batch", c.cfg.Endpoint, repo)
	byOID := map[string]op{}
	var todo []upload
	for start := 0; start < len(ops); start += uploadBatch {
		chunk := ops[start:min(start+uploadBatch, len(ops))]
		var objects []map[string]any
		for _, o := range chunk {
			byOID[o.SHA256] = o
			objects = append(objects, map[string]any{"oid": o.SHA256, "size": o.Size})
		}
		req := map[string]any{"operation": "upload", "transfers": []string{"basic", "multipart"}, "objects": objects,
			"hash_algo": "sha256", "ref": map[string]any{"name": branch}}
		var resp struct {
			Objects []batchObject `json:"objects"`
		}
		if err := c.postJSON(ctx, http.MethodPost, u, repo, lfsHeaders, req, &resp); err != nil {
			return 0, 0, 0, fmt.Errorf("LFS batch for %s: %w", repo, err)
		}
		var problems []string
		for i, obj := range resp.Objects {
			if obj.OID == nil || obj.Size == nil {
				return 0, 0, 0, &ParseError{Endpoint: "POST " + u, Field: fmt.Sprintf("objects[%d].oid/size", i), Problem: "missing"}
			}
			o, ok := byOID[*obj.OID]
			switch {
			case !ok:
				return 0, 0, 0, &ParseError{Endpoint: "POST " + u, Field: fmt.Sprintf("objects[%d].oid", i), Problem: "an object that was not asked for"}
			case obj.Error != nil:
				problems = append(problems, fmt.Sprintf("%s (%s): %d %s", o.Path, *obj.OID, obj.Error.Code, obj.Error.Message))
			case obj.Actions == nil || obj.Actions.Upload == nil:
				reused++ // the Hub holds it already
			case obj.Actions.Upload.Href == nil:
				return 0, 0, 0, &ParseError{Endpoint: "POST " + u, Field: fmt.Sprintf("objects[%d].actions.upload.href", i), Problem: "missing"}
			default:
				todo = append(todo, upload{o, obj})
			}
		}
		if len(problems) > 0 {
			return 0, 0, 0, fmt.Errorf("the LFS batch API refused: %s", strings.Join(problems, "; "))
		}
	}
	if len(todo) == 0 {
		return 0, reused, 0, nil
	}
	var total int64
	for _, t := range todo {
		total += t.Size
	}
	prog := newProgress(progress, fmt.Sprintf("Uploading %d LFS files to %s", len(todo), repo), total)
	err = parallel(ctx, 5, todo, func(ctx context.Context, t upload) error {
		if err := c.uploadObject(ctx, repo, t.op, t.obj, prog); err != nil {
			return fmt.Errorf("upload %s: %w", t.Path, err)
		}
		return nil
	})
	prog.finish()
	if err != nil {
		return 0, 0, 0, err
	}
	return len(todo), reused, prog.wire.Load(), nil
}

// uploadObject is lfs_upload: a single PUT (basic) or the parts of a
// multipart upload and its completion, then the verify action.
func (c *Client) uploadObject(ctx context.Context, repo string, o op, obj batchObject, prog *progress) error {
	up := obj.Actions.Upload
	counter := prog.track(o.Local)
	if cs, ok := up.Header["chunk_size"]; ok {
		chunk, err := strconv.ParseInt(cs, 10, 64)
		if err != nil || chunk <= 0 {
			return &ParseError{Endpoint: "LFS batch", Field: "actions.upload.header.chunk_size", Problem: fmt.Sprintf("%q is not a positive integer", cs)}
		}
		if err := c.uploadParts(ctx, repo, o, *up.Href, up.Header, chunk, counter, prog); err != nil {
			return err
		}
	} else {
		resp, err := c.do(ctx, call{method: http.MethodPut, url: *up.Href, repo: repo, size: o.Size, retryNetwork: true,
			body: func() (io.Reader, error) {
				return c.verifiedSection(o, 0, o.Size, sha256.New(), o.SHA256, counter, prog)
			}})
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	if v := obj.Actions.Verify; v != nil && v.Href != nil {
		h := http.Header{}
		for k, val := range v.Header {
			h.Set(k, val)
		}
		if err := c.postJSON(ctx, http.MethodPost, *v.Href, repo, h, map[string]any{"oid": o.SHA256, "size": o.Size}, nil); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	return nil
}

// uploadParts sends a multipart upload: the numbered part URLs of the
// header in order, chunk bytes each, then POSTs {oid, parts} to href.
func (c *Client) uploadParts(ctx context.Context, repo string, o op, href string, header map[string]string, chunk int64, counter countingTarget, prog *progress) error {
	type part struct {
		n   int
		url string
	}
	var parts []part
	for k, v := range header {
		if n, err := strconv.Atoi(k); err == nil && n > 0 {
			parts = append(parts, part{n, v})
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].n < parts[j].n })
	if want := int(math.Ceil(float64(o.Size) / float64(chunk))); len(parts) != want {
		return &ParseError{Endpoint: "LFS batch", Field: "actions.upload.header", Problem: fmt.Sprintf("%d part URLs for %d bytes in parts of %d (want %d)", len(parts), o.Size, chunk, want)}
	}
	var done []map[string]any
	for i, p := range parts {
		off := int64(i) * chunk
		n := min(chunk, o.Size-off)
		resp, err := c.do(ctx, call{method: http.MethodPut, url: p.url, repo: repo, size: n, retryNetwork: true,
			body: func() (io.Reader, error) { return c.verifiedSection(o, off, n, nil, "", counter, prog) }})
		if err != nil {
			return fmt.Errorf("part %d: %w", p.n, err)
		}
		etag := resp.Header.Get("ETag")
		resp.Body.Close()
		if etag == "" {
			return &ParseError{Endpoint: "PUT part " + strconv.Itoa(p.n), Field: "ETag", Problem: "missing"}
		}
		done = append(done, map[string]any{"partNumber": p.n, "etag": etag})
	}
	// The parts were not hashed as a whole: check the file did not change
	// since it was hashed.
	if fi, err := os.Stat(o.Local); err != nil || fi.Size() != o.Size || !fi.ModTime().Equal(o.mtime) {
		return fmt.Errorf("%s changed while it was uploaded; push again", o.Local)
	}
	return c.postJSON(ctx, http.MethodPost, href, repo, lfsHeaders, map[string]any{"oid": o.SHA256, "parts": done}, nil)
}

// countingTarget is a per-file byte counter of the progress bar.
type countingTarget = interface {
	Store(int64)
	Add(int64) int64
}

// verifiedSection opens bytes [off, off+n) of the file for one upload
// attempt. With h set it hashes what it reads and fails the read at the end
// when the hash is not want, so a file changed since it was hashed is never
// accepted as sent.
func (c *Client) verifiedSection(o op, off, n int64, h hash.Hash, want string, counter countingTarget, prog *progress) (io.Reader, error) {
	f, err := os.Open(o.Local)
	if err != nil {
		return nil, err
	}
	counter.Store(off)
	return &sectionReader{f: f, r: io.NewSectionReader(f, off, n), h: h, want: want, counter: counter, wire: &prog.wire}, nil
}

type sectionReader struct {
	f       *os.File
	r       io.Reader
	h       hash.Hash
	want    string
	counter countingTarget
	wire    interface{ Add(int64) int64 }
}

func (s *sectionReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.counter.Add(int64(n))
		s.wire.Add(int64(n))
		if s.h != nil {
			s.h.Write(p[:n])
		}
	}
	if err == io.EOF {
		if s.h != nil {
			if got := hex.EncodeToString(s.h.Sum(nil)); got != s.want {
				return n, fmt.Errorf("%s changed since it was hashed: sha256 %s, expected %s; not sent", s.f.Name(), got, s.want)
			}
		}
	}
	return n, err
}

// Close releases the file when the transfer ends early.
func (s *sectionReader) Close() error { return s.f.Close() }
