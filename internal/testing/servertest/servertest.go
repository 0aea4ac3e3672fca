// Package servertest is what tests need to talk to a server they started on
// this machine: a free port to start it on (or a server's Run on one), GET and
// POST requests whose failure to get an answer fails the test, the lines of
// its /metrics or log text that mention a name, a client that stalls, and a
// docker-registry started for the test to push to.
package servertest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Get GETs url and returns the status code and the whole body; a request
// that gets no answer fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// GetJSON GETs url and returns the status code and the body decoded as a
// JSON object; the object is nil when the body is not one (an error page),
// so the caller's check on the status or a field says what went wrong.
func GetJSON(t testing.TB, url string) (int, map[string]any) {
	t.Helper()
	code, body := Get(t, url)
	var out map[string]any
	_ = json.Unmarshal([]byte(body), &out)
	return code, out
}

// GrepLines returns the lines of text that contain sub, leaving out # lines
// (a Prometheus text's HELP and TYPE): what a failed check of a log or of
// /metrics prints.
func GrepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
