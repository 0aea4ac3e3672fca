package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/internal/fslink"
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
	output  ownOutput // left out of every copy
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
// is an error, never a skip: an allowlist names exactly what ships. Errors
// name the manifest's file:line:col of the path entry.
func stageCode(ctx context.Context, m *manifest.Manifest, roots sourceRoots, dest string) (stagedCode, error) {
	var out stagedCode
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return out, fmt.Errorf("create %s: %w", dest, err)
	}
	s := &stager{dest: dest, output: roots.output}
	n := 0
	if remoteTreeOfGoServer(m) {
		out.TTMetal = recordedPin(m.Source.TTMetal)
		out.RecordedOnly = len(m.Source.Code) > 0
	} else if len(m.Source.Code) > 0 || m.Source.TTMetal.Path != "" || m.Source.TTMetal.IsGit() {
		// source.tt_metal is resolved and pinned whenever it is named, and also
		// when source.code needs it as the root its paths are read from.
		metal, pin, err := roots.resolve(ctx, "source.tt_metal", m.Source.TTMetal, n)
		if err != nil {
			return out, err
		}
		n++
		out.TTMetal = pin
		for i, rel := range m.Source.Code {
			if err := s.copyAllowed(m, metal, rel, fmt.Sprintf("source.code[%d]", i), &out); err != nil {
				return out, err
			}
		}
	}
	for i, extra := range m.Source.ExtraCode {
		field := fmt.Sprintf("source.extra_code[%d]", i)
		root, _, err := roots.resolve(ctx, field+".root", extra.Root, n)
		if err != nil {
			return out, err
		}
		n++
		for j, rel := range extra.Paths {
			if err := s.copyAllowed(m, root, rel, fmt.Sprintf("%s.paths[%d]", field, j), &out); err != nil {
				return out, err
			}
		}
	}
	if l, err := s.checkLinks(); err != nil {
		return out, m.Errorf(l.field, "%v", err)
	}
	out.Skipped = s.skipped
	sum, err := sha256Tree(dest)
	if err != nil {
		return out, err
	}
	out.SHA256 = sum
	return out, nil
}

// copyAllowed stages one allowlist entry, rel under root, reporting a
// problem at the manifest's position of field.
func (s *stager) copyAllowed(m *manifest.Manifest, root, rel, field string, out *stagedCode) error {
	clean := path.Clean(filepath.ToSlash(rel))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return m.Errorf(field, "%q must be a relative path inside %s", rel, root)
	}
	r, err := fslink.NewRoot(root)
	if err != nil {
		return m.Errorf(field, "%v", err)
	}
	isDir, err := s.copy(r, clean, field)
	switch {
	case fslink.Missing(err):
		return m.Errorf(field, "%q does not exist under %s; the allowlist names exactly what ships, so a missing entry is an error", rel, root)
	case err != nil:
		return m.Errorf(field, "%v", err)
	case isDir:
		out.Tree = append(out.Tree, clean+"/")
	default:
		out.Tree = append(out.Tree, clean)
	}
	return nil
}

// ownOutput is where a package run writes, resolved: <out>/<name> and its
// <out>/.<name>.partial-* siblings (the staging directory, the previous
// package moved aside). An allowlist that holds the output directory
// (paths: ["."] with --out inside the root) must copy neither the previous
// package nor the one being staged into itself.
type ownOutput struct {
	dir, name string
}

func partialPrefix(name string) string { return "." + name + ".partial-" }

