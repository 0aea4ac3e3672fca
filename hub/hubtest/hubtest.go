// Package hubtest is a local Hugging Face Hub for tests: it implements the
// endpoints the hub client calls, with the headers the real Hub sends, so the
// client is tested end to end without the network (the real Hub cannot be
// reached from the machines this project is built on).
//
//	GET  /api/models/{repo}/revision/{rev}[?blobs=true]  commit + siblings
//	HEAD /{repo}/resolve/{rev}/{file}   X-Repo-Commit, ETag / X-Linked-Etag, X-Linked-Size
//	GET  /{repo}/resolve/{rev}/{file}   the content (small files) or a 302 to /cdn/ (LFS)
//	GET  /cdn/{sha256}                  LFS content, with Range support
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	LFS  bool // served as an LFS file: 302 to the CDN, sha256 etag
}

// Request is one request the server saw.
type Request struct {
	Method, Path, Range, Authorization string
}

// Server is a running local Hub.
type Server struct {
	*httptest.Server

	mu          sync.Mutex
	repos       map[string]*repo
	blobs       map[string][]byte // LFS content by sha256
	log         []Request
	token       string
	stallAfter  int64
	ignoreRange bool
	corrupt     bool
}

type repo struct {
	refs    map[string]string
	commits map[string][]File
}

// New starts a server; Close it when done.
func New() *Server {
	s := &Server{repos: map[string]*repo{}, blobs: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddCommit stores files as a new commit of repoID, points branch at it and
// returns its 40-hex id.
func (s *Server) AddCommit(repoID, branch string, files []File) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha1.New()
	fmt.Fprintf(h, "%s %s %d\n", repoID, branch, len(s.repos))
	for _, f := range files {
		fmt.Fprintf(h, "%s %x\n", f.Path, sha256.Sum256(f.Data))
	}
	commit := hex.EncodeToString(h.Sum(nil))
	r := s.repos[repoID]
	if r == nil {
		r = &repo{refs: map[string]string{}, commits: map[string][]File{}}
		s.repos[repoID] = r
	}
	r.commits[commit] = files
	r.refs[branch] = commit
	for _, f := range files {
		if f.LFS {
			s.blobs[SHA256(f.Data)] = f.Data
		}
	}
	return commit
}

// RequireToken makes every Hub endpoint (not the CDN) answer 401 unless the
// request carries "Authorization: Bearer token".
func (s *Server) RequireToken(token string) { s.mu.Lock(); s.token = token; s.mu.Unlock() }

// StallAfter makes CDN transfers send n bytes and then hang until the client
// goes away, to kill a download mid-transfer; 0 turns it off.
func (s *Server) StallAfter(n int64) { s.mu.Lock(); s.stallAfter = n; s.mu.Unlock() }

// IgnoreRange makes the CDN answer every request with the whole file (200).
func (s *Server) IgnoreRange(on bool) { s.mu.Lock(); s.ignoreRange = on; s.mu.Unlock() }

// Corrupt makes the CDN flip one byte of every file it sends.
func (s *Server) Corrupt(on bool) { s.mu.Lock(); s.corrupt = on; s.mu.Unlock() }

// Requests returns what the server has seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// SHA256 is the hex sha256 of b (the etag of an LFS file).
func SHA256(b []byte) string { x := sha256.Sum256(b); return hex.EncodeToString(x[:]) }

// GitBlobID is the git blob sha1 of b (the etag of a non-LFS file).
func GitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.log = append(s.log, Request{r.Method, r.URL.Path, r.Header.Get("Range"), r.Header.Get("Authorization")})
	token := s.token
	s.mu.Unlock()
	p := r.URL.EscapedPath()
	if rest, ok := strings.CutPrefix(p, "/cdn/"); ok {
		s.serveCDN(w, r, rest)
		return
	}
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		hubError(w, http.StatusUnauthorized, "Invalid credentials in Authorization header")
		return
	}
	if rest, ok := strings.CutPrefix(p, "/api/models/"); ok && r.Method == http.MethodGet {
		repoID, rev, ok := strings.Cut(rest, "/revision/")
		if !ok {
			hubError(w, http.StatusNotFound, "unknown API route")
			return
		}
		s.serveRevision(w, r, repoID, unescape(rev))
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 5)
	if len(parts) == 5 && parts[2] == "resolve" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		s.serveResolve(w, r, parts[0]+"/"+parts[1], unescape(parts[3]), unescape(parts[4]))
		return
	}
	hubError(w, http.StatusNotFound, "no such route")
}

