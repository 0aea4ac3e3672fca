package hubtest

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// caller is who a request comes from.
type caller struct {
	anonymous bool
	token     Token
}

func (c caller) owns(repoID string) bool {
	ns, _, _ := strings.Cut(repoID, "/")
	return !c.anonymous && (ns == c.token.User || slices.Contains(c.token.Orgs, ns))
}

// authenticate reads the Bearer token; an unknown token is refused on every
// endpoint with the message huggingface_hub singles out.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return caller{anonymous: true}, true
	}
	s.mu.Lock()
	t, ok := s.tokens[strings.TrimPrefix(h, "Bearer ")]
	s.mu.Unlock()
	if !ok || !strings.HasPrefix(h, "Bearer ") {
		hubError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return caller{}, false
	}
	return caller{token: t}, true
}

// readable finds repoID and checks the caller may see it, answering as the
// Hub does otherwise: 401 to anonymous callers and 404 to others, both
// RepoNotFound (a private repo is indistinguishable from a missing one).
func (s *Server) readable(w http.ResponseWriter, c caller, repoID string) (*repo, bool) {
	s.mu.Lock()
	r := s.repos[repoID]
	s.mu.Unlock()
	if r != nil && (!r.private || c.owns(repoID)) {
		return r, true
	}
	if c.anonymous {
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Invalid username or password.")
	} else {
		hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
	}
	return nil, false
}

// readableCommit is readable then lookup: the commit rev names in a repo the
// caller may see, the Hub's error answered otherwise.
func (s *Server) readableCommit(w http.ResponseWriter, c caller, repoID, rev string) (*repo, *commit, bool) {
	rp, ok := s.readable(w, c, repoID)
	if !ok {
		return nil, nil, false
	}
	cm, ok := s.lookup(w, rp, rev)
	return rp, cm, ok
}

// lookup resolves rev (branch or commit) in r.
func (s *Server) lookup(w http.ResponseWriter, r *repo, rev string) (*commit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rev
	if c, ok := r.refs[rev]; ok {
		id = c
	}
	if c := r.commits[id]; c != nil {
		return c, true
	}
	hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
	return nil, false
}

