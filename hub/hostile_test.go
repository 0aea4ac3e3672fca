package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
)

// A hostile Hub: it speaks huggingface_hub's wire (docs/hub-wire.md: the
// revision info, the tree API with Link pagination, HEAD resolve with
// X-Repo-Commit / X-Linked-Etag / X-Linked-Size / Location, and the content
// GET), but every answer can lie. Unlike hubtest (the happy path), each
// handler here is the scenario's own. A second server on another port of
// the same host stands for somewhere the token must never go.

const (
	hostileRepo  = "org/x"
	hostileToken = "hf_hostile_secret_token"
)

type hostileHub struct {
	endpoint *httptest.Server
	other    *httptest.Server // another port of 127.0.0.1
	commit   string
	data     []byte // the one file, weights.bin

	// Each nil handler gives the honest answer.
	revision, tree, head, content, otherContent http.HandlerFunc

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	server, method, path, auth string
}

func newHostileHub(t *testing.T, tls bool) *hostileHub {
	t.Helper()
	h := &hostileHub{commit: strings.Repeat("a", 40), data: []byte("sixteen bytes!!\n")}
	mux := http.NewServeMux()
	pick := func(f *http.HandlerFunc, honest http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if *f != nil {
				(*f)(w, r)
				return
			}
			honest(w, r)
		}
	}
	mux.HandleFunc("GET /api/models/"+hostileRepo+"/revision/{rev...}", pick(&h.revision, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"_id": "x", "id": %q, "sha": %q}`, hostileRepo, h.commit)
	}))
	mux.HandleFunc("GET /api/models/"+hostileRepo+"/tree/{rev...}", pick(&h.tree, func(w http.ResponseWriter, r *http.Request) {
		h.writeTree(w, "weights.bin", int64(len(h.data)))
	}))
	mux.HandleFunc("HEAD /"+hostileRepo+"/resolve/{rest...}", pick(&h.head, func(w http.ResponseWriter, r *http.Request) {
		h.writeHead(w, int64(len(h.data)), h.endpoint.URL+"/content/weights.bin")
	}))
	mux.HandleFunc("GET /content/{path...}", pick(&h.content, func(w http.ResponseWriter, r *http.Request) {
		w.Write(h.data)
	}))
	otherMux := http.NewServeMux()
	otherMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if h.otherContent != nil {
			h.otherContent(w, r)
			return
		}
		http.NotFound(w, r)
	})
	if tls {
		h.endpoint = httptest.NewTLSServer(h.record("endpoint", mux))
	} else {
		h.endpoint = httptest.NewServer(h.record("endpoint", mux))
	}
	h.other = httptest.NewServer(h.record("other", otherMux))
	t.Cleanup(h.endpoint.Close)
	t.Cleanup(h.other.Close)
	return h
}

func (h *hostileHub) record(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, seenRequest{name, r.Method, r.URL.Path, r.Header.Get("Authorization")})
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *hostileHub) sha() string { return hubtest.SHA256(h.data) }

// writeTree lists one LFS file, as the tree API does with expand=false.
func (h *hostileHub) writeTree(w io.Writer, path string, size int64) {
	fmt.Fprintf(w, `[{"type": "file", "oid": %q, "size": %d, "path": %q, "lfs": {"oid": %q, "size": %d, "pointerSize": 134}}]`,
		hubtest.GitBlobID([]byte("pointer")), size, path, h.sha(), size)
}

// writeHead answers HEAD resolve for an LFS file: a redirect to location.
func (h *hostileHub) writeHead(w http.ResponseWriter, size int64, location string) {
	w.Header().Set("X-Repo-Commit", h.commit)
	w.Header().Set("X-Linked-Etag", `"`+h.sha()+`"`)
	w.Header().Set("X-Linked-Size", strconv.FormatInt(size, 10))
	w.Header().Set("Location", location)
	w.WriteHeader(http.StatusFound)
}

// client talks to the hostile endpoint with a token, its cache under
// root/hf (HF_HOME), and trusts the endpoint's TLS certificate.
func (h *hostileHub) client(t *testing.T, root string) *Client {
	t.Helper()
	home := filepath.Join(root, "hf")
	c := NewClient(Config{Endpoint: h.endpoint.URL, Token: hostileToken, HFHome: home, CacheDir: filepath.Join(home, "hub")},
		WithBackoff(1, time.Millisecond, time.Millisecond), WithIdleTimeout(2*time.Second))
	if h.endpoint.TLS != nil {
		tr := c.http.Transport.(*http.Transport)
		tr.TLSClientConfig = h.endpoint.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	return c
}

// checkTokenOnlyAtEndpoint fails when any request to the other server
// carried credentials.
func (h *hostileHub) checkTokenOnlyAtEndpoint(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.seen {
		if r.server != "endpoint" && r.auth != "" {
			t.Errorf("%s %s on the other server carried Authorization %q", r.method, r.path, r.auth)
		}
	}
}

func (h *hostileHub) requests(server string) []seenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []seenRequest
	for _, r := range h.seen {
		if r.server == server {
			out = append(out, r)
		}
	}
	return out
}

// checkOnlyUnder fails when anything but root/hf (HF_HOME) was created in
// root.
func checkOnlyUnder(t *testing.T, root string) {
	t.Helper()
	home := filepath.Join(root, "hf")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root || p == home || strings.HasPrefix(p, home+string(filepath.Separator)) {
			return nil
		}
		t.Errorf("written outside HF_HOME: %s", p)
		return nil
	})
}

// allocated runs f and returns the bytes it allocated (the server's
// handlers included): a bound on its memory that does not depend on timing.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// endless writes a byte pattern until the client goes away. It stops
// at 256 MiB all the same, so a client that fails to stop fails the test
// instead of filling the disk.
func endless(w http.ResponseWriter, _ *http.Request) {
	buf := bytes.Repeat([]byte{'x'}, 32<<10)
	for sent := 0; sent < 256<<20; sent += len(buf) {
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
}

func TestHostileHub(t *testing.T) {
	// json.Decoder's doubling buffer allocates about four times the answer it
	// holds; the scenarios offer endless or 256 MiB answers.
	const memCap = 5 * MaxJSONBytes
	cases := []struct {
		name     string
		tls      bool
		revision string
		setup    func(h *hostileHub)
		want     string // the error; "" for a download that must succeed
	}{
		{
			name:  "endless body",
			setup: func(h *hostileHub) { h.content = endless },
			want:  "download weights.bin of org/x: the server sent more than the listed 16 bytes (at least 65552); the bad download was removed",
		},
		{
			name: "body longer than listed",
			setup: func(h *hostileHub) {
				h.content = func(w http.ResponseWriter, r *http.Request) {
					w.Write(h.data)
					w.(http.Flusher).Flush() // chunked: no Content-Length to give it away
					w.Write([]byte("more"))
				}
			},
			want: "download weights.bin of org/x: the server sent 20 bytes for a file the Hub lists at 16 bytes; the bad download was removed",
		},
		{
			name: "Content-Length larger than listed",
			setup: func(h *hostileHub) {
				h.content = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Length", strconv.Itoa(1<<40))
					w.Write(h.data)
				}
			},
			want: "download weights.bin of org/x: the server announced 1099511627776 bytes (Content-Length) for a file the Hub lists at 16 bytes; the bad download was removed",
		},
		{
			name: "body shorter than listed",
			setup: func(h *hostileHub) {
				h.content = func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Range") == "" {
						w.Write(h.data[:10])
						return
					}
					w.WriteHeader(http.StatusPartialContent) // lies: no Content-Range
				}
			},
			want: "asked for bytes from 10, the server sent from -1",
		},
		{
			name: "resolve size differs from the tree",
			setup: func(h *hostileHub) {
				h.head = func(w http.ResponseWriter, r *http.Request) {
					h.writeHead(w, 99, h.endpoint.URL+"/content/weights.bin")
				}
			},
			want: "weights.bin of org/x: resolve says 99 bytes, the tree API 16",
		},
		{
			name: "etag with ../",
			setup: func(h *hostileHub) {
				h.head = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Repo-Commit", h.commit)
					w.Header().Set("X-Linked-Etag", "../../../../outside")
					w.Header().Set("X-Linked-Size", "16")
					w.Header().Set("Location", h.endpoint.URL+"/content/weights.bin")
					w.WriteHeader(http.StatusFound)
				}
			},
			want: "weights.bin of org/x: resolve names the blob ../../../../outside, the tree API " + hubtest.SHA256([]byte("sixteen bytes!!\n")),
		},
		{
			name: "endless pages",
			setup: func(h *hostileHub) {
				h.tree = func(w http.ResponseWriter, r *http.Request) {
					n, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
					w.Header().Set("Link", fmt.Sprintf(`<%s%s?recursive=true&expand=false&cursor=%d>; rel="next"`, h.endpoint.URL, r.URL.Path, n+1))
					io.WriteString(w, `[{"type": "directory", "oid": "x", "path": "d`+strconv.Itoa(n)+`"}]`)
				}
			},
			want: "list org/x@" + strings.Repeat("a", 40) + ": the tree API kept paginating past 1000 pages (at most 1000 are followed)",
		},
		{
			name: "huge listing",
			setup: func(h *hostileHub) {
				h.tree = func(w http.ResponseWriter, r *http.Request) {
					io.WriteString(w, "[")
					for i := 0; i <= MaxTreeEntries; i++ {
						fmt.Fprintf(w, `{"type": "directory", "oid": "x", "path": "d%d"},`, i)
					}
					io.WriteString(w, `{"type": "directory", "path": "last"}]`)
				}
			},
			want: "list org/x@" + strings.Repeat("a", 40) + ": the listing has more than 100000 entries (the most one listing may have)",
		},
		{
			name: "huge JSON answer",
			setup: func(h *hostileHub) {
				h.tree = func(w http.ResponseWriter, r *http.Request) {
					io.WriteString(w, `[{"type": "file", "path": "`)
					buf := bytes.Repeat([]byte{'p'}, 1<<20)
					for i := 0; i < 256; i++ {
						if _, err := w.Write(buf); err != nil {
							return
						}
					}
					io.WriteString(w, `"}]`)
				}
			},
			want: "unusable answer: (body): answer too large: larger than the 32.0 MiB one JSON answer may have",
		},
		{
			name: "../ in a file path",
			setup: func(h *hostileHub) {
				h.tree = func(w http.ResponseWriter, r *http.Request) { h.writeTree(w, "../../../outside/escape.bin", 16) }
			},
			want: `[0].path: not a relative path inside the repo (file "../../../outside/escape.bin")`,
		},
		{
			name:     "../ in the revision",
			revision: "../../../outside/victim",
			want:     `org/x: revision "../../../outside/victim": ".." is not allowed`,
		},
		{
			name: "revision answer redirected to another port",
			setup: func(h *hostileHub) {
				h.revision = func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, h.other.URL+r.URL.Path, http.StatusTemporaryRedirect)
				}
				h.otherContent = func(w http.ResponseWriter, r *http.Request) {
					fmt.Fprintf(w, `{"sha": %q}`, h.commit)
				}
			},
		},
		{
			name: "content redirected to another port",
			setup: func(h *hostileHub) {
				h.content = func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, h.other.URL+r.URL.Path, http.StatusFound)
				}
				h.otherContent = func(w http.ResponseWriter, r *http.Request) { w.Write(h.data) }
			},
		},
		{
			name: "https endpoint redirecting to http",
			tls:  true,
			setup: func(h *hostileHub) {
				h.content = func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, h.other.URL+r.URL.Path, http.StatusFound)
				}
				h.otherContent = func(w http.ResponseWriter, r *http.Request) { w.Write(h.data) }
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostileHub(t, tc.tls)
			if tc.setup != nil {
				tc.setup(h)
			}
			root := t.TempDir()
			c := h.client(t, root)
			req := Request{Repo: hostileRepo, Revision: tc.revision, Allow: []string{"*.bin"}}
			var snap *Snapshot
			var err error
			mem := allocated(func() { snap, err = c.Download(context.Background(), req, io.Discard) })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want the download to succeed", err)
			case tc.want == "":
				got, rerr := os.ReadFile(filepath.Join(snap.Dir, "weights.bin"))
				if rerr != nil || !bytes.Equal(got, h.data) {
					t.Errorf("weights.bin = %q, %v", got, rerr)
				}
				if len(h.requests("other")) == 0 {
					t.Error("the redirect was not followed to the other server")
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("err = %v\nwant it to contain %s", err, tc.want)
			}
			if mem > memCap {
				t.Errorf("the download allocated %d MiB, more than the %d MiB cap", mem>>20, memCap>>20)
			}
			for _, r := range h.requests("endpoint") {
				if r.auth != "Bearer "+hostileToken {
					t.Errorf("%s %s on the endpoint carried Authorization %q, want the token", r.method, r.path, r.auth)
				}
			}
			h.checkTokenOnlyAtEndpoint(t)
			checkOnlyUnder(t, root)
			// Nothing bigger than the listed size ever reached the disk.
			filepath.WalkDir(filepath.Join(root, "hf"), func(p string, d fs.DirEntry, err error) error {
				if fi, ierr := os.Lstat(p); err == nil && ierr == nil && fi.Mode().IsRegular() && strings.Contains(p, "blobs") && fi.Size() > int64(len(h.data)) {
					t.Errorf("%s holds %d bytes, more than the listed %d", p, fi.Size(), len(h.data))
				}
				return nil
			})
			if strings.Contains(tc.want, "bad download was removed") {
				if left, _ := filepath.Glob(filepath.Join(root, "hf", "hub", "models--org--x", "blobs", "*")); len(left) > 0 {
					t.Errorf("the bad download is still there: %v", left)
				}
			}
		})
	}
}