func (s *Server) lookup(repoID, rev string) (string, []File, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil {
		return "", nil, "Repository not found"
	}
	commit := rev
	if c, ok := r.refs[rev]; ok {
		commit = c
	}
	files, ok := r.commits[commit]
	if !ok {
		return "", nil, "Invalid rev id: " + rev
	}
	return commit, files, ""
}

type sibling struct {
	Path   string  `json:"rfilename"`
	Size   *int64  `json:"size,omitempty"`
	BlobID string  `json:"blob_id,omitempty"`
	LFS    *lfsRef `json:"lfs,omitempty"`
}

type lfsRef struct {
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	PointerSize int    `json:"pointerSize"`
}

func (s *Server) serveRevision(w http.ResponseWriter, r *http.Request, repoID, rev string) {
	commit, files, msg := s.lookup(repoID, rev)
	if msg != "" {
		hubError(w, http.StatusNotFound, msg)
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true"
	sibs := make([]sibling, 0, len(files))
	for _, f := range files {
		sb := sibling{Path: f.Path}
		if blobs {
			size := int64(len(f.Data))
			sb.Size = &size
			sb.BlobID = GitBlobID(pointerOrData(f))
			if f.LFS {
				sb.LFS = &lfsRef{SHA256: SHA256(f.Data), Size: size, PointerSize: len(pointerOrData(f))}
			}
		}
		sibs = append(sibs, sb)
	}
	sort.Slice(sibs, func(i, j int) bool { return sibs[i].Path < sibs[j].Path })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"_id": "t", "id": repoID, "modelId": repoID, "sha": commit, "private": false,
		"lastModified": time.Unix(0, 0).UTC().Format(time.RFC3339), "siblings": sibs,
	})
}

// pointerOrData is what git stores for the file: the LFS pointer text for an
// LFS file, so its blob_id differs from its sha256 as on the real Hub.
func pointerOrData(f File) []byte {
	if !f.LFS {
		return f.Data
	}
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", SHA256(f.Data), len(f.Data))
}

func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, repoID, rev, path string) {
	commit, files, msg := s.lookup(repoID, rev)
	if msg != "" {
		hubError(w, http.StatusNotFound, msg)
		return
	}
	for _, f := range files {
		if f.Path != path {
			continue
		}
		h := w.Header()
		h.Set("X-Repo-Commit", commit)
		h.Set("ETag", `"`+GitBlobID(pointerOrData(f))+`"`)
		if f.LFS {
			sum := SHA256(f.Data)
			h.Set("X-Linked-Etag", `"`+sum+`"`)
			h.Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
			h.Set("Location", s.URL+"/cdn/"+sum+"?X-Amz-Expires=3600")
			w.WriteHeader(http.StatusFound)
			return
		}
		http.ServeContent(w, r, "", time.Unix(0, 0), bytes.NewReader(f.Data))
		return
	}
	h := w.Header()
	h.Set("X-Error-Code", "EntryNotFound")
	hubError(w, http.StatusNotFound, "Entry not found")
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request, sum string) {
	s.mu.Lock()
	data, ok := s.blobs[sum]
	stall, ignoreRange, corrupt := s.stallAfter, s.ignoreRange, s.corrupt
	s.mu.Unlock()
	if !ok {
		http.Error(w, "NoSuchKey", http.StatusNotFound)
		return
	}
	if corrupt && len(data) > 0 {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	if ignoreRange {
		r.Header.Del("Range")
	}
	if stall > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:min(int(stall), len(data))])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // hang until the client is killed
		return
	}
	http.ServeContent(w, r, "", time.Unix(0, 0), bytes.NewReader(data))
}

func hubError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func unescape(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}
