package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

func newWeightsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "weights",
		Short:   "Bring a package's pinned weights into the Hugging Face cache",
		Example: "  tt-model weights pull build/rf-detr\n  tt-model weights verify build/rf-detr --quick",
	}
	cmd.AddCommand(newWeightsPullCmd(), newWeightsImportCmd(), newWeightsVerifyCmd())
	return cmd
}

func newWeightsVerifyCmd() *cobra.Command {
	var quick bool
	cmd := &cobra.Command{
		Use:   "verify MANIFEST|DIR",
		Short: "Check the cached weights of a package against the Hub's hashes, with no network",
		Long: "verify reads every pinned file of the package's weights in the Hugging Face cache and checks it\n" +
			"against the sha256 (LFS files) or git blob id the Hub listed when it was pulled. `weights pull` and\n" +
			"`serve` already re-hash a blob whose size or modification time changed since it was last checked; a\n" +
			"byte changed in place with its mtime kept is only caught here. --quick does the cheap check only.\n" +
			"Exit 1 when a file is missing or corrupt (run `tt-model weights pull` to fetch it again). Generated\n" +
			"test weights (a random checkpoint a demo or test imported) are named as such: their hashes are their\n" +
			"own, not the Hub's.",
		Example: "  tt-model weights verify build/rf-detr\n  tt-model weights verify models/rf-detr/tt-model.yaml --quick",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pkg, err := runner.LoadPackage(args[0])
			if err != nil {
				return packageLoadError(cmd, args[0], err)
			}
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			cache := hub.Cache{Dir: cfg.CacheDir}
			out := cmd.OutOrStdout()
			bad := 0
			for _, ref := range pkg.WeightRefs() {
				commit := ref.Revision
				if !hub.IsCommit(commit) {
					rev := commit
					if rev == "" {
						rev = "main"
					}
					if commit, err = cache.ReadRef(ref.Repo, rev); err != nil || commit == "" {
						fmt.Fprintf(out, "%s@%s  not in the cache %s\n", ref.Repo, rev, cache.Dir)
						bad++
						continue
					}
				}
				rep, err := cache.VerifySnapshot(ref.Repo, commit, ref.AllowPatterns, ref.IgnorePatterns, !quick)
				if err != nil {
					fmt.Fprintf(out, "%s@%s  %v\n", ref.Repo, commit, err)
					bad++
					continue
				}
				status := "ok"
				if len(rep.Missing)+len(rep.Corrupt) > 0 {
					status = "FAILED"
					bad++
				}
				fmt.Fprintf(out, "%s@%s  %d files, %d hashed  %s\n", ref.Repo, commit, len(rep.Files), rep.Hashed, status)
				if what, ok := hub.TestWeightsIn(cache.SnapshotDir(ref.Repo, commit)); ok {
					printTestWeights(out, ref.Repo+"@"+commit, what, args[0])
				}
				for _, m := range rep.Missing {
					fmt.Fprintf(out, "  missing  %s\n", m)
				}
				for _, c := range rep.Corrupt {
					fmt.Fprintf(out, "  corrupt  %s: %v\n", c.Path, c.Err)
				}
			}
			if bad > 0 {
				return exitf(1, "%d weights repo(s) failed verification; `tt-model weights pull %s` fetches what is missing or corrupt", bad, args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "hash only the blobs whose size or mtime changed since they were last verified")
	return cmd
}

func newWeightsImportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import DIR ORG/NAME@COMMIT",
		Short: "Store a local folder in the Hugging Face cache as a pinned commit of a repo",
		Long: "import copies every file under DIR into the Hugging Face cache as if COMMIT of ORG/NAME had been\n" +
			"downloaded (blobs named as the Hub names them, relative snapshot links, refs/main when absent, the file\n" +
			"list), so a package pinning that commit finds its weights complete and needs no network. It is for\n" +
			"weights made locally (a test or demo checkpoint): nothing checks them against the real repo.\n" +
			"Symbolic links are followed inside DIR (and, for a snapshot of another HF cache, inside its repo\n" +
			"folder); a link leaving them, a loop or a special file fails the import with nothing recorded.",
		Example: "  tt-model weights import ./checkpoint Roboflow/rf-detr-base@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, commit, ok := strings.Cut(args[1], "@")
			if !ok {
				return exitf(exitInvalid, "%q: want ORG/NAME@COMMIT", args[1])
			}
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			cache := hub.Cache{Dir: cfg.CacheDir}
			main, err := cache.ReadRef(repo, "main")
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			snap, err := cache.Import(repo, commit, args[0])
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s@%s  %d files imported from %s (local files, not from the Hub)\n  %s\n",
				snap.Repo, snap.Commit, len(snap.Files), args[0], snap.Dir)
			switch main {
			case "":
				fmt.Fprintf(out, "  wrote refs/main -> %s (the cache had no refs/main: a loader naming %s offline now gets these files)\n", snap.Commit, repo)
			case snap.Commit:
			default:
				fmt.Fprintf(out, "  refs/main left at %s\n", main)
			}
			if what, ok := hub.TestWeightsIn(snap.Dir); ok {
				printTestWeights(out, repo+"@"+snap.Commit, what, "")
			}
			return nil
		},
	}
}

