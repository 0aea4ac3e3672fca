package commands

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/runner"
)

func newInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info ORG/NAME[@REV]|DIR",
		Short: "Summarize a package: kind, hardware, profiles, weights pin, image digest, card description",
		Long: "info reads the wire manifest of a built package folder, or of a package on the Hub (from the local\n" +
			"store when it is there, else by fetching only tt_kernel_manifest.json), and summarizes it. It also\n" +
			"says whether the pinned weights are complete in the local Hugging Face cache, and whether the cached\n" +
			"ones are generated test weights (a random checkpoint standing in for the repo).",
		Example: "  tt-model info acme/rf-detr\n  tt-model info build/rf-detr --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			c := hub.NewClient(cfg)
			var pkg *runner.Package
			source := args[0]
			if ref, ok := runner.ParseHubRef(args[0]); ok {
				p, snap, err := runner.FetchManifest(cmd.Context(), c, ref)
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				pkg, source = p, fmt.Sprintf("%s@%s", ref.Repo, snap.Commit)
			} else if pkg, err = runner.LoadPackage(args[0]); err != nil {
				return packageLoadError(cmd, args[0], err)
			}
			if pkg.Dir == "" {
				return exitf(exitInvalid, "%s is an authored manifest: info summarizes a built or pushed package (see `tt-model validate`)", args[0])
			}
			s, err := summarizeWireOrExit(pkg.Wire, pkg.Path)
			if err != nil {
				return err
			}
			snaps, present, err := runner.CachedWeights(cmd.Context(), c, pkg)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			info := struct {
				manifestSummary
				Source         string            `json:"source"`
				Image          string            `json:"image"`
				Description    string            `json:"description"`
				WeightsPresent bool              `json:"weights_present"`
				TestWeights    map[string]string `json:"test_weights,omitempty"` // repo: notice
			}{manifestSummary: s, Source: source, Image: imageLine(pkg), WeightsPresent: present, TestWeights: runner.TestWeightsNotices(snaps)}
			if card := pkg.Wire.Container.Card; card != nil {
				info.Description = strings.Join(strings.Fields(card.Description), " ")
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
			weights := info.Weights
			if len(pkg.WeightRefs()) > 0 {
				weights += map[bool]string{true: " (complete in the cache)", false: " (not in the cache)"}[present]
			}
			fmt.Fprintf(tw, "%s\t%s\n  kind\t%s\n  arch\t%s\n  weights\t%s\n  image\t%s\n", info.Name, source, info.Kind, info.Arch, weights, info.Image)
			for _, ref := range pkg.WeightRefs() {
				if n, ok := info.TestWeights[ref.Repo]; ok {
					fmt.Fprintf(tw, "  WARNING\t%s in the cache\n", n)
				}
			}
			if info.Description != "" {
				fmt.Fprintf(tw, "  description\t%s\n", info.Description)
			}
			tw.Flush()
			fmt.Fprintf(w, "  profiles (default: %s)\n", s.DefaultProfile)
			tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
			for _, p := range s.Profiles {
				fmt.Fprintf(tw, "    %s\t%s\tmesh %s (%s)\t%d chips\tport %d\n", p.Name, p.Hardware, p.MeshDevice, p.MeshShape, p.Chips, p.Port)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
