// Package hubtest is a local Hugging Face Hub for tests and local
// development: the read and write endpoints huggingface_hub calls, with the
// field names, headers, status codes and refusals of the real Hub as
// huggingface_hub's source reads them (docs/hub-wire.md lists each with its
// source line). The real Hub cannot be reached from the machines this
// project is built on; testdata/ holds recorded examples of real Hub
// answers, and hubtest_test.go holds this server to their shape.
//
// Read side (hub API, then the storage server):
//
//	GET  /api/models/{repo}[/revision/{rev}][?blobs=true]  model info: sha, siblings, tags, cardData
//	GET  /api/models/{repo}/tree/{rev}[/{path}]?recursive=  tree entries, Link-paginated
//	HEAD /{repo}/resolve/{rev}/{file}   X-Repo-Commit, ETag / X-Linked-Etag, X-Linked-Size, 302 to storage (LFS)
//	GET  /{repo}/resolve/{rev}/{file}   the content (git files) or a 302 to storage (LFS files)
//	GET  {storage}/lfs/{repo}/{sha256}  LFS content, with Range support
//
// Write side:
//
//	GET  /api/whoami-v2                             the token's user and role
//	POST /api/repos/create                          a repo with an initial .gitattributes commit (409 when it exists)
//	PUT  /api/models/{repo}/settings                visibility
//	POST /api/models/{repo}/branch/{branch}         a branch (409 when it exists)
//	POST /api/models/{repo}/preupload/{rev}         uploadMode (lfs|regular), shouldIgnore, oid per path
//	POST /{repo}.git/info/lfs/objects/batch         upload actions for the objects the repo lacks
//	PUT  {storage}/upload/{repo}/{sha256}[?part=N]  object bytes (basic, or one part of a multipart upload)
//	POST /{repo}.git/info/lfs/objects/verify        the uploaded object hashes to its oid and size
//	POST /{repo}.git/info/lfs/objects/complete/{oid} multipart completion
//	POST /api/models/{repo}/commit/{rev}            NDJSON: header, file, lfsFile, deletedFile, deletedFolder
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// File is one file of a commit.
type File struct {
	Path string
	Data []byte
	LFS  bool // stored with LFS: resolve redirects to storage, the etag is its sha256
}

// Request is one request the server (hub or storage) saw.
type Request struct {
	Method, Path, Range, Authorization string
	Host                               string // "hub" or "storage"
	Bytes                              int64  // request body size (uploads)
}

// Token is what the Hub knows about an access token.
type Token struct {
	User  string
	Orgs  []string // namespaces besides User the token may write to
	Write bool     // role "write" (else "read")
	Name  string   // displayName (default: "tt-model-test")
}

// Server is a running local Hub and its storage server.
type Server struct {
	*httptest.Server                  // the Hub (URL is HF_ENDPOINT)
	Storage          *httptest.Server // where LFS content is downloaded from and uploaded to

	mu     sync.Mutex
	repos  map[string]*repo
	tokens map[string]Token
	log    []Request
	nextID int // commit counter
	reqID  int

	// Knobs for tests.
	stallAfter       int64 // storage downloads send this many bytes, then hang
	ignoreRange      bool
	corrupt          bool
	pageSize         int   // tree entries per page
	multipartChunk   int64 // >0: objects larger than this upload in parts of this size
	stallUploadsFrom int   // >0: storage PUTs hang once this many objects are stored
	failures         []failure
	closed           chan struct{} // releases stalled requests on Close
	closeOnce        sync.Once
}

type failure struct {
	method, prefix string
	status, left   int
}

type repo struct {
	id      string
	private bool
	gated   bool
	created time.Time
	refs    map[string]string // branch -> commit
	commits map[string]*commit
	lfs     map[string][]byte // verified LFS objects by sha256
	pending map[string][]byte // uploaded, not yet verified
	parts   map[string]map[int][]byte
}

type commit struct {
	id, parent, title string
	at                time.Time
	files             map[string]File
}

// New starts a Hub on loopback ports; Close it when done.
func New() *Server { return must(NewOn("127.0.0.1:0", "127.0.0.1:0")) }

