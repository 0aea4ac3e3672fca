package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ttmodel/tt-model/hub"
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

// ContainerSnapshotPath is where a snapshot appears inside a container that
// mounts the host's HF_HOME at /hf.
func ContainerSnapshotPath(repo, commit string) string {
	return "/hf/hub/" + hub.RepoFolderName(repo) + "/snapshots/" + commit
}
