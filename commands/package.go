package commands

import (
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
		base, network, contextDir  string
		asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "package --container FILE",
		Short: "Build a package's OCI image and stage it under --out (every kind)",
		Long: "package builds <out>/<name>/ for a manifest of any kind: code/ (the source allowlists), image/ (an OCI\n" +
			"layout), README.md (the model card) and tt_kernel_manifest.json.\n\n" +
			"tt-go-server: tt-model and tt-model-server on runtime.base, assembled with go-containerregistry without\n" +
			"a daemon, reproducible with SOURCE_DATE_EPOCH (default the commit time of the package's checkout);\n" +
			"verified with tt-model-server --verify and the verify list (shell commands).\n" +
			"http-server, tt-dit-server, vllm-plugin, vllm-fork: a build context as upstream renders it\n" +
			"(Dockerfile, install_engine.sh, verify.sh, serve-<profile>.sh, code/) on a base with bash and Python\n" +
			"(--base or runtime.base; this tool does not build tt-metal). When install_engine.sh has nothing to do\n" +
			"(no packages, lock, wheels or engine) the image is assembled without a daemon, reproducibly; else the\n" +
			"Docker engine builds the Dockerfile (BuildKit through its API). verify.sh runs the kind's checks and\n" +
			"the verify list (Python statements, as upstream).\n\n" +
			"Verify runs on the Docker engine when one answers, else in the unpacked image; a failure names the\n" +
			"step and leaves the previous <out>/<name>/ untouched. Exit 2 for an invalid manifest, 1 otherwise.",
		Example: "  tt-model package --container models/rf-detr/tt-model.yaml\n" +
			"  tt-model package --container my-dit/tt-model.yaml --base ghcr.io/acme/tt-metal-runtime:v0.59 --context /tmp/ctx",
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
				Base: base, BuildNetwork: network, Context: contextDir,
			})
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
	cmd.Flags().StringVar(&profile, "profile", "", "the serve profile a plain docker run of the image serves, its argv and env (default: the manifest's default)")
	cmd.Flags().StringVar(&verify, "verify-in", builder.VerifyAuto, "where to verify: docker, rootfs, or empty for docker when reachable else rootfs")
	cmd.Flags().StringVar(&base, "base", "", "base image, overriding runtime.base: a registry reference, an OCI layout directory, a docker-archive or an image in the Docker engine")
	cmd.Flags().StringVar(&network, "build-network", "", "network of the engine build's RUN steps (default, none or host; default: the engine's)")
	cmd.Flags().StringVar(&contextDir, "context", "", "also write the rendered build context of a Python kind to this folder (replaced)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a machine-readable summary on stdout")
	return cmd
}

func printPackageResult(w io.Writer, r *builder.Result) {
	fmt.Fprintf(w, "%s\n", r.Dir)
	fmt.Fprintf(w, "  image     %s\n", r.Image)
	fmt.Fprintf(w, "  digest    %s\n", r.Digest)
	fmt.Fprintf(w, "  kind      %s, built %s\n", r.Kind, r.BuiltWith)
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
