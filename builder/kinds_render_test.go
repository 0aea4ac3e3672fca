package builder

import (
	"flag"
	"github.com/ttmodel/tt-model/internal/testing/textcheck"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/manifest"
)

var update = flag.Bool("update", false, "rewrite the build context goldens under testdata/")

// TestKindContextGoldens renders the build context of upstream's example
// manifests (testdata/kinds/upstream: container-example.yaml as published,
// laguna, muse-glimmer and ornith transcribed from schema 1, and the
// http-server and tt-dit-server examples of its comments) and compares every
// generated file with its golden (go test ./builder -run Golden -update).
// Refs are pinned as staging would resolve them: git ls-remote cannot reach
// GitHub from the test.
func TestKindContextGoldens(t *testing.T) {
	for _, tc := range []struct {
		file  string
		pins  map[string]string // runtime key -> resolved sha
		torch string            // tt-metal's torch pin, read from a local tree
		ctx   bool              // ctx/ holds install inputs
	}{
		{"container-example.yaml", map[string]string{"plugin": "5a5ee1c9d1a0cb2b3b1c2a9a4f8a0d7e3e1f2a3b"}, "2.7.1", true},
		{"laguna-xs-2.1.yaml", map[string]string{"plugin": "9f3c2b1a0e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"}, "2.7.1", false},
		{"muse-glimmer-30b.yaml", map[string]string{"plugin": "106744c01de96825ed8c81226f4fa043e8e929f4"}, "", false},
		{"ornith-1.0-35b.yaml", map[string]string{"vllm": "bf98d556"}, "", false},
		{"http-server-example.yaml", nil, "", false},
		{"tt-dit-flux2.yaml", nil, "2.7.1", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := manifest.Load(filepath.Join("testdata", "kinds", "upstream", tc.file), manifest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := deepCopy(m.Runtime)
			if err != nil {
				t.Fatal(err)
			}
			for key, sha := range tc.pins {
				rt[key].(map[string]any)["sha"] = sha
			}
			labels := imageLabels(m, stagedCode{}, `{"stand-in": "the resolved manifest"}`, "1970-01-01T00:00:00Z", "")
			c, err := renderKind(kind.Input{M: m, Runtime: rt, TorchPin: tc.torch},
				renderMeta{ToolVersion: "0.0.0-golden", From: "tt-metal-base:golden", Labels: labels, CtxInputs: tc.ctx})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("kinds", "upstream", strings.TrimSuffix(tc.file, ".yaml"))
			if err := os.MkdirAll(filepath.Join("testdata", dir), 0o755); err != nil {
				t.Fatal(err)
			}
			var names []string
			for name := range c.Files {
				names = append(names, name)
				textcheck.Golden(t, filepath.Join("testdata", dir, name), c.Files[name], *update, "go test ./builder -run Golden -update")
			}
			sort.Strings(names)
			existing, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
			if len(existing) != len(names) {
				t.Errorf("%s holds %d goldens, the context %d files (%v)", dir, len(existing), len(names), names)
			}
			servesAsLaunched(t, m, c)
		})
	}
}

// servesAsLaunched checks every serve-<profile>.sh against manifest's launch
// rules, the one source of argv and env: it exports Launch.Env in EnvOrder
// and execs Launch.Argv.
func servesAsLaunched(t *testing.T, m *manifest.Manifest, c *kindContext) {
	t.Helper()
	for _, p := range m.Profiles() {
		rp, err := m.ResolveProfile(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		l, err := manifest.LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, rp)
		if err != nil {
			t.Fatal(err)
		}
		script := string(c.Files["serve-"+rp.Name+".sh"])
		var exports []string
		for _, line := range strings.Split(script, "\n") {
			if strings.HasPrefix(line, "export ") {
				exports = append(exports, line)
			}
		}
		var want []string
		for _, k := range l.EnvOrder {
			want = append(want, "export "+k+"="+kind.ShQuote(l.Env[k]))
		}
		if strings.Join(exports, "\n") != strings.Join(want, "\n") {
			t.Errorf("serve-%s.sh exports\n%s\nwant\n%s", rp.Name, strings.Join(exports, "\n"), strings.Join(want, "\n"))
		}
		if !strings.Contains(script, "\nexec "+kind.ShJoin(l.Argv)+"\n") {
			t.Errorf("serve-%s.sh does not exec %q:\n%s", rp.Name, l.Argv, script)
		}
	}
}
