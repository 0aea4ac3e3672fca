package commands

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/builder"
)

func newPushCmd() *cobra.Command {
	var (
		registry string
		tags     []string
		insecure bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "push DIR",
		Short: "Push the image of a staged package to an OCI registry",
		Long: "push uploads DIR/image (a package staged by `tt-model package`) to the registry named by the\n" +
			"manifest's image.registry or --registry HOST/NAMESPACE, as <repository>:<digest[:12]> plus every\n" +
			"--tag, with the default keychain (docker login) and retries. It prints repo@digest.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := builder.Push(cmd.Context(), args[0], builder.PushOptions{
				Registry: registry, Tags: tags, Insecure: insecure, Log: cmd.ErrOrStderr(),
			})
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Reference())
			return nil
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "", "HOST/NAMESPACE to push to (default: the manifest's image.registry)")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "an extra tag (repeatable)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow plain HTTP and unverified TLS to the registry")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print repository, digest and tags as JSON")
	return cmd
}
