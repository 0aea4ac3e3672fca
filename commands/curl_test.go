package commands

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

// curl --print writes the sample body to a fresh private file: a link
// planted at the old predictable /tmp/tt-model-curl-<pkg>.json is never
// followed, and nobody else can read the body.
func TestCurlPrintUsesPrivateTempFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/info" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"task":"object-detection"}`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(tmp, "tt-model-curl-rf-detr.json")); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	inst := &runner.Instance{Name: "rf-detr-p150", Package: "rf-detr", Running: true, Port: p}
	if err := curlInstance(cmd, inst, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the planted link was followed: victim now holds %q", b)
	}
	_, file, ok := strings.Cut(out.String(), "-d @")
	if !ok {
		t.Fatalf("no -d @FILE in %q", out.String())
	}
	file = strings.TrimSpace(file)
	fi, err := os.Lstat(file)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || filepath.Dir(file) != tmp {
		t.Errorf("%s: mode %v in %s, want a regular 0600 file in %s", file, fi.Mode(), filepath.Dir(file), tmp)
	}
	if b, _ := os.ReadFile(file); !bytes.Contains(b, []byte(`"image"`)) {
		t.Errorf("%s does not hold the sample body: %.80q", file, b)
	}
}
