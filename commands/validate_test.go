package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateExitCodes(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{[]string{"validate", "../models/pi05/tt-model.yaml"}, 0,
			[]string{"valid", "lerobot/pi05_base@b211f3d44c36b6acfcf7ae94a64e8e96f75a64ba", "multi-robot", "single-robot", "disaggregated", "(default)", "1x4"}, nil},
		{[]string{"validate", "../models/rf-detr/tt-model.yaml"}, 0, []string{"Roboflow/rf-detr-base@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a", "p150"}, nil},
		{[]string{"validate", "../manifest/testdata/bad/mesh-preset.yaml"}, 2, nil,
			[]string{`../manifest/testdata/bad/mesh-preset.yaml:19:5: serve_profiles[1].mesh_device: "P300x3" is not a mesh preset`}},
		{[]string{"validate", "../manifest/testdata/bad/aux-duplicate.yaml"}, 2, nil, []string{":17:5:", ":18:5:", "2 problem(s)"}},
		{[]string{"validate", "does/not/exist.yaml"}, 1, nil, []string{"does/not/exist.yaml"}},
		{[]string{"profiles", "../models/pi05/tt-model.yaml"}, 0,
			[]string{"multi-robot (default)", "single-robot", "disaggregated", "4 chips", "PI05_LAYOUT=sp", "PI05_LAYOUT=pd", "PI05_MAX_BATCH=4", "TT_MESH_SHAPE=1x4"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout misses %q:\n%s", s, out)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr misses %q:\n%s", s, errOut)
				}
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	code, out, _ := run(t, "validate", "--json", "../manifest/testdata/bad/types.yaml")
	if code != 2 {
		t.Fatalf("exit %d", code)
	}
	var res struct {
		Valid  bool
		Errors []struct {
			Line, Column int
			Path         string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Valid || len(res.Errors) != 3 || res.Errors[0].Path != "serve.port" || res.Errors[0].Line != 18 {
		t.Errorf("json result %+v", res)
	}
	code, out, _ = run(t, "profiles", "--json", "../models/pi05/tt-model.yaml")
	var profiles []profileSummary
	if code != 0 || json.Unmarshal([]byte(out), &profiles) != nil || len(profiles) != 3 {
		t.Fatalf("profiles --json: %d %s", code, out)
	}
	for _, p := range profiles {
		if p.Chips != 4 || p.MeshShape != "1x4" {
			t.Errorf("%s: %d chips, shape %s", p.Name, p.Chips, p.MeshShape)
		}
	}
}

// TestSourceLinksRefused: validate --check-sources and package refuse a
// source path that links out of its root, at the manifest's file:line:col,
// naming the link and its target; package writes nothing. validate without
// --check-sources does not look at the sources.
func TestSourceLinksRefused(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pkg", "app.py"), []byte("app = None\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "pkg", "passwd")); err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile("testdata/package/dit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(y), "tt_metal: testdata/package", "tt_metal: "+root, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	want := file + ":11:7: source.code[0]: symlink pkg/passwd -> /etc/passwd resolves to /etc/passwd, outside " + root
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"validate", []string{"validate", file}, 0, ""},
		{"validate --check-sources", []string{"validate", "--check-sources", file}, 2, want},
		{"package", []string{"package", "--container", file, "--out", out}, 2, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("package left %d entries in --out", len(entries))
	}
}