func newWeightsPullCmd() *cobra.Command {
	var profile string
	var refresh bool
	cmd := &cobra.Command{
		Use:   "pull MANIFEST|DIR",
		Short: "Download the primary and auxiliary weights at their pinned revisions",
		Long: "pull reads a tt-model.yaml, a tt_kernel_manifest.json or a staged package folder and downloads\n" +
			"its weights into the Hugging Face cache (HF_HUB_CACHE, else $HF_HOME/hub, else\n" +
			"~/.cache/huggingface/hub) in huggingface_hub's layout. Downloads run in parallel, resume from\n" +
			"blobs/<etag>.incomplete after an interruption, and every file is verified (sha256 for LFS files).\n" +
			"A pinned snapshot already complete in the cache needs no network at all; when the Hub cannot be\n" +
			"reached the cache is used only if every pinned file is complete there. A transfer silent for 60 s\n" +
			"is resumed with backoff. HF_TOKEN, HF_ENDPOINT and HF_HUB_OFFLINE are honoured. It then prints the\n" +
			"HF_MODEL the profile's server will get. A cached snapshot of generated test weights (a random\n" +
			"checkpoint a demo or test imported at the pin) is named as such; --refresh removes it, once the Hub\n" +
			"has answered for the revision, and downloads the real files.",
		Example: "  tt-model weights pull models/rf-detr/tt-model.yaml\n  HF_HUB_OFFLINE=1 tt-model weights pull build/rf-detr\n" +
			"  tt-model weights pull --refresh models/rf-detr/tt-model.yaml",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pkg, err := runner.LoadPackage(args[0])
			if err != nil {
				return packageLoadError(cmd, args[0], err)
			}
			prof, launch, err := pkg.Launch(profile)
			if err != nil {
				return &ExitError{Code: exitInvalid, Err: err}
			}
			if len(pkg.WeightRefs()) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s declares no weights\n", pkg.Path)
				return nil
			}
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			client := hub.NewClient(cfg)
			if refresh {
				if err := runner.DropTestWeights(cmd.Context(), client, pkg, cmd.ErrOrStderr()); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
			}
			snaps, err := runner.PullWeights(cmd.Context(), client, pkg, cmd.ErrOrStderr())
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			out := cmd.OutOrStdout()
			for _, s := range snaps {
				how := fmt.Sprintf("%s downloaded", hub.FormatBytes(s.Fetched))
				if s.FromCache {
					how = "complete in the cache, no network used"
				} else if s.Fetched == 0 {
					how = "complete in the cache"
				}
				fmt.Fprintf(out, "%s@%s  %d files  %s\n  %s\n", s.Repo, s.Commit, len(s.Files), how, s.Dir)
				if what, ok := hub.TestWeightsIn(s.Dir); ok {
					printTestWeights(out, s.Repo+"@"+s.Commit, what, args[0])
				}
			}
			dir, err := runner.ServedWeights(pkg, launch.Env, cfg, snaps)
			if err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("profile %s: %w", prof.Name, err)}
			}
			if dir != "" {
				spec := &runner.Spec{Launch: launch, HF: cfg, WeightsDir: dir}
				fmt.Fprintf(out, "profile %s: the server gets HF_MODEL=%s (in a container: %s)\n",
					prof.Name, dir, spec.ServerEnv(runner.ContainerHF, runner.ContainerHF+"/hub", "")["HF_MODEL"])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "", "serve profile whose HF_MODEL to report (default: the package's default profile)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "replace cached generated test weights at the pins with the Hub's files")
	return cmd
}

// printTestWeights says that the cached files of pin (ORG/NAME@COMMIT) are generated test weights,
// and (given the package path) how to get the real ones.
func printTestWeights(w io.Writer, pin, what, pkgPath string) {
	repo, _, _ := strings.Cut(pin, "@")
	fmt.Fprintf(w, "  WARNING: %s\n", hub.TestWeightsNotice(repo, what))
	if pkgPath != "" {
		fmt.Fprintf(w, "  `tt-model weights pull --refresh %s` replaces them with the real files; `tt-model rm --weights %s` removes them\n", pkgPath, pin)
	}
}

// packageLoadError maps a LoadPackage failure to validate's exit codes.
func packageLoadError(cmd *cobra.Command, path string, err error) error {
	var list manifest.ErrorList
	var readErr *manifest.ReadError
	if errors.As(err, &list) || errors.As(err, &readErr) {
		return reportLoadError(cmd.OutOrStdout(), cmd.ErrOrStderr(), path, err, false)
	}
	return &ExitError{Code: 1, Err: err}
}
