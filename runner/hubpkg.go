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

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
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
	if err := VerifyPackageImage(pkg); err != nil {
		return nil, nil, fmt.Errorf("%s@%s: %w", ref.Repo, snap.Commit, err)
	}
	return pkg, snap, nil
}

// VerifyPackageImage checks a package's image/ layout: each blob under
// blobs/sha256 holds what its name says (a cache link named by that sha256
// is one the download verified; anything else is hashed here), and the
// layout's image is the one the manifest records. A package whose image
// lives in a registry (no image/) passes.
func VerifyPackageImage(pkg *Package) error {
	dir := pkg.ImageLayout()
	if dir == "" {
		return nil
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return fmt.Errorf("image layout: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(blobs, e.Name())
		if target, err := os.Readlink(p); err == nil && filepath.Base(target) == e.Name() {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("read image blob %s: %w", e.Name(), err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != e.Name() {
			return fmt.Errorf("image blob %s is corrupt: it hashes to sha256 %s", e.Name(), got)
		}
	}
	img, err := layoutImage(dir, pkg.Wire.Container.Image.Tag)
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
			if _, err := os.Stat(filepath.Join(dir, manifest.WireFile)); err != nil {
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
	off := c.Offline()
	for _, ref := range pkg.WeightRefs() {
		_, err := off.Download(ctx, hub.Request{Repo: ref.Repo, Revision: ref.Revision, Allow: ref.AllowPatterns, Ignore: ref.IgnorePatterns}, io.Discard)
		if errors.Is(err, hub.ErrOfflineMiss) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}
