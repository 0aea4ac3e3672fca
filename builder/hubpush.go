package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ttmodel/tt-model/builder/card"
	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/fslink"
	"github.com/ttmodel/tt-model/internal/ocilayout"
)

// HubPushOptions are the inputs of PushHub.
type HubPushOptions struct {
	Client   *hub.Client
	Repo     string // org/name; "" = the manifest's repo
	Revision string // the branch; "" = main (created when missing)
	// Visibility of a repo created now: private unless Public or Publish.
	// On an existing repo only an explicit Public, Private or Publish
	// changes it.
	Public, Private bool
	// Publish makes the repo public and adds the catalog tag to the card;
	// it is refused without card.performance and card.limitations.
	Publish bool
	// Registry, when set (or when the manifest's image.registry is not
	// "hf"), sends the image to that OCI registry and puts only a pointer
	// (the manifest's image reference) in the Hub repo.
	Registry string
	Insecure bool
	DryRun   bool // check and hash everything, send nothing
	Log      io.Writer
}

// HubPushResult says what a Hub push did.
type HubPushResult struct {
	Repo, Revision string
	Commit         string // the revision's commit after the push
	CommitURL      string
	Created        bool   // the repo was created by this push
	Visibility     string // "private", "public", or "unchanged" (an existing repo, no flag)
	Files          int    // files in the package
	Bytes          int64  // their total size
	LFSUploaded    int
	LFSReused      int // LFS objects the Hub already held
	Unchanged      int // files identical on the Hub: not sent
	UploadedBytes  int64
	Deleted        []string // stale code/ and image/ files removed
	NoChange       bool     // nothing differed: no commit made
	Image          string   // registry reference, when the image went to a registry
	DryRun         bool
}

// hubOwned are the folders push makes identical to the package; any other
// file of the repo (media/, a hand-written SERVING.md, .gitattributes)
// survives a push, as upstream.
var hubOwned = []string{builtpkg.CodeDir + "/", builtpkg.LayoutDir + "/"}

