package builder

import (
	"archive/tar"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/builder/oci"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "tt-model --version", want: []string{"tt-model", "--version"}},
		{in: "  a   'b c'  \"d e\"  f\\ g ", want: []string{"a", "b c", "d e", "f g"}},
		{in: `x --flag=value "q\"uote"`, want: []string{"x", "--flag=value", `q"uote`}},
		{in: "a''b", want: []string{"ab"}},
		{in: "", want: nil},
		{in: "a | b", err: "needs a shell"},
		{in: "a && b", err: "needs a shell"},
		{in: "echo $HOME", err: "needs a shell"},
		{in: `echo "$HOME"`, err: "needs a shell"},
		{in: "ls *.so", err: "needs a shell"},
		{in: "~/x", err: "needs a shell"},
		{in: "'open", err: "unterminated"},
		{in: `"open`, err: "unterminated"},
	} {
		got, err := splitWords(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitWords(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestVerifySteps(t *testing.T) {
	scratch := oci.NewTree()
	for _, d := range []string{"/usr", "/usr/local", "/usr/local/bin"} {
		scratch.Record(d, tar.TypeDir, "")
	}
	scratch.Record("/usr/local/bin/tt-model", tar.TypeReg, "")
	steps, err := verifySteps([]string{"tt-model --version"}, scratch, defaultPATH)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{ImageServerPath, "--verify"}, {"/usr/local/bin/tt-model", "--version"}}
	if len(steps) != 2 || !reflect.DeepEqual([][]string{steps[0].Argv, steps[1].Argv}, want) {
		t.Errorf("steps %+v, want %q", steps, want)
	}
	if _, err := verifySteps([]string{"python3 -c 1"}, scratch, defaultPATH); err == nil || !strings.Contains(err.Error(), "python3 is not on the image's PATH") {
		t.Errorf("missing command: %v", err)
	}
	// A usrmerge base: /bin is a symlink to usr/bin, which holds sh.
	withShell := oci.NewTree()
	withShell.Record("/usr", tar.TypeDir, "")
	withShell.Record("/usr/bin", tar.TypeDir, "")
	withShell.Record("/usr/bin/sh", tar.TypeReg, "")
	withShell.Record("/bin", tar.TypeSymlink, "usr/bin")
	steps, err = verifySteps([]string{"tt-model --version | grep 1"}, withShell, defaultPATH)
	if err != nil || !reflect.DeepEqual(steps[1].Argv, []string{"/bin/sh", "-ceu", "tt-model --version | grep 1"}) {
		t.Errorf("with a shell: %+v, %v", steps, err)
	}
}

func TestFSTreeResolve(t *testing.T) {
	tree := oci.NewTree()
	tree.Record("/usr", tar.TypeDir, "")
	tree.Record("/usr/lib", tar.TypeDir, "")
	tree.Record("/usr/lib/x86_64-linux-gnu", tar.TypeDir, "")
	tree.Record("/lib", tar.TypeSymlink, "usr/lib")
	tree.Record("/lib64", tar.TypeSymlink, "/usr/lib/x86_64-linux-gnu")
	tree.Record("/loop", tar.TypeSymlink, "loop")
	// Written through the symlink, recorded where it lands.
	tree.Record("/lib/x86_64-linux-gnu/libc.so.6", tar.TypeReg, "")
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", true},
		{"/lib64/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", true},
		{"/lib/../lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", true},
		{"/lib/nope", "", false},
		{"/loop/x", "", false},
	} {
		got, _, ok := tree.Resolve(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("resolve(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if !tree.IsDir("/lib") || !tree.IsFile("/usr/lib/x86_64-linux-gnu/libc.so.6") || tree.IsFile("/lib") {
		t.Error("isDir/isFile do not follow the links")
	}

	// The same tree unpacked on disk resolves the same way through oci.ResolveIn
	// (one resolver, fslink.Follow, behind both), except that a missing
	// component is kept: it names a path about to be created.
	root := t.TempDir()
	for _, d := range []string{"usr/lib/x86_64-linux-gnu"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"lib": "usr/lib", "lib64": "/usr/lib/x86_64-linux-gnu", "loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"},
		{"/lib64/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		{"/lib/nope", "/usr/lib/nope"},
	} {
		got, err := oci.ResolveIn(root, tc.in)
		if want := filepath.Join(root, tc.want); got != want || err != nil {
			t.Errorf("oci.ResolveIn(%q) = %q, %v; want %q", tc.in, got, err, want)
		}
	}
	if _, err := oci.ResolveIn(root, "/loop/x"); err == nil {
		t.Error("oci.ResolveIn(/loop/x): want an error for a symlink loop")
	}
}
