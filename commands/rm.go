package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/safename"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

func newRmCmd() *cobra.Command {
	var includeWeights, keepCache, weightsOnly bool
	cmd := &cobra.Command{
		Use:   "rm NAME | --weights ORG/NAME[@REV]",
		Short: "Remove a package from the local store",
		Long: "rm removes the package NAME (its repo org/name, or its package name) from the local store: the repo's\n" +
			"folder in the Hugging Face cache (every revision) and its locks, and the package's kernel and weight\n" +
			"caches under ~/.cache/tt-model/<name> unless --keep-cache. --include-weights also removes the weights\n" +
			"repos it pins, except those another stored package pins too. It refuses while a server of the package\n" +
			"runs (stop it first). --weights ORG/NAME removes the cached weights repo ORG/NAME instead (every\n" +
			"revision), --weights ORG/NAME@REV one revision: its snapshot, its file list, the refs naming it and\n" +
			"the blobs no other revision uses (e.g. random test weights a demo stored at a real pin).",
		Example: "  tt-model rm acme/rf-detr\n  tt-model rm rf-detr --include-weights\n" +
			"  tt-model rm --weights Roboflow/rf-detr-base@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			cache := hub.Cache{Dir: cfg.CacheDir}
			if weightsOnly {
				return removeWeights(cmd.OutOrStdout(), cache, args[0])
			}
			stored, err := runner.StoredPackages(cache)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			var match []runner.StoredPackage
			repos := map[string]bool{}
			for _, sp := range stored {
				if sp.Repo == args[0] || sp.Package.Wire.Name == args[0] {
					match = append(match, sp)
					repos[sp.Repo] = true
				}
			}
			switch {
			case len(match) == 0:
				if err := unreadablePackage(cache, args[0]); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				return exitf(1, "no package %s in the local store %s (see `tt-model list`)", args[0], cache.Dir)
			case len(repos) > 1:
				var names []string
				for r := range repos {
					names = append(names, r)
				}
				return exitf(exitInvalid, "several repos hold a package named %s (%s): name the repo", args[0], strings.Join(names, ", "))
			}
			repo, name := match[0].Repo, match[0].Package.Wire.Name
			set, err := openRunners(cmd, true)
			if err != nil {
				return err
			}
			insts, err := set.listAll(cmd.Context())
			set.Close()
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			for _, i := range insts {
				if i.Package == name && i.Running {
					return exitf(1, "%s is serving %s (%s, port %d): `tt-model stop %s` first", i.Name, repo, i.Runner, i.Port, name)
				}
			}
			out := cmd.OutOrStdout()
			remove := func(what, path string) error {
				if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				if err := os.RemoveAll(path); err != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("remove %s: %w", path, err)}
				}
				fmt.Fprintf(out, "removed %s  %s\n", what, path)
				return nil
			}
			root, err := runner.DefaultCacheRoot()
			if err != nil {
				return err
			}
			for _, sp := range match {
				if layout, err := runner.PulledLayout(filepath.Join(root, "images"), sp.Package.LayoutPath()); err == nil {
					if err := remove("image layout of "+repo+"@"+sp.Commit[:12], layout); err != nil {
						return err
					}
				}
			}
			if err := remove(repo, cache.RepoDir(repo)); err != nil {
				return err
			}
			if err := remove("locks of "+repo, filepath.Join(cache.Dir, ".locks", hub.RepoFolderName(repo))); err != nil {
				return err
			}
			if includeWeights {
				pinnedElsewhere := map[string]string{}
				for _, sp := range stored {
					if sp.Repo == repo {
						continue
					}
					for _, w := range sp.Package.WeightRefs() {
						pinnedElsewhere[w.Repo] = sp.Repo
					}
				}
				for _, sp := range match {
					for _, w := range sp.Package.WeightRefs() {
						if err := hub.ValidateRepoID(w.Repo); err != nil {
							return &ExitError{Code: 1, Err: fmt.Errorf("%s pins weights: %w", repo, err)}
						}
						if other, ok := pinnedElsewhere[w.Repo]; ok {
							fmt.Fprintf(out, "kept    %s  (also pinned by %s)\n", w.Repo, other)
							continue
						}
						if err := remove(w.Repo, cache.RepoDir(w.Repo)); err != nil {
							return err
						}
						if err := remove("locks of "+w.Repo, filepath.Join(cache.Dir, ".locks", hub.RepoFolderName(w.Repo))); err != nil {
							return err
						}
					}
				}
			}
			if !keepCache {
				// Only the two caches serve creates there (runner.Spec.StateDir).
				state, err := safename.Join(root, name)
				if err != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("package name: %w", err)}
				}
				for _, sub := range []string{"cache", "weights"} {
					if err := remove(sub+" of "+name, filepath.Join(state, sub)); err != nil {
						return err
					}
				}
				_ = os.Remove(state) // when empty
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&includeWeights, "include-weights", false, "also remove the weights the package pins (unless another stored package pins them)")
	cmd.Flags().BoolVar(&weightsOnly, "weights", false, "the argument is a weights repo ORG/NAME[@REV] of the HF cache to remove, not a package")
	cmd.Flags().BoolVar(&keepCache, "keep-cache", false, "keep ~/.cache/tt-model/<name> (compiled kernels, converted weights)")
	return cmd
}

// unreadablePackage explains a repo of the store that holds a package
// manifest tt-model refuses to load (`list` and rm skip it): rm removes
// nothing a refused manifest names, so the folder is left to delete by hand.
func unreadablePackage(cache hub.Cache, repo string) error {
	if hub.ValidateRepoID(repo) != nil {
		return nil
	}
	snaps, _ := filepath.Glob(filepath.Join(cache.RepoDir(repo), "snapshots", "*", manifest.WireFile))
	for _, wire := range snaps {
		if _, err := runner.LoadPackage(filepath.Dir(wire)); err != nil {
			return fmt.Errorf("%s in the local store holds a package tt-model refuses to read, so rm removes nothing it names: %w; delete %s by hand", repo, err, cache.RepoDir(repo))
		}
	}
	return nil
}
