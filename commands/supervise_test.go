package commands

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/manifest"
)

// TestSuperviseDefaultEnv: --default-env KEY=VALUE reaches the server
// unless the supervisor's own environment sets KEY (`docker run -e` over an
// image's default profile); a --manifest profile's env wins over both; the
// supervisor's hang settings read the server's environment so composed.
func TestSuperviseDefaultEnv(t *testing.T) {
	wire := pi05Wire(t, nil)
	t.Setenv("TT_SET_BY_USER", "mine")
	// Absent, not empty (t.Setenv restores it at the end): a default applies
	// to what the environment does not set.
	t.Setenv("PI05_HANG_MARKER", "")
	if err := os.Unsetenv("PI05_HANG_MARKER"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string // checked keys of cfg.Env ("" = absent)
		marker string
		err    string
	}{
		{"defaults the environment lacks", []string{"--default-env", "A=1", "--default-env", "B=x=y", "--", "server"},
			map[string]string{"A": "1", "B": "x=y"}, "", ""},
		{"the environment wins", []string{"--default-env", "TT_SET_BY_USER=image", "--", "server"},
			map[string]string{"TT_SET_BY_USER": ""}, "", ""},
		{"the manifest's profile wins", []string{"--manifest", wire, "--profile", "single-robot", "--default-env", "PI05_LAYOUT=dp", "--default-env", "EXTRA=1"},
			map[string]string{"PI05_LAYOUT": "sp", "EXTRA": "1", "PI05_SLO_MS": ""}, "/cache/pi05_hang_marker", ""},
		{"the hang marker of a default", []string{"--default-env", "PI05_HANG_MARKER=/d/marker", "--", "server"},
			map[string]string{"PI05_HANG_MARKER": "/d/marker"}, "/d/marker", ""},
		{"not KEY=VALUE", []string{"--default-env", "NOVALUE", "--", "server"}, nil, "", `--default-env "NOVALUE": want KEY=VALUE`},
		{"no key", []string{"--default-env", "=1", "--", "server"}, nil, "", `--default-env "=1": want KEY=VALUE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f superviseFlags
			fs := pflag.NewFlagSet("supervise", pflag.ContinueOnError)
			f.bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.config(fs, fs.Args())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.env {
				if got, ok := cfg.Env[k]; got != want || ok != (want != "") {
					t.Errorf("env %s = %q (set %v), want %q; env %v", k, got, ok, want, cfg.Env)
				}
			}
			if tc.marker != "" && cfg.HangMarker != tc.marker {
				t.Errorf("hang marker %q, want %q", cfg.HangMarker, tc.marker)
			}
		})
	}
}

// `service install` writes every --default-env into ExecStart, each as its
// own flag.
func TestServiceInstallKeepsDefaultEnv(t *testing.T) {
	code, out, stderr := run(t, "service", "install", "--print", "--default-env", "A=1", "--default-env", "B=two words", "--", "sh", "-c", "exit 0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sh, _ := exec.LookPath("sh")
	if !strings.Contains(out, ` supervise --default-env A=1 --default-env "B=two words" `) || !strings.Contains(out, sh) {
		t.Errorf("ExecStart lacks the two --default-env flags:\n%s", out)
	}
}

// pi05Wire writes the tt_kernel_manifest.json `package` publishes for
// models/pi05/tt-model.yaml, changed by edit when given, and returns its path.
func pi05Wire(t *testing.T, edit func(*manifest.Wire)) string {
	t.Helper()
	m, err := manifest.Load("../models/pi05/tt-model.yaml", manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := m.ToWire(manifest.WireInfo{ImageTag: "test", ToolVersion: version.Version})
	if edit != nil {
		edit(w)
	}
	path := filepath.Join(t.TempDir(), manifest.WireFile)
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}
