package commands

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/builder/card"
	"github.com/ttmodel/tt-model/manifest"
)

func newCardCmd() *cobra.Command {
	var out string
	var html bool
	cmd := &cobra.Command{
		Use:   "card DIR [DIR...]",
		Short: "Render the model card of a staged package, a catalog page for several, or the catalog as a static site",
		Long: "card renders README.md of a package staged by `tt-model package` from its\n" +
			"tt_kernel_manifest.json. With several DIRs it renders one catalog page: a row per model\n" +
			"(hardware, profiles, endpoints, status), then each model's sections. With --html it writes\n" +
			"the catalog as a small static site into the folder --out: index.html (a row per package:\n" +
			"kind, hardware, profiles, weights pin, image digest, performance, limitations), a page per\n" +
			"package with its card, and style.css; plain HTML, no script, nothing fetched from elsewhere.\n" +
			"Nothing is written unless every package renders. Warnings about missing card fields go to\n" +
			"stderr.",
		Example: "  tt-model card build/rf-detr\n" +
			"  tt-model card build/rf-detr build/pi05 --out CATALOG.md\n" +
			"  tt-model card --html build/rf-detr build/pi05 --out site/ && python3 -m http.server -d site",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if html && out == "" {
				return &ExitError{Code: 2, Err: errors.New("--html writes a site: give its folder with --out SITE/")}
			}
			wires := make([]*manifest.Wire, 0, len(args))
			for _, dir := range args {
				w, err := manifest.ReadWire(dir)
				if err != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", dir, err)}
				}
				wires = append(wires, w)
			}
			if html {
				files, warnings, err := card.RenderSite(wires)
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				printWarnings(cmd, warnings)
				if err := card.WriteSite(out, files); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s/index.html: %d packages\n", out, len(wires))
				return nil
			}
			var text string
			var warnings []string
			var err error
			if len(wires) == 1 {
				text, warnings, err = card.Render(wires[0])
			} else {
				text, warnings, err = card.RenderCatalog(wires)
			}
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			printWarnings(cmd, warnings)
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
	cmd.Flags().StringVar(&out, "out", "", "write the card to FILE instead of stdout; with --html, the site's folder")
	cmd.Flags().BoolVar(&html, "html", false, "write the catalog as a static site into the folder --out")
	return cmd
}

func printWarnings(cmd *cobra.Command, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
}
