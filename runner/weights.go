package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
)

// PullWeights brings the package's primary and auxiliary weights into the
// HF cache at their pinned revisions and returns their snapshots, in the
// order of WeightRefs. A commit-pinned snapshot also gets refs/main when the
// cache has none, so loaders that name the repo offline find it.
func PullWeights(ctx context.Context, c *hub.Client, p *Package, progress io.Writer) ([]*hub.Snapshot, error) {
	var snaps []*hub.Snapshot
	for _, ref := range p.WeightRefs() {
		if ref.Revision == "" {
			fmt.Fprintf(progress, "warning: weights %s are not pinned: fetching the default branch as it is today\n", ref.Repo)
		}
		snap, err := c.Download(ctx, hub.Request{
			Repo: ref.Repo, Revision: ref.Revision, Allow: ref.AllowPatterns, Ignore: ref.IgnorePatterns,
		}, progress)
		if err != nil {
			return snaps, fmt.Errorf("weights %s: %w", ref.Repo, err)
		}
		if hub.IsCommit(ref.Revision) {
			if err := c.Cache().EnsureDefaultRef(ref.Repo, snap.Commit); err != nil {
				slog.Warn("could not write refs/main for a pinned snapshot", "repo", ref.Repo, "err", err)
			}
		}
		snaps = append(snaps, snap)
	}
	return snaps, nil
}

// ServedWeights applies tt-model's weights rule (hub.ServerWeights.Locate,
// the one the model servers load by) to a profile's server env over the
// host's HF cache, and returns the host snapshot folder HF_MODEL becomes, or
// "" when HF_MODEL stays as the profile sets it: the model's own folder
// variable is set, HF_MODEL is a path, the package declares no weights, or
// (for kinds other than tt-go-server) it names none of the package's
// weights. The revision is the
// env's TT_WEIGHTS_REVISION, else the pin that was pulled (snaps). A
// tt-go-server whose weights the rule cannot find is refused here, with
// every place looked, instead of crash-looping in its container.
func ServedWeights(pkg *Package, env map[string]string, hf hub.Config, snaps []*hub.Snapshot) (string, error) {
	if len(pkg.WeightRefs()) == 0 {
		return "", nil // nothing pulled, nothing to point at (the image brings its own, or the env does)
	}
	w, known := hub.ServerWeights{Model: pkg.Wire.Name}, false
	if pkg.Wire.Container != nil && pkg.Wire.Container.Kind == manifest.KindGoServer {
		model, _ := pkg.Wire.Container.Runtime["model"].(string)
		w, known = hub.WeightsFor(model)
	}
	model := env["HF_MODEL"]
	if (w.OverrideVar != "" && env[w.OverrideVar] != "") || (model != "" && hub.IsFolderName(model)) {
		return "", nil
	}
	pin := ""
	for _, s := range snaps {
		if s.Repo == model {
			pin = s.Commit
		}
	}
	if pin == "" && !known {
		return "", nil
	}
	loc, err := w.Locate(func(k string) string {
		switch k {
		case "HF_HUB_CACHE":
			return hf.CacheDir
		case "HF_HOME":
			return hf.HFHome
		case "HF_MODEL", "TT_WEIGHTS_REVISION":
			return env[k]
		}
		return ""
	}, pin)
	if err != nil {
		return "", fmt.Errorf("the server would not find its weights in the HF cache %s: %w", hf.CacheDir, err)
	}
	return loc.Dir, nil
}

// ContainerSnapshotPath is where a snapshot appears inside a container that
// mounts an HF_HOME at /hf (the Kubernetes pods, whose weights job fills a
// volume the host runner cannot look into).
func ContainerSnapshotPath(repo, commit string) string {
	return ContainerHF + "/hub/" + hub.RepoFolderName(repo) + "/snapshots/" + commit
}

// TestWeightsNotices are the notices of the snapshots that hold generated test weights (a random
// checkpoint standing in for the repo, hub.TestWeightsIn), keyed by repo; nil when none does.
func TestWeightsNotices(snaps []*hub.Snapshot) map[string]string {
	var out map[string]string
	for _, s := range snaps {
		if what, ok := hub.TestWeightsIn(s.Dir); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[s.Repo] = hub.TestWeightsNotice(s.Repo, what)
		}
	}
	return out
}

// DropTestWeights removes from the HF cache every pinned snapshot of the package that holds
// generated test weights, so that a pull after it brings the Hub's files: `weights pull
// --refresh`. It first asks the Hub for the revision (its file list, for a commit pin): when the
// Hub cannot answer, nothing is removed. It says on out what it removed.
func DropTestWeights(ctx context.Context, c *hub.Client, p *Package, out io.Writer) error {
	cache := c.Cache()
	for _, ref := range p.WeightRefs() {
		rev := ref.Revision
		if rev == "" {
			rev = "main"
		}
		commit := rev
		if !hub.IsCommit(rev) {
			var err error
			if commit, err = cache.ReadRef(ref.Repo, rev); err != nil {
				return fmt.Errorf("weights %s: %w", ref.Repo, err)
			}
			if commit == "" {
				continue
			}
		}
		what, ok := hub.TestWeightsIn(cache.SnapshotDir(ref.Repo, commit))
		if !ok {
			continue
		}
		var err error
		if hub.IsCommit(rev) {
			_, err = c.ListFiles(ctx, ref.Repo, commit, ref.AllowPatterns, ref.IgnorePatterns)
		} else {
			_, err = c.ResolveRevision(ctx, ref.Repo, rev)
		}
		if err != nil {
			return fmt.Errorf("weights %s@%s: the Hub cannot replace the random test weights there (%s), so they stay: %w", ref.Repo, rev, what, err)
		}
		if err := cache.DropSnapshot(ref.Repo, commit); err != nil {
			return err
		}
		fmt.Fprintf(out, "removed the random test weights at %s@%s (%s); fetching the Hub's files\n", ref.Repo, commit, what)
	}
	return nil
}