// PushHub uploads the staged package dir to a Hub model repo as upstream
// lays it out: README.md (the card, its quickstart naming the repo),
// tt_kernel_manifest.json, code/ and image/ (the OCI layout; its blobs are
// checked against their sha256 names before anything is sent), in one
// commit that also removes code/ and image/ files the package no longer
// has. Objects the Hub holds are not sent again, so an interrupted push
// resumes.
func PushHub(ctx context.Context, dir string, opts HubPushOptions) (*HubPushResult, error) {
	p := newProgress(opts.Log)
	pkg, err := builtpkg.Read(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not a staged package (run `tt-model package` first): %w", dir, err)
	}
	if !pkg.IsContainer() {
		return nil, fmt.Errorf("%s: not a container (5.1) package", dir)
	}
	w := pkg.Wire
	if pkg.ImageLayout() == "" {
		return nil, fmt.Errorf("%s is not a staged package: image/oci-layout is missing; run `tt-model package` first", dir)
	}
	repo := opts.Repo
	if repo == "" {
		repo = stringField(w.Container.Built, "repo")
	}
	if repo == "" {
		return nil, fmt.Errorf("%s: the manifest names no repo: give --repo org/name", dir)
	}
	if err := hub.ValidateRepoID(repo); err != nil {
		return nil, fmt.Errorf("--repo: %w", err)
	}
	if !strings.Contains(repo, "/") {
		return nil, fmt.Errorf("--repo %q: want org/name", repo)
	}
	if opts.Publish {
		authored := w.Container.Card
		if authored == nil || strings.TrimSpace(authored.Performance) == "" || strings.TrimSpace(authored.Limitations) == "" {
			return nil, fmt.Errorf("%s: --publish lists the model in the tt-model catalog, which needs card.performance and card.limitations in tt-model.yaml", dir)
		}
	}
	if opts.Public && opts.Private {
		return nil, errors.New("--public and --private contradict each other")
	}
	branch := opts.Revision
	if branch == "" {
		branch = "main"
	}
	if hub.IsCommit(branch) {
		return nil, fmt.Errorf("--revision %s is a commit: push to a branch", branch)
	}
	// The layout must hold the image the manifest records.
	img, err := ocilayout.Image(pkg.LayoutPath(), pkg.Tag())
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("digest of %s/image: %w", dir, err)
	}
	if want := w.Container.Image.Digest; want != "" && want != digest.String() {
		return nil, fmt.Errorf("%s: image/ holds %s but %s records %s; repackage", dir, digest, builtpkg.WireFile, want)
	}
	res := &HubPushResult{Repo: repo, Revision: branch, DryRun: opts.DryRun}

	registry := opts.Registry
	if registry == "" && w.Container.Image.Registry != "" && w.Container.Image.Registry != "hf" {
		registry = w.Container.Image.Registry
	}
	scratch, err := os.MkdirTemp("", "tt-model-push-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	wireFile := pkg.Path
	if registry != "" && !opts.DryRun {
		pushed, err := Push(ctx, dir, PushOptions{Registry: registry, Insecure: opts.Insecure, Log: opts.Log})
		if err != nil {
			return nil, err
		}
		res.Image = pushed.Reference()
		// The Hub repo carries the pointer: the manifest naming the registry.
		ptr := *w
		c := *w.Container
		c.Image.Registry = strings.TrimSuffix(registry, "/")
		ptr.Container = &c
		wireFile = filepath.Join(scratch, builtpkg.WireFile)
		if err := ptr.WriteFile(wireFile); err != nil {
			return nil, err
		}
	}
	text, warnings, err := card.RenderHub(w, repo, opts.Publish)
	if err != nil {
		return nil, err
	}
	for _, wn := range warnings {
		p.stage("warning: %s", wn)
	}
	readme := filepath.Join(scratch, builtpkg.CardFile)
	if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
		return nil, err
	}
	files := []hub.LocalFile{{Path: builtpkg.CardFile, Local: readme}, {Path: builtpkg.WireFile, Local: wireFile}}
	folders := []string{builtpkg.CodeDir}
	if registry == "" {
		folders = append(folders, builtpkg.LayoutDir)
	}
	for _, f := range folders {
		more, err := packageFiles(dir, f)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	p.stage("hashing %d files of %s", len(files), dir)
	prepared, err := hub.PrepareFiles(ctx, files, 4)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	res.Files = len(prepared)
	for _, f := range prepared {
		res.Bytes += f.Size
	}
	if opts.DryRun {
		p.stage("dry run: %d files (%s) verified; nothing sent to %s", res.Files, humanBytes(res.Bytes), opts.Client.Endpoint())
		return res, nil
	}

	c := opts.Client
	private := !(opts.Public || opts.Publish)
	p.stage("pushing %s to %s/%s (%d files, %s)", w.Name, c.Endpoint(), repo, res.Files, humanBytes(res.Bytes))
	if res.Created, err = c.CreateRepo(ctx, repo, private); err != nil {
		return nil, err
	}
	res.Visibility = "unchanged"
	if !res.Created && (opts.Public || opts.Publish || opts.Private) {
		if err := c.SetPrivate(ctx, repo, opts.Private); err != nil {
			return nil, err
		}
		private = opts.Private
	}
	if res.Created || opts.Public || opts.Publish || opts.Private {
		res.Visibility = map[bool]string{true: "private", false: "public"}[private]
	}
	if branch != "main" {
		if _, err := c.CreateBranch(ctx, repo, branch); err != nil {
			return nil, err
		}
	}
	head, err := c.ResolveRevision(ctx, repo, branch)
	if err != nil {
		return nil, err
	}
	remote, err := c.ListFiles(ctx, repo, head, nil, nil)
	if err != nil {
		return nil, err
	}
	local := map[string]bool{}
	for _, f := range prepared {
		local[f.Path] = true
	}
	for _, f := range remote.Files {
		for _, owned := range hubOwned {
			if strings.HasPrefix(f.Path, owned) && !local[f.Path] {
				res.Deleted = append(res.Deleted, f.Path)
			}
		}
	}
	sort.Strings(res.Deleted)
	out, err := c.CreateCommit(ctx, hub.Commit{
		Repo: repo, Branch: branch, Parent: head, Files: prepared, Delete: res.Deleted,
		Summary:     fmt.Sprintf("Upload %s package (image %s)", w.Name, shortHex(digest.Hex)),
		Description: fmt.Sprintf("Pushed by tt-model %s.", stringField(w.Container.Built, "tt_model_version")),
	}, opts.Log)
	if err != nil {
		return nil, err
	}
	res.Commit, res.CommitURL, res.NoChange = out.OID, out.URL, out.Empty
	res.LFSUploaded, res.LFSReused, res.Unchanged, res.UploadedBytes = out.LFSUploaded, out.LFSReused, out.Unchanged, out.UploadedBytes
	return res, nil
}

// packageFiles lists the files under dir/sub as repo paths. A link is
// followed when it stays inside dir (the Hub stores no links); one leaving
// it is refused. OCI blobs carry their expected sha256 (their name).
func packageFiles(dir, sub string) ([]hub.LocalFile, error) {
	root, err := fslink.NewRoot(dir)
	if err != nil {
		return nil, err
	}
	var out []hub.LocalFile
	if _, err := os.Stat(filepath.Join(dir, sub)); errors.Is(err, fs.ErrNotExist) && sub == "code" {
		return nil, nil // a kind that stages no code
	}
	err = filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			_, target, err := root.Link(p)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(target); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("%s links to %s, not a regular file", rel, target)
			}
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", rel)
		}
		f := hub.LocalFile{Path: rel, Local: p}
		if dirName, name := path.Split(rel); dirName == "image/blobs/sha256/" {
			f.SHA256 = name
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", dir, sub, err)
	}
	return out, nil
}

// stringField is a string value of the wire manifest's built block ("" when
// absent).
func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
