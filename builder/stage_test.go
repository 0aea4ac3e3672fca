package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/manifest"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSHA256TreeMatchesUpstream: the digest equals upstream's _sha256_tree
// (Python, sorted(Path.rglob("*"))) of the same tree: "a/b" sorts before
// "a.txt" because paths compare by component.
func TestSHA256TreeMatchesUpstream(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a/b": "B", "a.txt": "ATXT", "z": "Z\n"})
	got, err := sha256Tree(root)
	if err != nil {
		t.Fatal(err)
	}
	// python3: h.update(str(rel).encode()); h.update(bytes) over sorted(rglob("*"))
	const want = "019cb8e2360365b9fff0b0bf586beb8a125aef4fc32d5ee59ded4a932cddccd1"
	if got != want {
		t.Errorf("sha256Tree = %s, want %s", got, want)
	}
}

func TestIgnoredName(t *testing.T) {
	for name, want := range map[string]bool{
		"__pycache__": true, "x.pyc": true, ".pytest_cache": true, "pkg.egg-info": true, ".venv": true,
		"venv": true, "logs": true, "run.log": true, "model.safetensors": true, "w.pt": true, "w.pth": true,
		"w.ckpt": true, "w.bin": true, "ref.refpt": true,
		"readiness_check": false, "log.py": false, "binary.go": false, "bin": false, "model.py": false,
	} {
		if got := ignoredName(name); got != want {
			t.Errorf("ignoredName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestStageCodeFromLocalGitRepo: an extra_code {repo, ref} root that is a
// local repository is staged at the commit, not from its working tree.
func TestStageCodeFromLocalGitRepo(t *testing.T) {
	repo := t.TempDir()
	writeFiles(t, repo, map[string]string{"pkg/mod.py": "v1\n"})
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "v1"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	writeFiles(t, repo, map[string]string{"pkg/mod.py": "v2 (uncommitted)\n"})
	m := &manifest.Manifest{Kind: manifest.KindGoServer, Source: manifest.Source{
		ExtraCode: []manifest.ExtraCode{{Root: manifest.GitOrPath{Repo: repo, Ref: "HEAD"}, Paths: []string{"pkg"}}},
	}}
	dest := filepath.Join(t.TempDir(), "code")
	staged, err := stageCode(context.Background(), m, sourceRoots{workDir: t.TempDir(), scratch: t.TempDir()}, dest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest, "pkg", "mod.py"))
	if err != nil || string(b) != "v1\n" {
		t.Errorf("staged pkg/mod.py = %q, %v; want the committed v1", b, err)
	}
	if len(staged.Tree) != 1 || staged.Tree[0] != "pkg/" {
		t.Errorf("tree %v, want [pkg/]", staged.Tree)
	}

	m.Source.ExtraCode[0].Root = manifest.GitOrPath{Repo: "https://example.com/org/repo", Ref: "main"}
	_, err = stageCode(context.Background(), m, sourceRoots{workDir: t.TempDir(), scratch: t.TempDir()}, filepath.Join(t.TempDir(), "code"))
	if err == nil || !strings.Contains(err.Error(), "source.extra_code[0].root: {repo: https://example.com/org/repo, ref: main} is not a local git checkout") {
		t.Errorf("remote extra_code root: %v", err)
	}
}

// TestStageCodeRecordsRemoteTree: a tt-go-server package whose tt_metal is
// a remote {repo, ref} records the pin and stages no source.code from it.
func TestStageCodeRecordsRemoteTree(t *testing.T) {
	m := &manifest.Manifest{Kind: manifest.KindGoServer, Source: manifest.Source{
		TTMetal: manifest.GitOrPath{Repo: "https://github.com/tenstorrent/tt-metal", Ref: "8b98410e730"},
		Code:    []string{"models/common/lightweightmodule.py"},
	}}
	dest := filepath.Join(t.TempDir(), "code")
	staged, err := stageCode(context.Background(), m, sourceRoots{workDir: t.TempDir(), scratch: t.TempDir()}, dest)
	if err != nil {
		t.Fatal(err)
	}
	if !staged.RecordedOnly || staged.TTMetal.SHA == nil || *staged.TTMetal.SHA != "8b98410e730" ||
		staged.TTMetal.Remote == nil || *staged.TTMetal.Remote != "https://github.com/tenstorrent/tt-metal" {
		t.Errorf("staged %+v, want the remote tree recorded at 8b98410e730", staged)
	}
	if got := treePinLabel(m.Source.TTMetal, staged.TTMetal); got != "https://github.com/tenstorrent/tt-metal@8b98410e730" {
		t.Errorf("tt-metal label %q", got)
	}
}

func TestStageCodeRefusesEscapes(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"ok.py": "x"})
	m := &manifest.Manifest{Kind: manifest.KindGoServer, Source: manifest.Source{
		ExtraCode: []manifest.ExtraCode{{Root: manifest.GitOrPath{Path: root}, Paths: []string{"../etc"}}},
	}}
	_, err := stageCode(context.Background(), m, sourceRoots{workDir: root, scratch: t.TempDir()}, filepath.Join(t.TempDir(), "code"))
	if err == nil || !strings.Contains(err.Error(), "must be a relative path inside") {
		t.Errorf("../etc: %v", err)
	}
}

// TestStageCodeLinks: a symlink is never followed into a copy. One that
// resolves inside the root it is listed under is staged as a link (an
// absolute target rewritten relative to the link, since the package does
// not live where the root does); one that leaves the root (the allowlisted
// path itself, a link inside a copied directory, a directory on the way to
// the path), dangles or loops is refused naming the entry, the link and its
// target, and a link whose target no allowlist ships is refused too.
func TestStageCodeLinks(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.txt": "secret\n", "dir/f": "f"})
	for _, tc := range []struct {
		name  string
		paths []string
		links map[string]string // link -> target; ROOT, OUTSIDE and UP (../ to the file system's root) are replaced
		want  string            // what the error contains, "|"-separated; "" for success
	}{
		{"entry is a link to /etc/passwd", []string{"pkg", "passwd"}, map[string]string{"passwd": "/etc/passwd"},
			"source.extra_code[0].paths[1]: symlink passwd -> /etc/passwd resolves to /etc/passwd, outside "},
		{"link inside a copied directory", []string{"pkg"}, map[string]string{"pkg/shared": "OUTSIDE/dir"},
			"source.extra_code[0].paths[0]: symlink pkg/shared -> OUTSIDE/dir resolves to OUTSIDE/dir, outside "},
		{"relative link climbing out", []string{"pkg"}, map[string]string{"pkg/up.txt": "UPOUTSIDE/secret.txt"},
			"symlink pkg/up.txt -> ../../|/secret.txt resolves to OUTSIDE/secret.txt, outside "},
		{"directory on the way out", []string{"out/secret.txt"}, map[string]string{"out": "OUTSIDE"},
			"source.extra_code[0].paths[0]: symlink out -> OUTSIDE resolves to OUTSIDE, outside "},
		{"dangling", []string{"pkg"}, map[string]string{"pkg/gone.py": "no-such.py"},
			"symlink pkg/gone.py -> no-such.py dangles: "},
		{"loop", []string{"pkg"}, map[string]string{"pkg/a": "b", "pkg/b": "a"},
			"symlink pkg/a -> b: a symlink loop"},
		{"inside, target not shipped", []string{"pkg"}, map[string]string{"pkg/doc.md": "../docs/README.md"},
			"symlink pkg/doc.md -> ../docs/README.md points to docs/README.md, which no allowlist ships"},
		{"inside, kept as links", []string{"pkg", "docs", "via/mod.py"},
			map[string]string{"pkg/alias.py": "mod.py", "pkg/abs.md": "ROOT/docs/README.md", "pkg/loop": "..", "via": "pkg"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"pkg/mod.py": "m\n", "docs/README.md": "d\n"})
			for link, target := range tc.links {
				up := strings.Repeat("../", strings.Count(filepath.Dir(filepath.Join(root, link)), "/"))
				target = strings.NewReplacer("ROOT", root, "UP", up, "OUTSIDE", outside).Replace(target)
				if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
					t.Fatal(err)
				}
			}
			m := &manifest.Manifest{Kind: manifest.KindGoServer, Source: manifest.Source{
				ExtraCode: []manifest.ExtraCode{{Root: manifest.GitOrPath{Path: root}, Paths: tc.paths}},
			}}
			dest := filepath.Join(t.TempDir(), "code")
			staged, err := stageCode(context.Background(), m, sourceRoots{workDir: root, scratch: t.TempDir()}, dest)
			if want := strings.ReplaceAll(tc.want, "OUTSIDE", outside); want != "" {
				for _, w := range strings.Split(want, "|") {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Fatalf("stageCode: %v\nwant an error containing %q", err, w)
					}
				}
				// Nothing from outside the root reached the staged tree.
				filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
					if err == nil && d.Type().IsRegular() {
						if b, _ := os.ReadFile(p); strings.Contains(string(b), "secret") || strings.Contains(string(b), "root:") {
							t.Errorf("%s holds a file from outside the root", p)
						}
					}
					return nil
				})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for link, want := range map[string]string{"pkg/alias.py": "mod.py", "pkg/abs.md": "../docs/README.md", "pkg/loop": ".."} {
				if got, err := os.Readlink(filepath.Join(dest, link)); err != nil || got != want {
					t.Errorf("%s staged as a link to %q (%v), want %q", link, got, err, want)
				}
			}
			if b, err := os.ReadFile(filepath.Join(dest, "pkg", "abs.md")); err != nil || string(b) != "d\n" {
				t.Errorf("pkg/abs.md reads %q, %v through the package", b, err)
			}
			if info, err := os.Lstat(filepath.Join(dest, "via", "mod.py")); err != nil || !info.Mode().IsRegular() {
				t.Errorf("via/mod.py (through a link inside the root) staged as %v, %v; want a file", info, err)
			}
			if got := strings.Join(staged.Tree, " "); got != "pkg/ docs/ via/mod.py" {
				t.Errorf("tree %q", got)
			}
			// The link is part of what shipped: retargeting it changes the digest.
			if err := os.Remove(filepath.Join(dest, "pkg", "alias.py")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../docs/README.md", filepath.Join(dest, "pkg", "alias.py")); err != nil {
				t.Fatal(err)
			}
			if sum, err := sha256Tree(dest); err != nil || sum == staged.SHA256 {
				t.Errorf("sha256Tree after retargeting a link: %s, %v; want another digest than %s", sum, err, staged.SHA256)
			}
		})
	}
}

