package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The builder's own tests package real images; these check what the three
// commands add: flags, exit codes and where output goes.
func TestPackageCommandExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no --container", []string{"package"}, 2, "--container FILE is required"},
		{"invalid manifest", []string{"package", "--container", "testdata/package/invalid.yaml", "--out", t.TempDir()}, 2, "mesh_device"},
		{"unreadable manifest", []string{"package", "--container", "testdata/package/no-such.yaml"}, 1, "no-such.yaml"},
		{"python kind without a base", []string{"package", "--container", "testdata/package/dit.yaml", "--out", t.TempDir()}, 1,
			"kind tt-dit-server needs a base image with bash and Python"},
		{"push of a non-package", []string{"push", t.TempDir(), "--registry", "127.0.0.1:1/tt"}, 1, "is not a staged package"},
		{"card of a non-package", []string{"card", t.TempDir()}, 1, "tt_kernel_manifest.json"},
		{"card --html without --out", []string{"card", "--html", "../builder/card/testdata/wire/demo.json"}, 2, "--out SITE/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}

func TestCardCommand(t *testing.T) {
	code, stdout, stderr := run(t, "card", "../builder/card/testdata/wire/demo.json")
	if code != 0 || !strings.Contains(stdout, "\n# demo\n") || !strings.Contains(stderr, "warning: card.performance is missing") {
		t.Errorf("card: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = run(t, "card", "../builder/card/testdata/wire/demo.json", "../builder/card/testdata/wire/pi05.json")
	if code != 0 || !strings.Contains(stdout, "# tt-model catalog") || !strings.Contains(stdout, "\n## pi05-demo\n") {
		t.Errorf("catalog: exit %d\n%s", code, stdout)
	}
}

// card --html writes the site; a package that cannot be rendered writes
// nothing, so the previous site stays whole.
func TestCardHTMLCommand(t *testing.T) {
	site := filepath.Join(t.TempDir(), "site")
	code, stdout, stderr := run(t, "card", "--html", "../builder/card/testdata/wire/demo.json", "../builder/card/testdata/wire/pi05.json", "--out", site)
	if code != 0 || !strings.Contains(stdout, "index.html: 2 packages") || !strings.Contains(stderr, "warning: demo: card.performance is missing") {
		t.Fatalf("card --html: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"index.html", "demo.html", "pi05-demo.html", "style.css"} {
		if _, err := os.Stat(filepath.Join(site, f)); err != nil {
			t.Errorf("the site lacks %s: %v", f, err)
		}
	}
	index, _ := os.ReadFile(filepath.Join(site, "index.html"))
	// Two packages of one name would be one page: refused, the site untouched.
	code, _, stderr = run(t, "card", "--html", "../builder/card/testdata/wire/pi05.json", "../builder/card/testdata/wire/pi05.json", "--out", site)
	if code != 1 || !strings.Contains(stderr, "would both be pi05-demo.html") {
		t.Errorf("two packages of one name: exit %d, stderr %q", code, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(site, "index.html")); string(again) != string(index) {
		t.Error("a failed render changed the site")
	}
}
