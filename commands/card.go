package commands

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/manifest"
)

func newCardCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "card DIR [DIR...]",
		Short: "Render the model card of a staged package, or a catalog page for several",
		Long: "card renders README.md of a package staged by `tt-model package` from its\n" +
			"tt_kernel_manifest.json. With several DIRs it renders one catalog page: a row per model\n" +
			"(hardware, profiles, endpoints, status), then each model's sections. Warnings about missing\n" +
			"card fields go to stderr.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wires := make([]*manifest.Wire, 0, len(args))
			for _, dir := range args {
				w, err := manifest.ReadWire(dir)
				if err != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", dir, err)}
				}
				wires = append(wires, w)
			}
			var text string
			var warnings []string
			var err error
			if len(wires) == 1 {
				text, warnings, err = builder.RenderCard(wires[0])
			} else {
				text, warnings, err = builder.RenderCatalog(wires)
			}
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if out == "" {
				_, err = fmt.Fprint(cmd.OutOrStdout(), text)
				return err
			}
			if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("write %s: %w", out, err)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the card to FILE instead of stdout")
	return cmd
}