// segments splits an escaped path and unescapes each part.
func segments(escaped string) []string {
	parts := strings.Split(strings.Trim(escaped, "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	return parts
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-Id", s.requestID())
	if status := s.record(r, "hub"); status != 0 {
		hubError(w, status, "", http.StatusText(status))
		return
	}
	c, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	seg := segments(r.URL.EscapedPath())
	switch {
	case len(seg) == 2 && seg[0] == "api" && seg[1] == "whoami-v2" && r.Method == http.MethodGet:
		s.serveWhoami(w, c)
	case len(seg) == 3 && seg[0] == "api" && seg[1] == "repos" && seg[2] == "create" && r.Method == http.MethodPost:
		s.serveCreateRepo(w, r, c)
	case len(seg) >= 4 && seg[0] == "api" && seg[1] == "models":
		s.serveModelAPI(w, r, c, seg[2]+"/"+seg[3], seg[4:])
	case len(seg) >= 5 && strings.HasSuffix(seg[1], ".git") && strings.Join(seg[2:5], "/") == "info/lfs/objects":
		s.serveLFS(w, r, c, seg[0]+"/"+strings.TrimSuffix(seg[1], ".git"), seg[5:])
	case len(seg) >= 5 && seg[2] == "resolve" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.serveResolve(w, r, c, seg[0]+"/"+seg[1], seg[3], strings.Join(seg[4:], "/"))
	default:
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
	}
}

// serveModelAPI routes /api/models/{repo}/…
func (s *Server) serveModelAPI(w http.ResponseWriter, r *http.Request, c caller, repoID string, rest []string) {
	verb := ""
	if len(rest) > 0 {
		verb = rest[0]
	}
	switch {
	case r.Method == http.MethodGet && verb == "":
		s.serveInfo(w, r, c, repoID, "main")
	case r.Method == http.MethodGet && verb == "revision" && len(rest) == 2:
		s.serveInfo(w, r, c, repoID, rest[1])
	case r.Method == http.MethodGet && verb == "tree" && len(rest) >= 2:
		s.serveTree(w, r, c, repoID, rest[1], strings.Join(rest[2:], "/"))
	case r.Method == http.MethodPut && verb == "settings" && len(rest) == 1:
		s.serveSettings(w, r, c, repoID)
	case r.Method == http.MethodPost && verb == "branch" && len(rest) == 2:
		s.serveCreateBranch(w, r, c, repoID, rest[1])
	case r.Method == http.MethodPost && verb == "preupload" && len(rest) == 2:
		s.servePreupload(w, r, c, repoID, rest[1])
	case r.Method == http.MethodPost && verb == "commit" && len(rest) == 2:
		s.serveCommit(w, r, c, repoID, rest[1])
	default:
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
	}
}

// cardFrontMatter is the YAML front matter of README.md, which the Hub
// serves as cardData and from which it takes a model's tags.
func cardFrontMatter(files map[string]File) map[string]any {
	readme, ok := files["README.md"]
	if !ok {
		return nil
	}
	text := string(readme.Data)
	if !strings.HasPrefix(text, "---\n") {
		return nil
	}
	end := strings.Index(text[4:], "\n---")
	if end < 0 {
		return nil
	}
	var meta map[string]any
	if yaml.Unmarshal([]byte(text[4:4+end]), &meta) != nil {
		return nil
	}
	return meta
}

// serveInfo answers model_info: the fields ModelInfo reads (hf_api.py), in
// the Hub's camelCase, siblings with blobs=true carrying size, blobId and
// lfs.{sha256,size,pointerSize}.
func (s *Server) serveInfo(w http.ResponseWriter, r *http.Request, c caller, repoID, rev string) {
	rp, cm, ok := s.readableCommit(w, c, repoID, rev)
	if !ok {
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true" || r.URL.Query().Get("blobs") == "True" || r.URL.Query().Get("blobs") == "1"
	siblings := []map[string]any{}
	var used int64
	for _, f := range sortedFiles(cm.files) {
		sb := map[string]any{"rfilename": f.Path}
		if blobs {
			sb["size"] = len(f.Data)
			sb["blobId"] = GitBlobID(gitBlob(f))
			if f.LFS {
				sb["lfs"] = map[string]any{"sha256": SHA256(f.Data), "size": len(f.Data), "pointerSize": len(LFSPointer(f.Data))}
			}
		}
		siblings = append(siblings, sb)
		used += int64(len(f.Data))
	}
	meta := cardFrontMatter(cm.files)
	tags := []string{}
	if t, ok := meta["tags"].([]any); ok {
		for _, v := range t {
			tags = append(tags, fmt.Sprint(v))
		}
	}
	if lic, ok := meta["license"].(string); ok {
		tags = append(tags, "license:"+lic)
	}
	tags = append(tags, "region:us")
	ns, _, _ := strings.Cut(repoID, "/")
	info := map[string]any{
		"_id": fmt.Sprintf("%x", sha1.Sum([]byte(repoID)))[:24], "id": repoID, "modelId": repoID, "author": ns,
		"sha": cm.id, "lastModified": cm.at.Format("2006-01-02T15:04:05.000Z"), "createdAt": rp.created.Format("2006-01-02T15:04:05.000Z"),
		"private": rp.private, "gated": gatedValue(rp.gated), "disabled": false, "downloads": 0, "likes": 0,
		"tags": tags, "siblings": siblings, "spaces": []string{}, "usedStorage": used,
	}
	if meta != nil {
		info["cardData"] = meta
		if p, ok := meta["pipeline_tag"]; ok {
			info["pipeline_tag"] = p
		}
		if l, ok := meta["library_name"]; ok {
			info["library_name"] = l
		}
	}
	writeJSON(w, http.StatusOK, info)
}

func gatedValue(g bool) any {
	if g {
		return "manual"
	}
	return false
}

// serveTree answers list_repo_tree: type, oid, size, path and, for LFS
// files, lfs.{oid,size,pointerSize}; folders as type "directory". Pages are
// linked with a Link: <…&cursor=N>; rel="next" header.
func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, c caller, repoID, rev, dir string) {
	_, cm, ok := s.readableCommit(w, c, repoID, rev)
	if !ok {
		return
	}
	q := r.URL.Query()
	recursive := q.Get("recursive") == "true" || q.Get("recursive") == "True" || q.Get("recursive") == "1"
	expand := q.Get("expand") == "true" || q.Get("expand") == "True" || q.Get("expand") == "1"
	prefix := ""
	if dir != "" {
		prefix = strings.TrimSuffix(dir, "/") + "/"
	}
	dirs := map[string][]File{}
	var entries []map[string]any
	for _, f := range sortedFiles(cm.files) {
		if !strings.HasPrefix(f.Path, prefix) {
			continue
		}
		for d := path.Dir(f.Path); d != "." && strings.HasPrefix(d+"/", prefix) && d+"/" != prefix; d = path.Dir(d) {
			dirs[d] = append(dirs[d], f)
		}
		if !recursive && strings.Contains(strings.TrimPrefix(f.Path, prefix), "/") {
			continue
		}
		e := map[string]any{"type": "file", "oid": GitBlobID(gitBlob(f)), "size": len(f.Data), "path": f.Path}
		if f.LFS {
			e["lfs"] = map[string]any{"oid": SHA256(f.Data), "size": len(f.Data), "pointerSize": len(LFSPointer(f.Data))}
		}
		if expand {
			e["lastCommit"] = map[string]any{"id": cm.id, "title": cm.title, "date": cm.at.Format("2006-01-02T15:04:05.000Z")}
		}
		entries = append(entries, e)
	}
	if prefix != "" && len(entries) == 0 && len(dirs) == 0 {
		w.Header().Set("X-Repo-Commit", cm.id)
		hubError(w, http.StatusNotFound, "EntryNotFound", fmt.Sprintf("%s does not exist on %q", dir, rev))
		return
	}
	for d, files := range dirs {
		if !recursive && strings.Contains(strings.TrimPrefix(d, prefix), "/") {
			continue
		}
		h := sha1.New()
		for _, f := range files {
			fmt.Fprintf(h, "%s %s\n", f.Path, GitBlobID(gitBlob(f)))
		}
		entries = append(entries, map[string]any{"type": "directory", "oid": hex.EncodeToString(h.Sum(nil)), "size": 0, "path": d})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i]["path"].(string) < entries[j]["path"].(string) })
	s.mu.Lock()
	size := s.pageSize
	s.mu.Unlock()
	from, _ := strconv.Atoi(q.Get("cursor"))
	from = min(max(from, 0), len(entries))
	to := min(from+size, len(entries))
	if to < len(entries) {
		next := *r.URL
		nq := next.Query()
		nq.Set("cursor", strconv.Itoa(to))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf("<%s%s>; rel=\"next\"", s.URL, next.RequestURI()))
	}
	page := entries[from:to]
	if page == nil {
		page = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, page)
}

