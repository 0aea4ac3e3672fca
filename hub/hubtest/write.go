package hubtest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// defaultGitattributes is the .gitattributes of the initial commit the Hub
// makes in a new model repo: the formats it stores with LFS.
const defaultGitattributes = `*.7z filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.bz2 filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.ftz filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.joblib filter=lfs diff=lfs merge=lfs -text
*.lfs.* filter=lfs diff=lfs merge=lfs -text
*.mlmodel filter=lfs diff=lfs merge=lfs -text
*.model filter=lfs diff=lfs merge=lfs -text
*.msgpack filter=lfs diff=lfs merge=lfs -text
*.npy filter=lfs diff=lfs merge=lfs -text
*.npz filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.ot filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pb filter=lfs diff=lfs merge=lfs -text
*.pickle filter=lfs diff=lfs merge=lfs -text
*.pkl filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.rar filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
saved_model/**/* filter=lfs diff=lfs merge=lfs -text
*.tar.* filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.tflite filter=lfs diff=lfs merge=lfs -text
*.tgz filter=lfs diff=lfs merge=lfs -text
*.wasm filter=lfs diff=lfs merge=lfs -text
*.xz filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
*.zst filter=lfs diff=lfs merge=lfs -text
*tfevents* filter=lfs diff=lfs merge=lfs -text
`

// The Hub refuses a file committed to git (not LFS) above 10 MiB, and binary
// files outside LFS.
const maxRegularFile = 10 << 20

var (
	repoNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func (s *Server) serveWhoami(w http.ResponseWriter, c caller) {
	if c.anonymous {
		hubError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return
	}
	role := "read"
	if c.token.Write {
		role = "write"
	}
	orgs := []map[string]any{}
	for _, o := range c.token.Orgs {
		orgs = append(orgs, map[string]any{"type": "org", "name": o, "roleInOrg": "write"})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "user", "id": fmt.Sprintf("%024x", len(c.token.User)), "name": c.token.User, "fullname": c.token.User,
		"orgs": orgs, "auth": map[string]any{"type": "access_token", "accessToken": map[string]any{"displayName": c.token.Name, "role": role}},
	})
}

// mayWrite checks the caller holds a write token for the repo's namespace.
func (s *Server) mayWrite(w http.ResponseWriter, c caller, repoID string) bool {
	switch {
	case c.anonymous:
		hubError(w, http.StatusUnauthorized, "", "Invalid username or password.")
	case !c.token.Write:
		hubError(w, http.StatusForbidden, "", "You have read access but not the required permissions for this operation.")
	case !c.owns(repoID):
		hubError(w, http.StatusForbidden, "", "You don't have the rights to write to "+repoID)
	default:
		return true
	}
	return false
}

