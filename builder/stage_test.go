package builder

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

// TestStageCodeFollowsLinks: a symlinked directory inside an allowlisted
// path is copied as a directory (with the exclusions), and a link back to
// an ancestor is refused rather than copied forever.
func TestStageCodeFollowsLinks(t *testing.T) {
	root := t.TempDir()
	shared := t.TempDir() // outside the root: the staged tree must not point there
	writeFiles(t, shared, map[string]string{"util.py": "u\n", "__pycache__/util.pyc": "c"})
	writeFiles(t, root, map[string]string{"pkg/mod.py": "m\n"})
	if err := os.Symlink(shared, filepath.Join(root, "pkg", "shared")); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Kind: manifest.KindGoServer, Source: manifest.Source{
		ExtraCode: []manifest.ExtraCode{{Root: manifest.GitOrPath{Path: root}, Paths: []string{"pkg"}}},
	}}
	dest := filepath.Join(t.TempDir(), "code")
	staged, err := stageCode(context.Background(), m, sourceRoots{workDir: root, scratch: t.TempDir()}, dest)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Lstat(filepath.Join(dest, "pkg", "shared"))
	if err != nil || !info.IsDir() {
		t.Fatalf("pkg/shared staged as %v (%v), want a real directory", info, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "pkg", "shared", "util.py")); err != nil || string(b) != "u\n" {
		t.Errorf("pkg/shared/util.py = %q, %v", b, err)
	}
	if len(staged.Skipped) != 1 || staged.Skipped[0] != "pkg/shared/__pycache__" {
		t.Errorf("skipped %v, want [pkg/shared/__pycache__]", staged.Skipped)
	}

	if err := os.Symlink("..", filepath.Join(root, "pkg", "loop")); err != nil {
		t.Fatal(err)
	}
	_, err = stageCode(context.Background(), m, sourceRoots{workDir: root, scratch: t.TempDir()}, filepath.Join(t.TempDir(), "code"))
	if err == nil || !strings.Contains(err.Error(), "links back to a directory being copied") {
		t.Errorf("a link to an ancestor: %v", err)
	}
}