// NewOn starts a Hub whose API listens on hubAddr and storage on storeAddr.
func NewOn(hubAddr, storeAddr string) (*Server, error) {
	s := &Server{repos: map[string]*repo{}, tokens: map[string]Token{}, pageSize: 1000, closed: make(chan struct{})}
	hl, err := net.Listen("tcp", hubAddr)
	if err != nil {
		return nil, fmt.Errorf("hub listener: %w", err)
	}
	sl, err := net.Listen("tcp", storeAddr)
	if err != nil {
		hl.Close()
		return nil, fmt.Errorf("storage listener: %w", err)
	}
	s.Server = start(hl, http.HandlerFunc(s.serveHub))
	s.Storage = start(sl, http.HandlerFunc(s.serveStorage))
	return s, nil
}

func start(l net.Listener, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	return srv
}

func must(s *Server, err error) *Server {
	if err != nil {
		panic(err)
	}
	return s
}

// Close stops both servers; closing twice is harmless.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
	s.Server.Close()
	s.Storage.Close()
}

// AddToken makes the Hub accept token.
func (s *Server) AddToken(token string, t Token) {
	if t.Name == "" {
		t.Name = "tt-model-test"
	}
	s.mu.Lock()
	s.tokens[token] = t
	s.mu.Unlock()
}

// SetPrivate makes repoID visible only to tokens of its namespace.
func (s *Server) SetPrivate(repoID string, private bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoLocked(repoID).private = private
}

// SetGated makes repoID answer GatedRepo to every token but its owner's.
func (s *Server) SetGated(repoID string, gated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoLocked(repoID).gated = gated
}

// AddCommit stores files as a new commit of repoID on branch (creating both)
// and returns its 40-hex id.
func (s *Server) AddCommit(repoID, branch string, files []File) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repoID)
	c := s.newCommitLocked(r, r.refs[branch], "Upload files", r.storeLocked(files))
	r.refs[branch] = c.id
	return c.id
}

// AddCommitAt stores files as commit id of repoID on branch: a repo whose
// commit ids are known beforehand (a pinned weights revision).
func (s *Server) AddCommitAt(repoID, branch, id string, files []File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repoID)
	fm := r.storeLocked(files)
	s.nextID++
	r.commits[id] = &commit{id: id, parent: r.refs[branch], title: "Upload files", files: fm,
		at: r.created.Add(time.Duration(s.nextID) * time.Minute)}
	r.refs[branch] = id
}

// storeLocked keeps the LFS files' contents in r's object store and returns
// files by path, a commit's file map.
func (r *repo) storeLocked(files []File) map[string]File {
	fm := map[string]File{}
	for _, f := range files {
		fm[f.Path] = f
		if f.LFS {
			r.lfs[SHA256(f.Data)] = f.Data
		}
	}
	return fm
}

// StallAfter makes storage downloads send n bytes and then hang until the
// client goes away; 0 turns it off.
func (s *Server) StallAfter(n int64) { s.mu.Lock(); s.stallAfter = n; s.mu.Unlock() }

// IgnoreRange makes storage answer every download with the whole file (200).
func (s *Server) IgnoreRange(on bool) { s.mu.Lock(); s.ignoreRange = on; s.mu.Unlock() }

// Corrupt makes storage flip one byte of every file it sends.
func (s *Server) Corrupt(on bool) { s.mu.Lock(); s.corrupt = on; s.mu.Unlock() }

// SetPageSize sets how many entries a tree page holds (default 1000).
func (s *Server) SetPageSize(n int) { s.mu.Lock(); s.pageSize = max(n, 1); s.mu.Unlock() }

// SetMultipart makes the LFS batch endpoint ask for multipart uploads in
// parts of chunk bytes for objects larger than chunk; 0 restores basic
// single-PUT transfers.
func (s *Server) SetMultipart(chunk int64) { s.mu.Lock(); s.multipartChunk = chunk; s.mu.Unlock() }

// StallUploadsFrom makes storage PUTs hang, once n objects are stored, until
// the client goes away (to kill an upload midway); 0 turns it off.
func (s *Server) StallUploadsFrom(n int) { s.mu.Lock(); s.stallUploadsFrom = n; s.mu.Unlock() }