// writable finds a repo the caller may write to.
func (s *Server) writable(w http.ResponseWriter, c caller, repoID string) (*repo, bool) {
	r, ok := s.readable(w, c, repoID)
	if !ok || !s.mayWrite(w, c, repoID) {
		return nil, false
	}
	return r, true
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(v); err != nil {
		hubError(w, http.StatusBadRequest, "", "Invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// serveCreateRepo is create_repo: {name, organization, type, private |
// visibility}. A new repo gets one commit holding .gitattributes.
func (s *Server) serveCreateRepo(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		Name         string  `json:"name"`
		Organization *string `json:"organization"`
		Type         string  `json:"type"`
		Private      *bool   `json:"private"`
		Visibility   string  `json:"visibility"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	ns := c.token.User
	if req.Organization != nil && *req.Organization != "" {
		ns = *req.Organization
	}
	id := ns + "/" + req.Name
	switch {
	case req.Type != "" && req.Type != "model":
		hubError(w, http.StatusBadRequest, "", "this Hub holds model repos only")
		return
	case !repoNameRE.MatchString(req.Name) || strings.Contains(req.Name, "--") || strings.Contains(req.Name, "..") || strings.HasSuffix(req.Name, ".git"):
		hubError(w, http.StatusBadRequest, "", "Invalid repo name: "+strconv.Quote(req.Name))
		return
	case !s.mayWrite(w, c, id):
		return
	}
	private := req.Visibility == "private"
	if req.Private != nil {
		private = *req.Private
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.repos[id]; exists {
		hubError(w, http.StatusConflict, "", "You already created this model repo")
		return
	}
	rp := s.repoLocked(id)
	rp.private = private
	init := s.newCommitLocked(rp, "", "initial commit", map[string]File{".gitattributes": {Path: ".gitattributes", Data: []byte(defaultGitattributes)}})
	rp.refs["main"] = init.id
	writeJSON(w, http.StatusOK, map[string]any{"url": s.URL + "/" + id, "name": id, "id": fmt.Sprintf("%024x", len(s.repos))})
}

// serveSettings is update_repo_settings: {"private": bool} or
// {"visibility": "private"|"public"}.
func (s *Server) serveSettings(w http.ResponseWriter, r *http.Request, c caller, repoID string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	var req struct {
		Private    *bool  `json:"private"`
		Visibility string `json:"visibility"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	switch {
	case req.Private != nil:
		rp.private = *req.Private
	case req.Visibility == "private" || req.Visibility == "public":
		rp.private = req.Visibility == "private"
	}
	private := rp.private
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"private": private})
}

// serveCreateBranch is create_branch: {"startingPoint": rev} optional.
func (s *Server) serveCreateBranch(w http.ResponseWriter, r *http.Request, c caller, repoID, branch string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	var req struct {
		StartingPoint string `json:"startingPoint"`
	}
	if r.ContentLength != 0 && !decodeBody(w, r, &req) {
		return
	}
	if branch == "" || strings.HasPrefix(branch, "refs/") || strings.ContainsAny(branch, " ~^:?*[\\") || strings.Contains(branch, "..") {
		hubError(w, http.StatusBadRequest, "", "Invalid reference for a branch: "+branch)
		return
	}
	from := req.StartingPoint
	if from == "" {
		from = "main"
	}
	start, ok := s.lookup(w, rp, from)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := rp.refs[branch]; exists {
		hubError(w, http.StatusConflict, "", "Reference already exists")
		return
	}
	rp.refs[branch] = start.id
	writeJSON(w, http.StatusOK, map[string]any{})
}

// lfsTracked reports whether .gitattributes sends path to LFS (the
// "pattern filter=lfs" lines, with git's rule that a pattern without a
// slash matches the base name).
func lfsTracked(gitattributes []byte, p string) bool {
	sc := bufio.NewScanner(bytes.NewReader(gitattributes))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || !slices.Contains(fields[1:], "filter=lfs") {
			continue
		}
		pat := fields[0]
		name := p
		if !strings.Contains(strings.TrimSuffix(pat, "/**/*"), "/") {
			name = path.Base(p)
		}
		if strings.HasSuffix(pat, "/**/*") {
			if strings.HasPrefix(p, strings.TrimSuffix(pat, "**/*")) {
				return true
			}
			continue
		}
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// looksBinary is git's heuristic: a NUL byte in the first 8000 bytes.
func looksBinary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 }

// servePreupload answers _fetch_upload_modes: per file, uploadMode "lfs"
// when .gitattributes tracks it, it is 10 MiB or more, or its sample is
// binary; shouldIgnore; and oid, the current content's oid (sha256 for LFS,
// git sha1 otherwise) when the path exists at rev.
func (s *Server) servePreupload(w http.ResponseWriter, r *http.Request, c caller, repoID, rev string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	cm, ok := s.lookup(w, rp, rev)
	if !ok {
		return
	}
	var req struct {
		Files []struct {
			Path   string `json:"path"`
			Sample string `json:"sample"`
			Size   *int64 `json:"size"`
		} `json:"files"`
		GitIgnore string `json:"gitIgnore"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	attrs := cm.files[".gitattributes"].Data
	out := []map[string]any{}
	for i, f := range req.Files {
		sample, err := base64.StdEncoding.DecodeString(f.Sample)
		if f.Path == "" || f.Size == nil || err != nil || len(sample) > 512 {
			hubError(w, http.StatusBadRequest, "", fmt.Sprintf("files[%d]: path, size and a base64 sample of at most 512 bytes are required", i))
			return
		}
		mode := "regular"
		if lfsTracked(attrs, f.Path) || *f.Size >= maxRegularFile || looksBinary(sample) {
			mode = "lfs"
		}
		e := map[string]any{"path": f.Path, "uploadMode": mode, "shouldIgnore": false}
		if cur, ok := cm.files[f.Path]; ok {
			if cur.LFS {
				e["oid"] = SHA256(cur.Data)
			} else {
				e["oid"] = GitBlobID(cur.Data)
			}
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": out, "commitOid": cm.id})
}

// serveLFS routes /{repo}.git/info/lfs/objects/…
func (s *Server) serveLFS(w http.ResponseWriter, r *http.Request, c caller, repoID string, rest []string) {
	switch {
	case r.Method == http.MethodPost && len(rest) == 1 && rest[0] == "batch":
		s.serveBatch(w, r, c, repoID)
	case r.Method == http.MethodPost && len(rest) == 1 && rest[0] == "verify":
		s.serveVerify(w, r, c, repoID)
	case r.Method == http.MethodPost && len(rest) == 2 && rest[0] == "complete":
		s.serveComplete(w, r, c, repoID, rest[1])
	default:
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
	}
}

// serveBatch is the git-lfs batch API as the Hub runs it (lfs.py
// post_lfs_batch_info): objects the repo holds come back without actions;
// the others get an upload action (a storage PUT, or a multipart header with
// chunk_size and numbered part URLs) and a verify action.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, c caller, repoID string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	var req struct {
		Operation string   `json:"operation"`
		Transfers []string `json:"transfers"`
		HashAlgo  string   `json:"hash_algo"`
		Objects   []struct {
			OID  string `json:"oid"`
			Size *int64 `json:"size"`
		} `json:"objects"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Operation != "upload" || (req.HashAlgo != "" && req.HashAlgo != "sha256") {
		hubError(w, http.StatusBadRequest, "", "only sha256 upload batches are supported")
		return
	}
	s.mu.Lock()
	chunk := s.multipartChunk
	s.mu.Unlock()
	multipart := chunk > 0 && slices.Contains(req.Transfers, "multipart")
	objects := []map[string]any{}
	for _, o := range req.Objects {
		if !sha256Hex.MatchString(o.OID) || o.Size == nil || *o.Size < 0 {
			size := int64(0)
			if o.Size != nil {
				size = *o.Size
			}
			objects = append(objects, map[string]any{"oid": o.OID, "size": size, "error": map[string]any{"code": 422, "message": "invalid oid or size"}})
			continue
		}
		s.mu.Lock()
		data, have := rp.lfs[o.OID]
		s.mu.Unlock()
		obj := map[string]any{"oid": o.OID, "size": *o.Size, "authenticated": true}
		if have && int64(len(data)) == *o.Size {
			objects = append(objects, obj)
			continue
		}
		upload := map[string]any{"href": s.Storage.URL + "/upload/" + url.PathEscape(repoID) + "/" + o.OID}
		if multipart && *o.Size > chunk {
			header := map[string]any{"chunk_size": strconv.FormatInt(chunk, 10)}
			for n := int64(1); (n-1)*chunk < *o.Size; n++ {
				header[strconv.FormatInt(n, 10)] = fmt.Sprintf("%s/upload/%s/%s?part=%d", s.Storage.URL, url.PathEscape(repoID), o.OID, n)
			}
			upload = map[string]any{"href": fmt.Sprintf("%s/%s.git/info/lfs/objects/complete/%s", s.URL, repoID, o.OID), "header": header}
		}
		obj["actions"] = map[string]any{
			"upload": upload,
			"verify": map[string]any{"href": fmt.Sprintf("%s/%s.git/info/lfs/objects/verify", s.URL, repoID)},
		}
		objects = append(objects, obj)
	}
	transfer := "basic"
	if multipart {
		transfer = "multipart"
	}
	w.Header().Set("Content-Type", "application/vnd.git-lfs+json")
	writeJSON(w, http.StatusOK, map[string]any{"transfer": transfer, "objects": objects})
}

// serveUpload is storage accepting an object (basic) or one part of it
// (?part=N, answered with the part's ETag header).
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request, repoID, oid string) {
	s.mu.Lock()
	stallFrom := s.stallUploadsFrom
	stored := 0
	rp := s.repos[repoID]
	if rp != nil {
		stored = len(rp.pending) + len(rp.lfs)
	}
	s.mu.Unlock()
	if rp == nil {
		http.Error(w, "NoSuchBucket", http.StatusNotFound)
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if stallFrom > 0 && stored >= stallFrom {
		// The body is read (so the server notices the client leaving);
		// the answer never comes and nothing is stored.
		s.stall(r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if part := r.URL.Query().Get("part"); part != "" {
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 {
			http.Error(w, "InvalidPart", http.StatusBadRequest)
			return
		}
		if rp.parts[oid] == nil {
			rp.parts[oid] = map[int][]byte{}
		}
		rp.parts[oid][n] = data
		w.Header().Set("ETag", `"`+SHA256(data)[:32]+`"`)
		w.WriteHeader(http.StatusOK)
		return
	}
	rp.pending[oid] = data
	w.WriteHeader(http.StatusOK)
}

// serveComplete assembles a multipart upload from the parts the client lists
// with the ETags storage gave them.
func (s *Server) serveComplete(w http.ResponseWriter, r *http.Request, c caller, repoID, oid string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	var req struct {
		OID   string `json:"oid"`
		Parts []struct {
			PartNumber int    `json:"partNumber"`
			ETag       string `json:"etag"`
		} `json:"parts"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := rp.parts[oid]
	var whole []byte
	for i, p := range req.Parts {
		data, ok := parts[p.PartNumber]
		if req.OID != oid || p.PartNumber != i+1 || !ok || strings.Trim(p.ETag, `"`) != SHA256(data)[:32] {
			hubError(w, http.StatusBadRequest, "", fmt.Sprintf("part %d of %s is missing or its etag is wrong", p.PartNumber, oid))
			return
		}
		whole = append(whole, data...)
	}
	delete(rp.parts, oid)
	rp.pending[oid] = whole
	writeJSON(w, http.StatusOK, map[string]any{})
}

// serveVerify checks an uploaded object hashes to its oid and has its size;
// only then may a commit point at it.
func (s *Server) serveVerify(w http.ResponseWriter, r *http.Request, c caller, repoID string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	var req struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := rp.pending[req.OID]
	if !ok {
		if d, have := rp.lfs[req.OID]; have && int64(len(d)) == req.Size {
			writeJSON(w, http.StatusOK, map[string]any{})
			return
		}
		hubError(w, http.StatusNotFound, "", "Object "+req.OID+" was not uploaded")
		return
	}
	delete(rp.pending, req.OID)
	if got := SHA256(data); got != req.OID || int64(len(data)) != req.Size {
		hubError(w, http.StatusUnprocessableEntity, "", fmt.Sprintf("Object %s does not match: sha256 %s, %d bytes", req.OID, got, len(data)))
		return
	}
	rp.lfs[req.OID] = data
	writeJSON(w, http.StatusOK, map[string]any{})
}

// serveCommit applies an NDJSON commit (_commit_api.py _prepare_commit_payload):
// a header line {summary, description, parentCommit?}, then file (base64
// content), lfsFile (an object the repo holds), deletedFile and deletedFolder
// lines. It refuses a stale parentCommit, an LFS object the repo lacks, and
// files the Hub keeps out of git.
func (s *Server) serveCommit(w http.ResponseWriter, r *http.Request, c caller, repoID, rev string) {
	rp, ok := s.writable(w, c, repoID)
	if !ok {
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-ndjson") {
		hubError(w, http.StatusBadRequest, "", "Content-Type must be application/x-ndjson")
		return
	}
	head, ok := s.lookup(w, rp, rev)
	if !ok {
		return
	}
	s.mu.Lock()
	_, isBranch := rp.refs[rev]
	s.mu.Unlock()
	if !isBranch {
		hubError(w, http.StatusBadRequest, "", "Invalid rev id: "+rev+" is not a branch")
		return
	}
	type line struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	files := map[string]File{}
	for p, f := range head.files {
		files[p] = f
	}
	var header struct {
		Summary      string `json:"summary"`
		Description  string `json:"description"`
		ParentCommit string `json:"parentCommit"`
	}
	var newLFS []string
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 0; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			hubError(w, http.StatusBadRequest, "", fmt.Sprintf("line %d: %v", n+1, err))
			return
		}
		if n == 0 && l.Key != "header" {
			hubError(w, http.StatusBadRequest, "", "the first line must be the header")
			return
		}
		var v struct {
			Path, Content, Encoding, Algo, OID string
			Size                               *int64
		}
		if l.Key != "header" {
			if err := json.Unmarshal(l.Value, &v); err != nil || v.Path == "" || strings.HasPrefix(v.Path, "/") || strings.Contains("/"+v.Path+"/", "/../") || strings.HasPrefix(v.Path, ".git/") {
				hubError(w, http.StatusBadRequest, "", fmt.Sprintf("line %d: invalid %s operation", n+1, l.Key))
				return
			}
		}
		switch l.Key {
		case "header":
			if err := json.Unmarshal(l.Value, &header); err != nil || header.Summary == "" {
				hubError(w, http.StatusBadRequest, "", "the header needs a summary")
				return
			}
			if header.ParentCommit != "" && header.ParentCommit != head.id {
				hubError(w, http.StatusPreconditionFailed, "", "A commit has happened since. Please refresh and try again.")
				return
			}
		case "file":
			var data []byte
			var err error
			switch v.Encoding {
			case "base64":
				data, err = base64.StdEncoding.DecodeString(v.Content)
			case "", "utf-8":
				data = []byte(v.Content)
			default:
				err = fmt.Errorf("unknown encoding %q", v.Encoding)
			}
			switch {
			case err != nil:
				hubError(w, http.StatusBadRequest, "", fmt.Sprintf("%s: %v", v.Path, err))
				return
			case len(data) > maxRegularFile:
				hubError(w, http.StatusBadRequest, "", fmt.Sprintf("Your push was rejected because it contains files larger than 10 MiB (%s). Please use https://git-lfs.github.com/ to store large files.", v.Path))
				return
			case looksBinary(data):
				hubError(w, http.StatusBadRequest, "", fmt.Sprintf("Your push was rejected because it contains binary files (%s). Please use https://huggingface.co/docs/hub/xet to store binary files.", v.Path))
				return
			}
			files[v.Path] = File{Path: v.Path, Data: data}
		case "lfsFile":
			s.mu.Lock()
			data, have := rp.lfs[v.OID]
			s.mu.Unlock()
			if v.Algo != "sha256" || !have || (v.Size != nil && *v.Size != int64(len(data))) {
				hubError(w, http.StatusBadRequest, "", fmt.Sprintf("Your push was rejected because an LFS pointer pointed to a file that does not exist (%s -> %s)", v.Path, v.OID))
				return
			}
			files[v.Path] = File{Path: v.Path, Data: data, LFS: true}
			newLFS = append(newLFS, v.Path)
		case "deletedFile":
			if _, ok := files[v.Path]; !ok {
				hubError(w, http.StatusNotFound, "EntryNotFound", "A file with this name doesn't exist: "+v.Path)
				return
			}
			delete(files, v.Path)
		case "deletedFolder":
			prefix := strings.TrimSuffix(v.Path, "/") + "/"
			for p := range files {
				if strings.HasPrefix(p, prefix) {
					delete(files, p)
				}
			}
		default:
			hubError(w, http.StatusBadRequest, "", fmt.Sprintf("line %d: unknown key %q", n+1, l.Key))
			return
		}
	}
	if err := sc.Err(); err != nil {
		hubError(w, http.StatusBadRequest, "", "read the commit: "+err.Error())
		return
	}
	// The commit endpoint tracks LFS files .gitattributes does not cover.
	attrs := files[".gitattributes"].Data
	var extra []string
	sort.Strings(newLFS)
	for _, p := range newLFS {
		if !lfsTracked(attrs, p) {
			extra = append(extra, strings.ReplaceAll(p, " ", "[[:space:]]")+" filter=lfs diff=lfs merge=lfs -text\n")
		}
	}
	if len(extra) > 0 {
		files[".gitattributes"] = File{Path: ".gitattributes", Data: append(append([]byte(nil), attrs...), strings.Join(extra, "")...)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := rp.refs[rev]; cur != head.id || (header.ParentCommit != "" && header.ParentCommit != cur) {
		hubError(w, http.StatusPreconditionFailed, "", "A commit has happened since. Please refresh and try again.")
		return
	}
	title := header.Summary
	cm := s.newCommitLocked(rp, head.id, title, files)
	rp.refs[rev] = cm.id
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true, "commitOid": cm.id, "commitUrl": fmt.Sprintf("%s/%s/commit/%s", s.URL, repoID, cm.id), "hookOutput": "",
	})
}
