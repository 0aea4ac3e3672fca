package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ttmodel/tt-model/manifest"
)

// codeIgnore is upstream's CODE_IGNORE (build.py): dropped from inside an
// allowlisted path at every depth. Only regenerated build detritus and
// weights (a pointer in this design, never shipped) qualify.
var codeIgnore = []string{
	"__pycache__", "*.pyc", ".pytest_cache", "*.egg-info", ".venv", "venv",
	"logs", "*.log",
	"*.safetensors", "*.pt", "*.pth", "*.ckpt", "*.bin", "*.refpt",
}

func ignoredName(name string) bool {
	for _, pat := range codeIgnore {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// stagedCode is the result of staging code/.
type stagedCode struct {
	Tree    []string // the allowlist entries, "dir/" for directories
	Skipped []string // what codeIgnore dropped, relative to its root
	SHA256  string   // upstream's _sha256_tree of the staged tree
	TTMetal treePin
	// RecordedOnly is set when source.code names a remote tt-metal tree that
	// a tt-go-server package does not need: the pin is recorded, nothing is
	// staged from it.
	RecordedOnly bool
}

var hexRefRE = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// remoteTreeOfGoServer says whether source.tt_metal is a remote {repo, ref}
// of a tt-go-server package: its image carries no tt-metal, so the tree is
// provenance only and is not fetched.
func remoteTreeOfGoServer(m *manifest.Manifest) bool {
	g := m.Source.TTMetal
	if m.Kind != manifest.KindGoServer || !g.IsGit() {
		return false
	}
	info, err := os.Stat(strings.TrimPrefix(g.Repo, "file://"))
	return err != nil || !info.IsDir()
}

// recordedPin is the pin of a tree that was not fetched: the repo, and the
// ref when it is a commit id (as upstream's resolve_git_ref trusts a sha).
func recordedPin(g manifest.GitOrPath) treePin {
	pin := treePin{Mode: "git", SCMVersion: "0.0.0.dev0"}
	repo := g.Repo
	pin.Remote = &repo
	for _, ref := range []string{g.SHA, g.Ref} {
		if hexRefRE.MatchString(ref) {
			sha := ref
			pin.SHA = &sha
			break
		}
	}
	return pin
}

// sourceRoots resolves source.tt_metal and every extra_code root to a local
// directory. A {repo, ref} root is taken from a local git checkout (a repo
// that names a directory or file:// URL) at the pinned commit; anything
// that would need the network is refused with the reason.
type sourceRoots struct {
	workDir string
	scratch string
}

func (r sourceRoots) resolve(ctx context.Context, field string, g manifest.GitOrPath, n int) (string, treePin, error) {
	if !g.IsGit() {
		p := g.Path
		if p == "~" || strings.HasPrefix(p, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, strings.TrimPrefix(p, "~"))
			}
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.workDir, p)
		}
		info, err := os.Stat(p)
		if err != nil {
			return "", treePin{}, fmt.Errorf("%s: %w", field, err)
		}
		if !info.IsDir() {
			return "", treePin{}, fmt.Errorf("%s: %s is not a directory", field, p)
		}
		return p, pinTree(ctx, p, "local"), nil
	}
	local := strings.TrimPrefix(g.Repo, "file://")
	if info, err := os.Stat(local); err != nil || !info.IsDir() {
		return "", treePin{}, fmt.Errorf("%s: {repo: %s, ref: %s} is not a local git checkout; this version stages code without the network, so point %s at a local path or a local repository", field, g.Repo, g.Ref, field)
	}
	ref := g.Ref
	if g.SHA != "" {
		ref = g.SHA
	}
	sha, ok := git(ctx, local, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if !ok {
		return "", treePin{}, fmt.Errorf("%s: ref %q does not name a commit in %s", field, ref, local)
	}
	dest := filepath.Join(r.scratch, fmt.Sprintf("git-root-%d", n))
	if _, ok := git(ctx, r.scratch, "clone", "--quiet", "--shared", "--no-checkout", local, dest); !ok {
		return "", treePin{}, fmt.Errorf("%s: clone %s: git clone failed", field, local)
	}
	if _, ok := git(ctx, dest, "checkout", "--quiet", "--detach", sha); !ok {
		return "", treePin{}, fmt.Errorf("%s: check out %s of %s failed", field, sha, local)
	}
	pin := treePin{Mode: "git", SHA: &sha, SCMVersion: scmVersion(ctx, dest)}
	remote := g.Repo
	pin.Remote = &remote
	return dest, pin, nil
}