// Fail answers the next n requests whose method is method and whose path
// starts with prefix with status (a transient 5xx, say), before any other
// handling.
func (s *Server) Fail(method, prefix string, status, n int) {
	s.mu.Lock()
	s.failures = append(s.failures, failure{method: method, prefix: prefix, status: status, left: n})
	s.mu.Unlock()
}

// Requests returns what the servers have seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Head is the commit branch points at ("" when repo or branch is missing).
func (s *Server) Head(repoID, branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[repoID]; r != nil {
		return r.refs[branch]
	}
	return ""
}

// Files returns the files of a commit ("" = the head of main), sorted by path.
func (s *Server) Files(repoID, rev string) []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil {
		return nil
	}
	if rev == "" {
		rev = "main"
	}
	if c, ok := r.refs[rev]; ok {
		rev = c
	}
	c := r.commits[rev]
	if c == nil {
		return nil
	}
	return sortedFiles(c.files)
}

// Commits counts the commits of repoID.
func (s *Server) Commits(repoID string) int {
	var n int
	s.withRepo(repoID, func(r *repo) { n = len(r.commits) })
	return n
}

// Objects counts the LFS objects repoID holds (uploaded and verified).
func (s *Server) Objects(repoID string) int {
	var n int
	s.withRepo(repoID, func(r *repo) { n = len(r.lfs) })
	return n
}

// Private reports the visibility of repoID.
func (s *Server) Private(repoID string) bool {
	var private bool
	s.withRepo(repoID, func(r *repo) { private = r.private })
	return private
}

// withRepo calls f on repoID's repo under the lock; not at all when there
// is no such repo.
func (s *Server) withRepo(repoID string, f func(r *repo)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[repoID]; r != nil {
		f(r)
	}
}

// SHA256 is the hex sha256 of b (the etag of an LFS file).
func SHA256(b []byte) string { x := sha256.Sum256(b); return hex.EncodeToString(x[:]) }

// GitBlobID is the git blob sha1 of b (the etag of a file stored in git).
func GitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// LFSPointer is the git-lfs pointer git stores for an LFS file: the blob
// whose id the Hub gives as the file's oid.
func LFSPointer(data []byte) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", SHA256(data), len(data))
}

// gitBlob is what git stores for f: the pointer of an LFS file.
func gitBlob(f File) []byte {
	if f.LFS {
		return LFSPointer(f.Data)
	}
	return f.Data
}

func (s *Server) repoLocked(id string) *repo {
	r := s.repos[id]
	if r == nil {
		r = &repo{id: id, created: time.Unix(1700000000, 0).UTC(), refs: map[string]string{}, commits: map[string]*commit{},
			lfs: map[string][]byte{}, pending: map[string][]byte{}, parts: map[string]map[int][]byte{}}
		s.repos[id] = r
	}
	return r
}

// newCommitLocked stores a commit; its id hashes its parent, title and files.
func (s *Server) newCommitLocked(r *repo, parent, title string, files map[string]File) *commit {
	s.nextID++
	h := sha1.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%d\n", r.id, parent, title, s.nextID)
	for _, f := range sortedFiles(files) {
		fmt.Fprintf(h, "%s %s\n", f.Path, GitBlobID(gitBlob(f)))
	}
	c := &commit{id: hex.EncodeToString(h.Sum(nil)), parent: parent, title: title, files: files,
		at: r.created.Add(time.Duration(s.nextID) * time.Minute)}
	r.commits[c.id] = c
	return c
}

func sortedFiles(m map[string]File) []File {
	out := make([]File, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// record logs a request and returns the injected failure status, if any.
func (s *Server) record(r *http.Request, host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"),
		Authorization: r.Header.Get("Authorization"), Host: host, Bytes: r.ContentLength})
	for i := range s.failures {
		f := &s.failures[i]
		if f.left > 0 && r.Method == f.method && strings.HasPrefix(r.URL.Path, f.prefix) {
			f.left--
			return f.status
		}
	}
	return 0
}

// hubError answers as the Hub does: X-Error-Code when the Hub names the
// error, X-Error-Message, and {"error": message}.
func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// stall hangs a request until its client goes away or the server closes.
func (s *Server) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closed:
	}
}

func (s *Server) requestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqID++
	return "Root=1-hubtest-" + strconv.Itoa(s.reqID)
}
