package commands

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/safename"
	"github.com/ttmodel/tt-model/runner"
)

func newPullCmd() *cobra.Command {
	var withWeights bool
	cmd := &cobra.Command{
		Use:   "pull ORG/NAME[@REV]",
		Short: "Bring a package from the Hub into the local store (the Hugging Face cache)",
		Long: "pull downloads the package repo ORG/NAME at REV (a branch, tag or commit; default main) into the\n" +
			"Hugging Face cache in huggingface_hub's layout (blobs/, refs/, snapshots/): the snapshot folder is\n" +
			"the package, ready for serve, info and profiles. Downloads resume, every file is verified against the\n" +
			"Hub's hashes, and every image blob against its sha256 name. A branch is asked anew each time; a\n" +
			"commit already complete in the cache needs no network. --with-weights also pulls the pinned weights.",
		Example: "  tt-model pull acme/rf-detr\n  tt-model pull acme/rf-detr@dev --with-weights",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, ok := runner.ParseHubRef(args[0])
			if !ok {
				return exitf(exitInvalid, "%q: want ORG/NAME[@REV] of a Hub model repo", args[0])
			}
			if ref.Revision != "" {
				if err := safename.Revision(ref.Revision); err != nil {
					return exitf(exitInvalid, "%s: %v", args[0], err)
				}
			}
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			c := hub.NewClient(cfg)
			pkg, snap, err := runner.FetchPackage(cmd.Context(), c, ref, runner.FetchOptions{Refresh: true, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			out := cmd.OutOrStdout()
			how := hub.FormatBytes(snap.Fetched) + " downloaded"
			if snap.FromCache {
				how = "complete in the store, no network used"
			}
			fmt.Fprintf(out, "%s@%s  %s  %d files  %s\n  %s\n", ref.Repo, snap.Commit, pkg.Wire.Name, len(snap.Files), how, snap.Dir)
			fmt.Fprintf(out, "  image    %s (blobs verified)\n", imageLine(pkg))
			if withWeights {
				snaps, err := runner.PullWeights(cmd.Context(), c, pkg, cmd.ErrOrStderr())
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				for _, s := range snaps {
					fmt.Fprintf(out, "  weights  %s@%s  %d files\n", s.Repo, s.Commit, len(s.Files))
				}
			} else if present, err := runner.WeightsPresent(cmd.Context(), c, pkg); err == nil && !present {
				fmt.Fprintf(out, "  weights  not in the cache yet (serve pulls them; or pull --with-weights)\n")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&withWeights, "with-weights", false, "also pull the package's pinned weights")
	return cmd
}

// imageLine names a package's image: its digest, and the registry when the
// image lives there.
func imageLine(pkg *runner.Package) string {
	img := pkg.Wire.Container.Image
	if pkg.ImageLayout() == "" && img.Registry != "" && img.Registry != "hf" {
		return fmt.Sprintf("%s/%s@%s", img.Registry, img.Repository, img.Digest)
	}
	return img.Digest
}