// stageCode copies the allowlists into dest: source.code from the tt-metal
// tree, then every extra_code root's paths, all into one tree. A missing path
// is an error, never a skip: an allowlist names exactly what ships.
func stageCode(ctx context.Context, m *manifest.Manifest, roots sourceRoots, dest string) (stagedCode, error) {
	var out stagedCode
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return out, fmt.Errorf("create %s: %w", dest, err)
	}
	n := 0
	if remoteTreeOfGoServer(m) {
		out.TTMetal = recordedPin(m.Source.TTMetal)
		out.RecordedOnly = len(m.Source.Code) > 0
	} else if len(m.Source.Code) > 0 {
		// Deliberate twin of the lines below: source.tt_metal and each code root are resolved and
		// pinned one after the other.
		metal, pin, err := roots.resolve(ctx, "source.tt_metal", m.Source.TTMetal, n)
		if err != nil {
			return out, err
		}
		n++
		out.TTMetal = pin
		for i, rel := range m.Source.Code {
			if err := copyAllowed(metal, rel, dest, fmt.Sprintf("source.code[%d]", i), &out); err != nil {
				return out, err
			}
		}
	} else if m.Source.TTMetal.Path != "" || m.Source.TTMetal.IsGit() {
		// Deliberate twin of the lines above: source.tt_metal and each code root are resolved and
		// pinned one after the other.
		_, pin, err := roots.resolve(ctx, "source.tt_metal", m.Source.TTMetal, n)
		if err != nil {
			return out, err
		}
		n++
		out.TTMetal = pin
	}
	for i, extra := range m.Source.ExtraCode {
		field := fmt.Sprintf("source.extra_code[%d]", i)
		root, _, err := roots.resolve(ctx, field+".root", extra.Root, n)
		if err != nil {
			return out, err
		}
		n++
		for j, rel := range extra.Paths {
			if err := copyAllowed(root, rel, dest, fmt.Sprintf("%s.paths[%d]", field, j), &out); err != nil {
				return out, err
			}
		}
	}
	sum, err := sha256Tree(dest)
	if err != nil {
		return out, err
	}
	out.SHA256 = sum
	return out, nil
}

func copyAllowed(root, rel, dest, field string, out *stagedCode) error {
	clean := path.Clean(filepath.ToSlash(rel))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("%s: %q must be a relative path inside %s", field, rel, root)
	}
	src := filepath.Join(root, filepath.FromSlash(clean))
	info, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("%s: %q does not exist under %s; the allowlist names exactly what ships, so a missing entry is an error", field, rel, root)
	}
	target := filepath.Join(dest, filepath.FromSlash(clean))
	if !info.IsDir() {
		out.Tree = append(out.Tree, clean)
		return copyFile(src, target, info.Mode())
	}
	out.Tree = append(out.Tree, clean+"/")
	if err := copyTree(root, src, target, &out.Skipped, map[string]bool{}); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// copyTree copies the directory src to dst without codeIgnore's names
// (reported in skipped, relative to root). Links are followed, as upstream's
// copytree(symlinks=False): the staged tree must not point outside itself.
// A link back to a directory being copied is refused instead of looping.
func copyTree(root, src, dst string, skipped *[]string, active map[string]bool) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	if active[real] {
		return fmt.Errorf("%s links back to a directory being copied", src)
	}
	active[real] = true
	defer delete(active, real)
	// Walk the resolved directory (WalkDir does not descend into a link) and
	// name everything by its path through src.
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		rel, _ := filepath.Rel(real, p)
		named := filepath.Join(src, rel)
		target := filepath.Join(dst, rel)
		if p == real {
			return os.MkdirAll(dst, 0o755)
		}
		if ignoredName(d.Name()) {
			r, _ := filepath.Rel(root, named)
			*skipped = append(*skipped, filepath.ToSlash(r))
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", named, err)
		}
		switch {
		case info.IsDir() && d.Type()&fs.ModeSymlink != 0:
			return copyTree(root, named, target, skipped, active)
		case info.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		return copyFile(p, target, info.Mode())
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode.Perm()|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// sha256Tree is upstream's _sha256_tree: over every file in path order (by
// components), the relative path then the bytes. It says what shipped.
func sha256Tree(root string) (string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool { return lessByParts(files[i], files[j]) })
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f))
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", f, err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// lessByParts orders paths as Python orders PurePosixPath values: component
// by component, so "a/b" sorts before "a.txt" ("a" < "a.txt").
func lessByParts(a, b string) bool {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}