// serveResolve answers hf_hub_url: a git file's content with its blob id as
// ETag, or, for an LFS file, a 302 to storage with X-Linked-Etag (its
// sha256) and X-Linked-Size; X-Repo-Commit always, also on EntryNotFound.
func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, c caller, repoID, rev, file string) {
	rp, ok := s.readable(w, c, repoID)
	if !ok {
		return
	}
	if rp.gated && !c.owns(repoID) {
		status := http.StatusUnauthorized
		if !c.anonymous {
			status = http.StatusForbidden
		}
		hubError(w, status, "GatedRepo", "Access to model "+repoID+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
		return
	}
	cm, ok := s.lookup(w, rp, rev)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("X-Repo-Commit", cm.id)
	f, ok := cm.files[file]
	if !ok {
		hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	h.Set("ETag", `"`+GitBlobID(gitBlob(f))+`"`)
	if f.LFS {
		sum := SHA256(f.Data)
		h.Set("X-Linked-Etag", `"`+sum+`"`)
		h.Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
		h.Set("Location", fmt.Sprintf("%s/lfs/%s/%s?X-Amz-Expires=3600&X-Amz-Signature=hubtest", s.Storage.URL, url.PathEscape(repoID), sum))
		w.WriteHeader(http.StatusFound)
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	http.ServeContent(w, r, "", cm.at, bytes.NewReader(f.Data))
}

// serveStorage is the storage server: LFS downloads (with Range) and
// uploads.
func (s *Server) serveStorage(w http.ResponseWriter, r *http.Request) {
	if status := s.record(r, "storage"); status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	seg := segments(r.URL.EscapedPath())
	switch {
	case len(seg) == 3 && seg[0] == "lfs" && r.Method == http.MethodGet:
		s.serveDownload(w, r, seg[1], seg[2])
	case len(seg) == 3 && seg[0] == "upload" && r.Method == http.MethodPut:
		s.serveUpload(w, r, seg[1], seg[2])
	default:
		http.Error(w, "NoSuchKey", http.StatusNotFound)
	}
}

func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request, repoID, sum string) {
	s.mu.Lock()
	var data []byte
	ok := false
	if rp := s.repos[repoID]; rp != nil {
		data, ok = rp.lfs[sum]
	}
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
	w.Header().Set("ETag", `"`+sum+`"`)
	if stall > 0 {
		// Send stall bytes from where the client asks, then hang until the
		// client goes away.
		from := 0
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.Header.Get("Range"), "bytes="), "-")); err == nil && n < len(data) {
			from = n
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(data)-1, len(data)))
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)-from))
		if from > 0 {
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.WriteHeader(http.StatusOK)
		}
		w.Write(data[from:min(from+int(stall), len(data))])
		w.(http.Flusher).Flush()
		s.stall(r)
		return
	}
	http.ServeContent(w, r, "", time.Unix(0, 0), bytes.NewReader(data))
}
