package hubtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// do sends a request as acme's write token and returns status, headers and
// the decoded JSON body.
func do(t *testing.T, method, url, contentType string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Authorization", "Bearer w")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

func writeHub(t *testing.T) *Server {
	t.Helper()
	s := New()
	t.Cleanup(s.Close)
	s.AddToken("w", Token{User: "acme", Write: true})
	if code, _, body := do(t, "POST", s.URL+"/api/repos/create", "application/json", map[string]any{"name": "m", "organization": "acme", "private": true}); code != 200 {
		t.Fatalf("create: %d %v", code, body)
	}
	return s
}

func ndjson(lines ...map[string]any) string {
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func header(parent string) map[string]any {
	v := map[string]any{"summary": "s", "description": ""}
	if parent != "" {
		v["parentCommit"] = parent
	}
	return map[string]any{"key": "header", "value": v}
}

func TestCreateRepoRefusals(t *testing.T) {
	s := writeHub(t)
	cases := []struct {
		body map[string]any
		code int
	}{
		{map[string]any{"name": "m", "organization": "acme"}, http.StatusConflict},
		{map[string]any{"name": "bad name", "organization": "acme"}, http.StatusBadRequest},
		{map[string]any{"name": "a--b", "organization": "acme"}, http.StatusBadRequest},
		{map[string]any{"name": "x", "organization": "someone-else"}, http.StatusForbidden},
	}
	for _, tc := range cases {
		if code, _, body := do(t, "POST", s.URL+"/api/repos/create", "application/json", tc.body); code != tc.code {
			t.Errorf("%v: %d %v, want %d", tc.body, code, body, tc.code)
		}
	}
	if !s.Private("acme/m") || s.Commits("acme/m") != 1 || s.Files("acme/m", "")[0].Path != ".gitattributes" {
		t.Error("a new repo is private with one commit holding .gitattributes")
	}
}

func TestPreuploadModes(t *testing.T) {
	s := writeHub(t)
	files := []map[string]any{
		{"path": "code/main.go", "sample": base64.StdEncoding.EncodeToString([]byte("package main")), "size": 12},
		{"path": "model.safetensors", "sample": base64.StdEncoding.EncodeToString([]byte("{}")), "size": 2},
		{"path": "blob", "sample": base64.StdEncoding.EncodeToString([]byte{1, 0, 2}), "size": 3},
		{"path": "big.txt", "sample": base64.StdEncoding.EncodeToString([]byte("abc")), "size": 11 << 20},
	}
	code, _, body := do(t, "POST", s.URL+"/api/models/acme/m/preupload/main", "application/json", map[string]any{"files": files})
	if code != 200 {
		t.Fatalf("preupload: %d %v", code, body)
	}
	want := map[string]string{"code/main.go": "regular", "model.safetensors": "lfs", "blob": "lfs", "big.txt": "lfs"}
	for _, f := range body["files"].([]any) {
		m := f.(map[string]any)
		if m["uploadMode"] != want[m["path"].(string)] || m["shouldIgnore"] != false {
			t.Errorf("%v: want uploadMode %s", m, want[m["path"].(string)])
		}
	}
}

func TestCommitRefusals(t *testing.T) {
	s := writeHub(t)
	head := s.Head("acme/m", "main")
	commitURL := s.URL + "/api/models/acme/m/commit/main"
	file := func(path string, data []byte) map[string]any {
		return map[string]any{"key": "file", "value": map[string]any{"path": path, "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"}}
	}
	cases := []struct {
		name, body, contentType string
		code                    int
		msg                     string
	}{
		{"not ndjson", ndjson(header("")), "application/json", 400, "x-ndjson"},
		{"stale parent", ndjson(header(strings.Repeat("1", 40)), file("a.txt", []byte("a"))), "application/x-ndjson", 412, "A commit has happened since"},
		{"missing LFS object", ndjson(header(""), map[string]any{"key": "lfsFile", "value": map[string]any{"path": "w.bin", "algo": "sha256", "oid": strings.Repeat("a", 64), "size": 3}}), "application/x-ndjson", 400, "does not exist"},
		{"binary file in git", ndjson(header(""), file("b.bin", []byte{0, 1, 2})), "application/x-ndjson", 400, "binary files"},
		{"large file in git", ndjson(header(""), file("big.txt", bytes.Repeat([]byte("x"), 10<<20+1))), "application/x-ndjson", 400, "larger than 10 MiB"},
		{"delete a missing file", ndjson(header(""), map[string]any{"key": "deletedFile", "value": map[string]any{"path": "nope"}}), "application/x-ndjson", 404, "doesn't exist"},
		{"path escaping", ndjson(header(""), file("../x", []byte("a"))), "application/x-ndjson", 400, "invalid file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, h, _ := do(t, "POST", commitURL, tc.contentType, tc.body)
			if code != tc.code || !strings.Contains(h.Get("X-Error-Message"), tc.msg) {
				t.Errorf("%d %q, want %d %q", code, h.Get("X-Error-Message"), tc.code, tc.msg)
			}
		})
	}
	if s.Head("acme/m", "main") != head {
		t.Error("a refused commit moved the branch")
	}
}

// An object whose bytes do not hash to its oid fails verify and cannot be
// committed.
func TestVerifyRefusesBadSHA256(t *testing.T) {
	s := writeHub(t)
	data := []byte("the real object")
	oid := SHA256(data)
	code, _, batch := do(t, "POST", s.URL+"/acme/m.git/info/lfs/objects/batch", "application/vnd.git-lfs+json",
		map[string]any{"operation": "upload", "transfers": []string{"basic"}, "hash_algo": "sha256", "objects": []map[string]any{{"oid": oid, "size": len(data)}}})
	if code != 200 {
		t.Fatalf("batch: %d %v", code, batch)
	}
	actions := batch["objects"].([]any)[0].(map[string]any)["actions"].(map[string]any)
	put, _ := http.NewRequest("PUT", actions["upload"].(map[string]any)["href"].(string), strings.NewReader("other bytes, same size"))
	resp, err := http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, h, _ := do(t, "POST", actions["verify"].(map[string]any)["href"].(string), "application/json", map[string]any{"oid": oid, "size": len(data)})
	if code != http.StatusUnprocessableEntity || !strings.Contains(h.Get("X-Error-Message"), "does not match") {
		t.Errorf("verify of wrong bytes: %d %q", code, h.Get("X-Error-Message"))
	}
	code, h, _ = do(t, "POST", s.URL+"/api/models/acme/m/commit/main", "application/x-ndjson",
		ndjson(header(""), map[string]any{"key": "lfsFile", "value": map[string]any{"path": "w.bin", "algo": "sha256", "oid": oid, "size": len(data)}}))
	if code != 400 {
		t.Errorf("commit of an unverified object: %d %q", code, h.Get("X-Error-Message"))
	}
}

func TestVisibilityAndCardTags(t *testing.T) {
	s := writeHub(t)
	readme := []byte("---\nlicense: apache-2.0\ntags:\n- tt-model\n- tt-model-catalog\n---\n# m\n")
	code, h, _ := do(t, "POST", s.URL+"/api/models/acme/m/commit/main", "application/x-ndjson",
		ndjson(header(""), map[string]any{"key": "file", "value": map[string]any{"path": "README.md", "content": base64.StdEncoding.EncodeToString(readme), "encoding": "base64"}}))
	if code != 200 {
		t.Fatalf("commit: %d %s", code, h.Get("X-Error-Message"))
	}
	// Private: anonymous callers get 401 RepoNotFound.
	resp, err := http.Get(s.URL + "/api/models/acme/m")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("X-Error-Code") != "RepoNotFound" {
		t.Errorf("anonymous read of a private repo: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
	if code, _, _ := do(t, "PUT", s.URL+"/api/models/acme/m/settings", "application/json", map[string]any{"private": false}); code != 200 {
		t.Fatalf("settings: %d", code)
	}
	var info map[string]any
	getJSON(t, s.URL+"/api/models/acme/m", &info)
	tags := strings.Join(toStrings(info["tags"]), ",")
	if !strings.Contains(tags, "tt-model-catalog") || !strings.Contains(tags, "license:apache-2.0") || info["private"] != false {
		t.Errorf("public repo info: tags %s private %v", tags, info["private"])
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