// A ref is a file name and a file's content: a revision with ../ never
// leaves refs/, and a ref file that does not hold a commit (offline, a
// planted refs/main) is an error, never a commit to look up.
func TestRefsStayInsideTheCache(t *testing.T) {
	root := t.TempDir()
	c := Cache{Dir: filepath.Join(root, "hf", "hub")}
	commit := strings.Repeat("b", 40)
	for _, rev := range []string{"../../../../outside", "/etc/passwd", "main\n", "a/../../b"} {
		if err := c.WriteRef(hostileRepo, rev, commit); err == nil || !strings.Contains(err.Error(), "revision") {
			t.Errorf("WriteRef(%q) = %v, want it refused", rev, err)
		}
		if got, err := c.ReadRef(hostileRepo, rev); err == nil {
			t.Errorf("ReadRef(%q) = %q, nil; want it refused", rev, got)
		}
	}
	checkOnlyUnder(t, root)

	refs := filepath.Join(c.RepoDir(hostileRepo), "refs")
	if err := os.MkdirAll(refs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(refs, "main"), []byte("../../../../etc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadRef(hostileRepo, "main"); err == nil || !strings.Contains(err.Error(), "does not hold a 40-hex commit id") {
		t.Errorf("ReadRef of a planted refs/main = %q, %v; want it refused", got, err)
	}
	cl := NewClient(Config{Endpoint: "http://127.0.0.1:1", CacheDir: c.Dir, Offline: true})
	if _, err := cl.Download(context.Background(), Request{Repo: hostileRepo}, io.Discard); err == nil || !strings.Contains(err.Error(), "does not hold a 40-hex commit id") {
		t.Errorf("offline pull through a planted ref: %v, want it refused", err)
	}
	if err := c.WriteRef(hostileRepo, "refs/pr/1", commit); err != nil {
		t.Fatalf("a Hub pull-request ref: %v", err)
	}
	if got, err := c.ReadRef(hostileRepo, "refs/pr/1"); err != nil || got != commit {
		t.Errorf("ReadRef(refs/pr/1) = %q, %v", got, err)
	}
}

// A password in HF_ENDPOINT still authenticates to the endpoint but never
// shows in an error or a log line.
func TestEndpointPasswordRedacted(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable) // logged, then retried
			return
		}
		w.Header().Set("X-Error-Code", CodeRepoNotFound)
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	withPassword := strings.Replace(srv.URL, "http://", "http://hfuser:s3cret-pw@", 1)
	cfg, err := ConfigFromEnv(func(k string) string {
		return map[string]string{"HF_ENDPOINT": withPassword + "/", "HF_HOME": t.TempDir()}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoint != srv.URL {
		t.Errorf("Endpoint = %q, want %q (no userinfo)", cfg.Endpoint, srv.URL)
	}

	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	c := NewClient(cfg, WithBackoff(1, time.Millisecond, time.Millisecond))
	_, err = c.Download(context.Background(), Request{Repo: hostileRepo}, io.Discard)
	var httpErr *HTTPError
	if !errors.As(err, &httpErr) || !httpErr.NotFound() {
		t.Fatalf("err = %v, want the Hub's RepoNotFound", err)
	}
	// A Config built by hand with the password in Endpoint is split too.
	_, err2 := NewClient(Config{Endpoint: withPassword, CacheDir: t.TempDir()}, WithBackoff(0, 0, 0)).
		Download(context.Background(), Request{Repo: hostileRepo}, io.Discard)
	for what, text := range map[string]string{"error": err.Error(), "hand-built error": fmt.Sprint(err2), "log": logs.String()} {
		if strings.Contains(text, "s3cret-pw") || strings.Contains(text, "hfuser") {
			t.Errorf("the %s shows the endpoint's userinfo: %s", what, text)
		}
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("no retry logged (the log check saw nothing): %q", logs.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := "Basic " + "aGZ1c2VyOnMzY3JldC1wdw==" // hfuser:s3cret-pw
	for _, a := range auths {
		if a != want {
			t.Errorf("the endpoint got Authorization %q, want the Basic credentials of HF_ENDPOINT", a)
		}
	}

	_, err = ConfigFromEnv(func(k string) string {
		return map[string]string{"HF_ENDPOINT": "http://hfuser:s3cret-pw@host:notaport", "HF_HOME": t.TempDir()}[k]
	})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "HF_ENDPOINT") {
		t.Errorf("a malformed HF_ENDPOINT: err = %v, want HF_ENDPOINT named and the password not shown", err)
	}
}

// A saved file list is only trusted while every name in it could have come
// from a validated Hub listing: its paths and blob ids become paths.
func TestCraftedSavedListingIgnored(t *testing.T) {
	root := t.TempDir()
	c := Cache{Dir: filepath.Join(root, "hf", "hub")}
	commit := strings.Repeat("c", 40)
	good := RepoFile{Path: "a.bin", Size: 1, BlobID: strings.Repeat("1", 40), LFS: &LFSInfo{SHA256: strings.Repeat("2", 64), Size: 1}}
	for name, f := range map[string]RepoFile{
		"path":       {Path: "../../../outside", Size: 1, BlobID: good.BlobID},
		"blob id":    {Path: "a.bin", Size: 1, BlobID: "../../../../outside"},
		"lfs sha256": {Path: "a.bin", Size: 1, BlobID: good.BlobID, LFS: &LFSInfo{SHA256: "../../../../outside", Size: 1}},
	} {
		if err := c.writeListing(hostileRepo, commit, []RepoFile{good, f}); err != nil {
			t.Fatal(err)
		}
		if files, err := c.readListing(hostileRepo, commit); err != nil || files != nil {
			t.Errorf("a saved list with a crafted %s was used: %v, %v", name, files, err)
		}
	}
	if err := c.writeListing(hostileRepo, commit, []RepoFile{good}); err != nil {
		t.Fatal(err)
	}
	if files, err := c.readListing(hostileRepo, commit); err != nil || len(files) != 1 {
		t.Errorf("the honest list: %v, %v", files, err)
	}
	checkOnlyUnder(t, root)
}