// TestStageCodeLeavesOutOwnOutput: an allowlist holding the output
// directory copies neither the package nor the staging directories beside
// it, and naming the output itself is refused.
func TestStageCodeLeavesOutOwnOutput(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"app/main.go": "m", "build/demo/code/app/main.go": "old", "build/.demo.partial-123/code/x": "partial",
		"build/other/keep": "k",
	})
	out := ownOutput{dir: filepath.Join(root, "build"), name: "demo"}
	m := &manifest.Manifest{Kind: manifest.KindGoServer, Source: manifest.Source{
		ExtraCode: []manifest.ExtraCode{{Root: manifest.GitOrPath{Path: root}, Paths: []string{"."}}},
	}}
	dest := filepath.Join(t.TempDir(), "code")
	if _, err := stageCode(context.Background(), m, sourceRoots{workDir: root, scratch: t.TempDir(), output: out}, dest); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"app/main.go": true, "build/other/keep": true, "build/demo": false, "build/.demo.partial-123": false} {
		if _, err := os.Lstat(filepath.Join(dest, p)); (err == nil) != want {
			t.Errorf("%s staged: %v, want %v", p, err == nil, want)
		}
	}
	m.Source.ExtraCode[0].Paths = []string{"build/demo/code"}
	_, err := stageCode(context.Background(), m, sourceRoots{workDir: root, scratch: t.TempDir(), output: out}, filepath.Join(t.TempDir(), "code"))
	if err == nil || !strings.Contains(err.Error(), "build/demo/code is inside the package's own output") {
		t.Errorf("an allowlist naming the output: %v", err)
	}
}

