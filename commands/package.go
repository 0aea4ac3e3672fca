package commands

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/manifest"

	"github.com/ttmodel/tt-model/internal/version"
)

func newPackageCmd() *cobra.Command {
	var (
		file, out, profile, verify string
		asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "package --container FILE",
		Short: "Build a package's OCI image without a daemon and stage it under --out",
		Long: "package builds <out>/<name>/ for a tt-go-server manifest: code/ (the source allowlists), image/\n" +
			"(an OCI layout built with go-containerregistry, reproducible with SOURCE_DATE_EPOCH, default the\n" +
			"commit time of the package's checkout), README.md (the model card) and tt_kernel_manifest.json.\n" +
			"The image is verified (tt-model-server --verify and the manifest's verify list) on the Docker\n" +
			"engine when one answers, else in the unpacked image; a failure leaves the previous <out>/<name>/\n" +
			"untouched. Exit 2 for an invalid manifest, 1 for any other failure.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return exitf(exitInvalid, "--container FILE is required")
			}
			m, err := loadManifest(cmd.ErrOrStderr(), file, manifest.Options{CheckSources: true})
			if err != nil {
				return err
			}
			exe, _ := os.Executable()
			progress := cmd.ErrOrStderr()
			res, err := builder.Package(cmd.Context(), builder.Options{
				Manifest: m, OutDir: out, Profile: profile, ToolVersion: version.Version, Executable: exe,
				SourceDateEpoch: os.Getenv("SOURCE_DATE_EPOCH"), Verify: verify, Log: progress,
			})
			if errors.Is(err, builder.ErrKindNotBuilt) {
				return &ExitError{Code: 1, Err: err}
			}
			if err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("package %s: %w", file, err)}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			printPackageResult(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "container", "", "the tt-model.yaml to package")
	cmd.Flags().StringVar(&out, "out", "build", "parent directory of the staged <name>/")
	cmd.Flags().StringVar(&profile, "profile", "", "the serve profile whose env the image carries (default: the manifest's default)")
	cmd.Flags().StringVar(&verify, "verify-in", builder.VerifyAuto, "where to verify: docker, rootfs, or empty for docker when reachable else rootfs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a machine-readable summary on stdout")
	return cmd
}

func printPackageResult(w io.Writer, r *builder.Result) {
	fmt.Fprintf(w, "%s\n", r.Dir)
	fmt.Fprintf(w, "  image     %s\n", r.Image)
	fmt.Fprintf(w, "  digest    %s\n", r.Digest)
	fmt.Fprintf(w, "  base      %s\n", r.Base)
	fmt.Fprintf(w, "  size      %d bytes compressed, %d uncompressed, %d layers of ours\n", r.Compressed, r.Uncompressed, len(r.Layers))
	for _, b := range r.Binaries {
		fmt.Fprintf(w, "  binary    %s (%s, %d bytes, static=%v)\n", b.ImagePath, b.From, b.Size, b.Static)
	}
	fmt.Fprintf(w, "  verified  in %s\n", r.VerifiedIn)
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  warning   %s\n", warn)
	}
}
