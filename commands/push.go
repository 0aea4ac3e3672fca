package commands

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/hub"
)

func newPushCmd() *cobra.Command {
	var (
		opts     builder.HubPushOptions
		tags     []string
		noHub    bool
		asJSON   bool
		registry string
	)
	cmd := &cobra.Command{
		Use:   "push DIR",
		Short: "Upload a staged package to its Hugging Face Hub model repo (or its image to an OCI registry)",
		Long: "push uploads DIR, a package staged by `tt-model package`, to the Hub model repo named by the\n" +
			"manifest's repo or --repo, as upstream lays it out: README.md (the card, its quickstart rewritten to\n" +
			"`tt-model serve org/name`), tt_kernel_manifest.json, code/ and image/ (the OCI layout, its blobs as\n" +
			"LFS files), in one commit that also drops code/ and image/ files the package no longer has. Every\n" +
			"image blob is checked against its sha256 name before anything is sent; blobs the Hub already holds are\n" +
			"not sent again, so an interrupted push resumes; a push with nothing changed makes no commit. A new repo\n" +
			"is private unless --public or --publish; --publish also adds the tt-model-catalog tag and needs\n" +
			"card.performance and card.limitations.\n\n" +
			"With --registry HOST/NS (or an image.registry other than hf) the image goes to that OCI registry\n" +
			"(default keychain, as `docker login`) and the Hub repo carries the manifest pointing at it; --no-hub\n" +
			"pushes the image only and prints repo@digest. HF_ENDPOINT and HF_TOKEN (or `tt-model login`) say\n" +
			"which Hub and who.",
		Example: "  tt-model push build/rf-detr\n" +
			"  tt-model push build/rf-detr --repo acme/rf-detr --revision dev --dry-run\n" +
			"  tt-model push build/rf-detr --publish\n" +
			"  tt-model push build/rf-detr --registry ghcr.io/acme --no-hub --tag v1",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if noHub {
				res, err := builder.Push(cmd.Context(), args[0], builder.PushOptions{
					Registry: registry, Tags: tags, Insecure: opts.Insecure, Log: cmd.ErrOrStderr(),
				})
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				if asJSON {
					return writeJSON(out, res)
				}
				fmt.Fprintln(out, res.Reference())
				return nil
			}
			if len(tags) > 0 {
				return exitf(exitInvalid, "--tag names registry tags: use it with --no-hub")
			}
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			opts.Client = hub.NewClient(cfg)
			opts.Registry = registry
			opts.Log = cmd.ErrOrStderr()
			res, err := builder.PushHub(cmd.Context(), args[0], opts)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if asJSON {
				return writeJSON(out, res)
			}
			printPushResult(out, cfg.Endpoint, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Repo, "repo", "", "the Hub model repo org/name (default: the manifest's repo)")
	f.StringVar(&opts.Revision, "revision", "", "the branch to commit to, created when missing (default main)")
	f.BoolVar(&opts.Public, "public", false, "make the repo public")
	f.BoolVar(&opts.Private, "private", false, "make the repo private (a new repo is private by default)")
	f.BoolVar(&opts.Publish, "publish", false, "make the repo public and list it in the tt-model catalog (needs card.performance and card.limitations)")
	f.StringVar(&registry, "registry", "", "HOST/NAMESPACE of an OCI registry for the image (the Hub repo then points at it)")
	f.StringArrayVar(&tags, "tag", nil, "an extra registry tag, with --no-hub (repeatable)")
	f.BoolVar(&noHub, "no-hub", false, "push the image to --registry only, no Hub repo")
	f.BoolVar(&opts.Insecure, "insecure", false, "allow plain HTTP and unverified TLS to the registry")
	f.BoolVar(&opts.DryRun, "dry-run", false, "check and hash the package, send nothing")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func printPushResult(w io.Writer, endpoint string, r *builder.HubPushResult) {
	if r.DryRun {
		fmt.Fprintf(w, "dry run: %s@%s would get %d files (%s); nothing was sent\n", r.Repo, r.Revision, r.Files, hub.FormatBytes(r.Bytes))
		return
	}
	what := "pushed"
	if r.NoChange {
		what = "up to date (nothing changed, no commit made)"
	}
	fmt.Fprintf(w, "%s %s\n", r.Repo, what)
	fmt.Fprintf(w, "  revision  %s @ %s\n", r.Revision, r.Commit)
	fmt.Fprintf(w, "  commit    %s\n", r.CommitURL)
	fmt.Fprintf(w, "  repo      %s/%s (%s", endpoint, r.Repo, r.Visibility)
	if r.Created {
		fmt.Fprint(w, ", created now")
	}
	fmt.Fprintln(w, ")")
	fmt.Fprintf(w, "  sent      %s in %d LFS objects; %d already on the Hub, %d files unchanged, of %d files (%s)\n",
		hub.FormatBytes(r.UploadedBytes), r.LFSUploaded, r.LFSReused, r.Unchanged, r.Files, hub.FormatBytes(r.Bytes))
	if len(r.Deleted) > 0 {
		fmt.Fprintf(w, "  removed   %s\n", strings.Join(r.Deleted, ", "))
	}
	if r.Image != "" {
		fmt.Fprintf(w, "  image     %s\n", r.Image)
	}
	fmt.Fprintf(w, "  serve it  tt-model serve %s\n", r.Repo)
}
