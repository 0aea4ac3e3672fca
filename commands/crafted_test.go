package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/manifest"
)

// A package whose published name climbs out of ~/.cache/tt-model is refused
// wherever a wire manifest is loaded: pull, info, serve (from the store and
// from a folder), weights pull; and rm, which finds no such package, leaves
// the folders the name points at alone.
func TestCraftedPackageNameRefused(t *testing.T) {
	srv := hubEnv(t)
	const crafted = "../../victim"
	dir := stagedWithCode(t, "crafted", 0)
	wire := filepath.Join(dir, manifest.WireFile)
	b, err := os.ReadFile(wire)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"name": "crafted"`, `"name": "`+crafted+`"`, 1)
	if edited == string(b) {
		t.Fatalf("no name field in %s", wire)
	}
	if err := os.WriteFile(wire, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := hubtest.FilesOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv.AddCommit("acme/crafted", "main", files)

	// What serve and rm would make or delete for that name.
	victim := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "tt-model", crafted)
	for _, sub := range []string{"cache", "weights"} {
		if err := os.MkdirAll(filepath.Join(victim, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(victim, sub, "keep"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const refused = `name: "../../victim" is not a safe slug`
	// pull downloads the repo, then refuses the package: what it leaves in
	// the store is what the other commands meet.
	if code, out, errOut := runCLI("pull", "acme/crafted"); code == 0 || !strings.Contains(errOut, refused) {
		t.Fatalf("pull: exit %d, stderr %q (stdout %q); want a failure mentioning %q", code, errOut, out, refused)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"info from the store", []string{"info", "acme/crafted"}, refused},
		{"serve from the store", []string{"serve", "acme/crafted", "--host", "--local-only"}, refused},
		{"serve a folder", []string{"serve", dir, "--host"}, refused},
		{"info of a folder", []string{"info", dir}, refused},
		{"weights pull", []string{"weights", "pull", dir}, refused},
		{"rm by repo", []string{"rm", "acme/crafted"}, "acme/crafted in the local store holds a package tt-model refuses to read, so rm removes nothing it names: "},
		{"rm by name", []string{"rm", crafted}, "no package ../../victim"},
		{"pull @../", []string{"pull", "acme/crafted@../../../x"}, `revision "../../../x": ".." is not allowed`},
		{"weights import @../", []string{"weights", "import", dir, "acme/w@../../x"}, `revision "../../x" is not a 40-hex commit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q (stdout %q); want a failure mentioning %q", code, errOut, out, tc.want)
			}
		})
	}
	for _, sub := range []string{"cache", "weights"} {
		if _, err := os.Stat(filepath.Join(victim, sub, "keep")); err != nil {
			t.Errorf("the folder the crafted name points at lost %s: %v", sub, err)
		}
	}
}
