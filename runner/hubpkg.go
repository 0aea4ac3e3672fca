package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/fslink"
	"github.com/ttmodel/tt-model/internal/ocilayout"
)

// A package pushed to the Hub lives, once pulled, in the Hugging Face cache
// like any model repo (models--org--name/{blobs,refs,snapshots}): the
// snapshot folder is the package folder, the local store is the cache.

// HubRef names a package repo on the Hub: org/name[@revision].
type HubRef struct{ Repo, Revision string }

func (r HubRef) String() string {
	if r.Revision == "" {
		return r.Repo
	}
	return r.Repo + "@" + r.Revision
}

var hubRefRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*/[A-Za-z0-9_][A-Za-z0-9._-]*(@[^@\s]+)?$`)

// ParseHubRef reads org/name[@rev]. An argument that exists on disk is a
// path, never a repo, so `serve build/rf-detr` keeps meaning the folder.
func ParseHubRef(arg string) (HubRef, bool) {
	if _, err := os.Stat(arg); err == nil || !hubRefRE.MatchString(arg) {
		return HubRef{}, false
	}
	// build/rf-detr mistyped is a path that does not exist, not a repo named
	// build: an org that is a local folder means a path.
	if fi, err := os.Stat(strings.SplitN(arg, "/", 2)[0]); err == nil && fi.IsDir() {
		return HubRef{}, false
	}
	repo, rev, _ := strings.Cut(arg, "@")
	if hub.ValidateRepoID(repo) != nil {
		return HubRef{}, false
	}
	return HubRef{Repo: repo, Revision: rev}, true
}

// FetchOptions say how FetchPackage may use the network.
type FetchOptions struct {
	// Refresh asks the Hub where a branch points now even when the store has
	// the package.
	Refresh bool
	// LocalOnly never uses the network: the package must be in the store.
	LocalOnly bool
	Progress  io.Writer
	// CacheRoot is where pulled images are laid out for serving ("" =
	// ~/.cache/tt-model).
	CacheRoot string
}

// FetchPackage returns the package ref names from the local store, pulling
// what is missing from the Hub first (everything, with Refresh), and checks
// its image: every blob of image/ hashes to its name and the layout holds
// the image the manifest records.
func FetchPackage(ctx context.Context, c *hub.Client, ref HubRef, opts FetchOptions) (*Package, *hub.Snapshot, error) {
	req := hub.Request{Repo: ref.Repo, Revision: ref.Revision}
	var snap *hub.Snapshot
	var err error
	if !opts.Refresh {
		snap, err = c.Offline().Download(ctx, req, io.Discard)
		if err != nil && opts.LocalOnly {
			return nil, nil, fmt.Errorf("%s is not complete in the local store (%s) and --local-only forbids the network: %w; run `tt-model pull %s` with the Hub reachable",
				ref, c.Cache().Dir, err, ref)
		}
	}
	if snap == nil {
		if opts.LocalOnly {
			return nil, nil, fmt.Errorf("--refresh and --local-only contradict each other")
		}
		if snap, err = c.Download(ctx, req, opts.Progress); err != nil {
			return nil, nil, fmt.Errorf("package %s: %w", ref, err)
		}
	}
	pkg, err := LoadPackage(snap.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s@%s is not a tt-model package: %w", ref.Repo, snap.Commit, err)
	}
	if err := verifyImageBlobs(pkg); err != nil {
		return nil, nil, fmt.Errorf("%s@%s: %w", ref.Repo, snap.Commit, err)
	}
	if src := pkg.ImageLayout(); src != "" {
		root := opts.CacheRoot
		if root == "" {
			if root, err = DefaultCacheRoot(); err != nil {
				return nil, nil, err
			}
		}
		if pkg.ImageDir, err = materializeLayout(src, c.Cache().RepoDir(ref.Repo), filepath.Join(root, "images")); err != nil {
			return nil, nil, fmt.Errorf("%s@%s: %w", ref.Repo, snap.Commit, err)
		}
	}
	if err := VerifyPackageImage(pkg); err != nil {
		return nil, nil, fmt.Errorf("%s@%s: %w", ref.Repo, snap.Commit, err)
	}
	return pkg, snap, nil
}

// PulledLayout is where the servable copy of the image layout src lives
// under root: named by the sha256 of its index.json.
func PulledLayout(root, src string) (string, error) {
	index, err := os.ReadFile(filepath.Join(src, "index.json"))
	if err != nil {
		return "", fmt.Errorf("image layout: %w", err)
	}
	sum := sha256.Sum256(index)
	return filepath.Join(root, hex.EncodeToString(sum[:])[:32]), nil
}

// materializeLayout makes a real OCI layout of the linked one at src under
// root (see PulledLayout): index.json and oci-layout
// copied, every blob hard-linked to the cache's verified blob (copied when
// the two folders are on different filesystems). Every link under src must
// resolve inside repoDir, the repo's cache folder (its blobs/), so a
// snapshot cannot lend the layout a file from elsewhere on the host. It is
// made in a temporary folder and renamed into place, so a layout there is
// always whole.
func materializeLayout(src, repoDir, root string) (string, error) {
	dst, err := PulledLayout(root, src)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dst, "index.json")); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	cache, err := fslink.NewRoot(repoDir)
	if err != nil {
		return "", fmt.Errorf("materialize the image layout: %w", err)
	}
	srcRel, err := filepath.Rel(repoDir, src)
	if err != nil {
		return "", fmt.Errorf("materialize the image layout: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".layout-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	err = cache.Walk(srcRel, func(e fslink.Entry) error {
		if e.Err != nil {
			return e.Err
		}
		rel, _ := filepath.Rel(srcRel, filepath.FromSlash(e.Rel))
		out := filepath.Join(tmp, rel)
		if e.Type.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		real := e.Path
		if e.Type&os.ModeSymlink != 0 {
			real = e.Resolved
		}
		if os.Link(real, out) == nil {
			return nil
		}
		return copyBlob(real, out)
	})
	if err != nil {
		return "", fmt.Errorf("materialize the image layout: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, statErr := os.Stat(filepath.Join(dst, "index.json")); statErr == nil {
			return dst, nil // another process made it meanwhile
		}
		return "", err
	}
	return dst, nil
}

func copyBlob(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// VerifyPackageImage checks that the package's image layout holds the image
// its manifest records. A package whose image lives in a registry (no
// image/) passes.
func VerifyPackageImage(pkg *Package) error {
	dir := pkg.ImageLayout()
	if dir == "" {
		return nil
	}
	img, err := pkg.Image()
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image digest: %w", err)
	}
	if want := pkg.Wire.Container.Image.Digest; want != "" && d.String() != want {
		return fmt.Errorf("image/ holds %s but the manifest records %s", d, want)
	}
	return nil
}

// verifyImageBlobs checks each blob under image/blobs/sha256 holds what its
// name says: a cache link to a blob named by that sha256 is one the
// download verified (an LFS file); anything else is hashed.
func verifyImageBlobs(pkg *Package) error {
	dir := pkg.ImageLayout()
	if dir == "" {
		return nil
	}
	return ocilayout.VerifyBlobs(dir, func(name, path string) bool {
		target, err := os.Readlink(path)
		return err == nil && filepath.Base(target) == name
	})
}

// StoredPackage is a package in the local store.
type StoredPackage struct {
	Repo    string
	Commit  string
	Refs    []string // branches and tags of the cache pointing at Commit
	Dir     string
	Package *Package
	Size    int64 // bytes of its files
}

// StoredPackages lists the tt-model packages in the HF cache: every cached
// model repo snapshot that holds a tt_kernel_manifest.json.
func StoredPackages(cache hub.Cache) ([]StoredPackage, error) {
	repoDirs, err := filepath.Glob(filepath.Join(cache.Dir, "models--*"))
	if err != nil {
		return nil, err
	}
	var out []StoredPackage
	for _, rd := range repoDirs {
		repo := strings.ReplaceAll(strings.TrimPrefix(filepath.Base(rd), "models--"), "--", "/")
		snaps, _ := os.ReadDir(filepath.Join(rd, "snapshots"))
		refs := map[string][]string{}
		filepath.WalkDir(filepath.Join(rd, "refs"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, err := os.ReadFile(p); err == nil {
					rel, _ := filepath.Rel(filepath.Join(rd, "refs"), p)
					commit := strings.TrimSpace(string(b))
					refs[commit] = append(refs[commit], filepath.ToSlash(rel))
				}
			}
			return nil
		})
		for _, s := range snaps {
			dir := filepath.Join(rd, "snapshots", s.Name())
			if _, err := os.Stat(filepath.Join(dir, builtpkg.WireFile)); err != nil {
				continue
			}
			pkg, err := LoadPackage(dir)
			if err != nil {
				continue // a repo that only looks like a package
			}
			sp := StoredPackage{Repo: repo, Commit: s.Name(), Refs: refs[s.Name()], Dir: dir, Package: pkg}
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if fi, err := os.Stat(p); err == nil {
						sp.Size += fi.Size()
					}
				}
				return nil
			})
			sort.Strings(sp.Refs)
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Repo != out[j].Repo {
			return out[i].Repo < out[j].Repo
		}
		return out[i].Commit < out[j].Commit
	})
	return out, nil
}

// WeightsPresent reports whether every pinned weights repo of pkg is
// complete in the cache, asking no network.
func WeightsPresent(ctx context.Context, c *hub.Client, pkg *Package) (bool, error) {
	_, present, err := CachedWeights(ctx, c, pkg)
	return present, err
}

// CachedWeights is WeightsPresent with the snapshots it found (all of them when present).
func CachedWeights(ctx context.Context, c *hub.Client, pkg *Package) ([]*hub.Snapshot, bool, error) {
	off := c.Offline()
	var snaps []*hub.Snapshot
	for _, ref := range pkg.WeightRefs() {
		s, err := off.Download(ctx, hub.Request{Repo: ref.Repo, Revision: ref.Revision, Allow: ref.AllowPatterns, Ignore: ref.IgnorePatterns}, io.Discard)
		if errors.Is(err, hub.ErrOfflineMiss) {
			return snaps, false, nil
		}
		if err != nil {
			return snaps, false, err
		}
		snaps = append(snaps, s)
	}
	return snaps, true, nil
}

// FetchManifest reads only the manifest of the Hub package ref: from the
// local store when it holds it (no network), else by downloading that one
// file. info and profiles need no image.
func FetchManifest(ctx context.Context, c *hub.Client, ref HubRef) (*Package, *hub.Snapshot, error) {
	req := hub.Request{Repo: ref.Repo, Revision: ref.Revision, Allow: []string{builtpkg.WireFile}}
	snap, err := c.Offline().Download(ctx, req, io.Discard)
	if err != nil {
		if snap, err = c.Download(ctx, req, io.Discard); err != nil {
			return nil, nil, fmt.Errorf("package %s: %w", ref, err)
		}
	}
	pkg, err := builtpkg.ReadFile(filepath.Join(snap.Dir, builtpkg.WireFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%s@%s: %w", ref.Repo, snap.Commit, err)
	}
	if !pkg.IsContainer() {
		return nil, nil, fmt.Errorf("%s@%s: schema %s has no container block: not a container package", ref.Repo, snap.Commit, pkg.Wire.SchemaVersion)
	}
	return pkg, snap, nil
}