// TestStagedLinksReachImageAndContext: a link staged in code/ goes into
// the daemonless image's code layer and into the engine's build context
// (tar and --context folder) as a link, not as a copy and not as an error.
func TestStagedLinksReachImageAndContext(t *testing.T) {
	code := t.TempDir()
	writeFiles(t, code, map[string]string{"pkg/mod.py": "m\n"})
	if err := os.Symlink("mod.py", filepath.Join(code, "pkg", "alias.py")); err != nil {
		t.Fatal(err)
	}

	l := oci.NewRootfs(oci.NewTree()).Plan("code/")
	if err := addTree(l, code, kind.CodeDir); err != nil {
		t.Fatal(err)
	}
	var inLayer bool
	for _, e := range l.Entries {
		if e.Path == kind.CodeDir+"/pkg/alias.py" {
			inLayer = e.Type == tar.TypeSymlink && e.Linkname == "mod.py"
		}
	}
	if !inLayer {
		t.Errorf("the code layer lacks the link pkg/alias.py -> mod.py: %+v", l.Entries)
	}

	var files contextFiles
	if err := files.addDir(code, "code"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := files.writeTar(&buf, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	var inTar bool
	for tr := tar.NewReader(&buf); ; {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if hdr.Name == "code/pkg/alias.py" {
			inTar = hdr.Typeflag == tar.TypeSymlink && hdr.Linkname == "mod.py"
		}
	}
	if !inTar {
		t.Error("the build context's tar lacks the link code/pkg/alias.py -> mod.py")
	}
	dir := t.TempDir()
	if err := files.writeDir(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(dir, "code", "pkg", "alias.py")); err != nil || got != "mod.py" {
		t.Errorf("--context folder: code/pkg/alias.py links to %q (%v), want mod.py", got, err)
	}
}
