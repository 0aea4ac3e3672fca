// Package scripts holds the tests of the shell scripts the tests and demos run.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The debootstrap scripts take this machine's Debian mirror: deb822 stanzas before one-line
// sources, the first that serves the suite's main component, TT_DEBIAN_MIRROR above both, and a
// clear error naming the variable when nothing serves the suite.
func TestDebianMirror(t *testing.T) {
	for _, c := range []struct {
		name, dir, suite, override, want, wantErr string
	}{
		{name: "deb822", dir: "deb822", suite: "bookworm", want: "http://mirror.example/debian"},
		{name: "deb822 other suite", dir: "deb822", suite: "bookworm-security", want: "http://security.example/debian-security"},
		{name: "one-line with options", dir: "oneline", suite: "bookworm", want: "http://proxy.example:3142/debian"},
		{name: "deb822 first", dir: "both", suite: "bookworm", want: "http://from-deb822.example/debian"},
		{name: "override", dir: "deb822", suite: "bookworm", override: "http://override.example/debian", want: "http://override.example/debian"},
		{name: "nothing serves the suite", dir: "none", suite: "bookworm", wantErr: "set TT_DEBIAN_MIRROR"},
		{name: "no sources at all", dir: "missing", suite: "bookworm", wantErr: "set TT_DEBIAN_MIRROR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("bash", "debian-mirror.sh", c.suite)
			cmd.Env = append(os.Environ(), "APT_SOURCES_DIR="+filepath.Join("testdata", "apt", c.dir), "TT_DEBIAN_MIRROR="+c.override)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			got := strings.TrimSpace(string(out))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(stderr.String(), c.wantErr) {
					t.Fatalf("got %q, %v (stderr %q), want a failure saying %q", got, err, stderr.String(), c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v (stderr %q), want %q", got, err, stderr.String(), c.want)
			}
		})
	}
}