// holds says whether the resolved host path p is, or is inside, the output.
func (o ownOutput) holds(p string) bool {
	if o.dir == "" {
		return false
	}
	rel, err := filepath.Rel(o.dir, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return first == o.name || strings.HasPrefix(first, partialPrefix(o.name))
}

// stager copies paths of source roots into one tree, dest. Directories and
// regular files are copied; a symlink stays a symlink, never followed into a
// copy (upstream's copytree follows them, which ships whatever a link
// reaches, /etc/passwd included), and only once fslink found it resolves
// inside the root it is listed under.
type stager struct {
	dest    string
	output  ownOutput
	skipped []string // what codeIgnore dropped, relative to its root
	links   []stagedLink
}

// stagedLink is a symlink the stager made, for checkLinks.
type stagedLink struct {
	field  string // the allowlist entry that shipped it
	rel    string // as listed, relative to its root
	target string // as written in the package
	wants  string // what it resolves to in its root, relative to the root
	at     string // where it was made
}

// copy stages rel under r at dest/rel, without codeIgnore's names below rel
// and without the package's own output, and says whether rel is a
// directory. A link that leaves r, dangles or loops is a *fslink.LinkError.
func (s *stager) copy(r *fslink.Root, rel, field string) (isDir bool, err error) {
	err = r.Walk(rel, func(e fslink.Entry) error {
		if e.Err != nil {
			return e.Err
		}
		if s.output.holds(e.Path) {
			if e.Rel == rel {
				return fmt.Errorf("%s is inside the package's own output (%s and its %s* siblings)", e.Rel, filepath.Join(s.output.dir, s.output.name), partialPrefix(s.output.name))
			}
			if e.Type.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.Rel != rel && ignoredName(path.Base(e.Rel)) {
			s.skipped = append(s.skipped, e.Rel)
			if e.Type.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		// The parent is resolved inside dest, so nothing is ever written
		// through a link an earlier entry staged to somewhere outside it.
		parent, err := oci.ResolveIn(s.dest, path.Dir(e.Rel))
		if err != nil {
			return err
		}
		target := filepath.Join(parent, path.Base(e.Rel))
		switch {
		case e.Type&fs.ModeSymlink != 0:
			return s.link(r, e, field, target)
		case e.Type.IsDir():
			isDir = isDir || e.Rel == rel
			return os.MkdirAll(target, 0o755)
		case e.Type.IsRegular():
			info, err := os.Lstat(e.Path)
			if err != nil {
				return err
			}
			return copyFile(e.Path, target, info.Mode())
		}
		return fmt.Errorf("%s is not a regular file, directory or symlink", e.Rel)
	})
	return isDir, err
}

// link makes the symlink e at target. A relative target is kept as written;
// an absolute one (inside the root, the walk checked) is rewritten relative
// to the link, since the package does not live where the root does.
func (s *stager) link(r *fslink.Root, e fslink.Entry, field, target string) error {
	wants, err := filepath.Rel(r.Real(), e.Resolved)
	if err != nil {
		return err
	}
	wants = filepath.ToSlash(wants)
	text := e.Target
	if path.IsAbs(text) {
		if text, err = filepath.Rel(path.Dir(e.Rel), wants); err != nil {
			return err
		}
		text = filepath.ToSlash(text)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(text, target); err != nil {
		return err
	}
	s.links = append(s.links, stagedLink{field: field, rel: e.Rel, target: text, wants: wants, at: target})
	return nil
}

// checkLinks requires every staged link to resolve inside dest to
// something staged: a link whose target no allowlist ships would dangle in
// the package. It returns the offending link.
func (s *stager) checkLinks() (stagedLink, error) {
	if len(s.links) == 0 {
		return stagedLink{}, nil
	}
	r, err := fslink.NewRoot(s.dest)
	if err != nil {
		return stagedLink{}, err
	}
	for _, l := range s.links {
		_, _, err := r.Link(l.at)
		var linkErr *fslink.LinkError
		switch {
		case errors.As(err, &linkErr) && errors.Is(err, fslink.ErrNotExist):
			return l, fmt.Errorf("symlink %s -> %s points to %s, which no allowlist ships; list it too, or the link dangles in the package", l.rel, l.target, l.wants)
		case err != nil:
			return l, fmt.Errorf("in the staged package: %w", err)
		}
	}
	return stagedLink{}, nil
}

func copyFile(src, dst string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// A link already there (staged by an earlier entry) is replaced, not
	// written through.
	if info, err := os.Lstat(dst); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		if err := os.Remove(dst); err != nil {
			return err
		}
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
// components), the relative path then the bytes. It says what shipped. A
// symlink (upstream copies through links, so its trees have none) adds its
// path, then "->" and its target as written.
func sha256Tree(root string) (string, error) {
	var files []string
	links := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			links[filepath.ToSlash(rel)] = target
		case !d.Type().IsRegular():
			return nil
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool { return lessByParts(files[i], files[j]) })
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f))
		if target, ok := links[f]; ok {
			h.Write([]byte("->" + target))
			continue
		}
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
