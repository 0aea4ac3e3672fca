package hubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The shape tests hold hubtest's answers to the recorded Hub answers in
// testdata/recorded (see its README for where each comes from): the same
// key names with the same JSON types, no key the Hub does not send, and the
// same headers. A drift on either side of the client fails here.

func readRecorded(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recorded", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// shape maps every key path of a JSON value ("siblings[].lfs.sha256") to its
// JSON type; array elements share one path.
func shape(v any, prefix string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = jsonType(e)
			shape(e, p, out)
		}
	case []any:
		for _, e := range x {
			shape(e, prefix+"[]", out)
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// compareShape fails on a key hubtest sends that the Hub does not, a type
// that differs, or a key the recorded answer has under one of the prefixes
// that hubtest leaves out.
func compareShape(t *testing.T, what string, recorded, got any, required []string) {
	t.Helper()
	want, have := map[string]string{}, map[string]string{}
	shape(recorded, "", want)
	shape(got, "", have)
	var keys []string
	for k := range have {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		wt, ok := want[k]
		// gated is false on public repos, a string ("auto"/"manual") on gated ones.
		if !ok {
			t.Errorf("%s: hubtest sends %q, which the recorded Hub answer does not have", what, k)
		} else if wt != have[k] && k != "gated" {
			t.Errorf("%s: %q is a JSON %s in hubtest, a %s in the recorded Hub answer", what, k, have[k], wt)
		}
	}
	for _, k := range required {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: the recorded answer lacks %q: the test data is wrong", what, k)
		}
		if _, ok := have[k]; !ok {
			t.Errorf("%s: hubtest does not send %q", what, k)
		}
	}
}

// hubShapeFixture is a repo with what the recorded answers show: a git file,
// an LFS file, and (for folders) a file under a subfolder.
func hubShapeFixture(t *testing.T) (*Server, string) {
	t.Helper()
	s := New()
	t.Cleanup(s.Close)
	commit := s.AddCommit("google-bert/bert-base-uncased", "main", []File{
		{Path: ".gitattributes", Data: []byte(defaultGitattributes)},
		{Path: "config.json", Data: []byte(`{"model_type": "bert"}`)},
		{Path: "tf_model.h5", Data: []byte("weights"), LFS: true},
		{Path: "README.md", Data: []byte("---\nlicense: apache-2.0\ntags:\n- generated_from_trainer\n---\n# bert\n")},
	})
	return s, commit
}

func getJSON(t *testing.T, url string, v any) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

func TestModelInfoMatchesRecordedShape(t *testing.T) {
	s, commit := hubShapeFixture(t)
	var recorded, got any
	readRecorded(t, "model-info-blobs.json", &recorded)
	getJSON(t, s.URL+"/api/models/google-bert/bert-base-uncased/revision/main?blobs=true", &got)
	compareShape(t, "model info", recorded, got, []string{
		"sha", "id", "private", "tags", "siblings", "siblings[].rfilename", "siblings[].size", "siblings[].blobId",
		"siblings[].lfs", "siblings[].lfs.sha256", "siblings[].lfs.size", "siblings[].lfs.pointerSize",
	})
	if got.(map[string]any)["sha"] != commit {
		t.Errorf("sha = %v, want %s", got.(map[string]any)["sha"], commit)
	}
	// Without blobs=true the Hub lists file names only.
	getJSON(t, s.URL+"/api/models/google-bert/bert-base-uncased/revision/"+commit, &got)
	for _, sb := range got.(map[string]any)["siblings"].([]any) {
		if keys := len(sb.(map[string]any)); keys != 1 {
			t.Errorf("sibling without blobs=true has %d keys, want rfilename only: %v", keys, sb)
		}
	}
}

func TestTreeMatchesRecordedShape(t *testing.T) {
	s, commit := hubShapeFixture(t)
	for _, tc := range []struct{ recorded, query string }{
		{"tree-bert-base-uncased.json", "recursive=true&expand=false"},
		{"tree-expand-bert-base-uncased.json", "recursive=true&expand=true"},
	} {
		var recorded, got any
		readRecorded(t, tc.recorded, &recorded)
		getJSON(t, s.URL+"/api/models/google-bert/bert-base-uncased/tree/"+commit+"?"+tc.query, &got)
		compareShape(t, tc.recorded, recorded, got, []string{"[].type", "[].oid", "[].size", "[].path", "[].lfs.oid", "[].lfs.size", "[].lfs.pointerSize"})
	}
}

// headerShape is how a header value looks: quoted hex of a length, a
// number, a URL.
func headerShape(v string) string {
	switch {
	case regexp.MustCompile(`^"[0-9a-f]{40}"$`).MatchString(v):
		return "quoted sha1"
	case regexp.MustCompile(`^"[0-9a-f]{64}"$`).MatchString(v):
		return "quoted sha256"
	case regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(v):
		return "sha1"
	case regexp.MustCompile(`^[0-9]+$`).MatchString(v):
		return "number"
	case strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://"):
		return "absolute URL"
	}
	return "text"
}

func TestResolveHeadersMatchRecorded(t *testing.T) {
	s, commit := hubShapeFixture(t)
	var recorded map[string]struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
	}
	readRecorded(t, "resolve-headers.json", &recorded)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := map[string]struct {
		method, path, token string
		anonymous           bool
	}{
		"lfs":                {http.MethodHead, "/google-bert/bert-base-uncased/resolve/" + commit + "/tf_model.h5", "", true},
		"regular":            {http.MethodHead, "/google-bert/bert-base-uncased/resolve/" + commit + "/config.json", "", true},
		"entry-not-found":    {http.MethodHead, "/google-bert/bert-base-uncased/resolve/main/missing_file", "", true},
		"revision-not-found": {http.MethodGet, "/api/models/google-bert/bert-base-uncased/revision/no-such-branch", "", true},
		"repo-not-found":     {http.MethodGet, "/api/models/username/reponame", "", true},
		"invalid-token":      {http.MethodGet, "/api/models/username/reponame", "Bearer not-a-token", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec, ok := recorded[name]
			if !ok {
				t.Fatalf("no recorded answer %q", name)
			}
			req, _ := http.NewRequest(tc.method, s.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", tc.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != rec.Status {
				t.Errorf("status %d, the Hub answers %d", resp.StatusCode, rec.Status)
			}
			for h, v := range rec.Headers {
				got := resp.Header.Get(h)
				switch {
				case got == "":
					t.Errorf("hubtest sends no %s (the Hub sends %q)", h, v)
				case h == "X-Error-Code" || h == "X-Error-Message" && name != "entry-not-found":
					if got != v {
						t.Errorf("%s = %q, the Hub sends %q", h, got, v)
					}
				case h != "X-Request-Id" && h != "X-Error-Message" && headerShape(got) != headerShape(v):
					t.Errorf("%s = %q (%s), the Hub sends %q (%s)", h, got, headerShape(got), v, headerShape(v))
				}
			}
			for _, h := range []string{"X-Linked-Etag", "X-Linked-Size", "Location", "X-Error-Code"} {
				if _, recordedHas := rec.Headers[h]; !recordedHas && resp.Header.Get(h) != "" {
					t.Errorf("hubtest sends %s here; the Hub does not", h)
				}
			}
		})
	}
}
