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

func newListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the packages in the local store (pulled from the Hub into the Hugging Face cache)",
		Long: "list shows every tt-model package in the Hugging Face cache (HF_HUB_CACHE, else $HF_HOME/hub): its\n" +
			"repo, revision (the branches pointing at it), kind, profiles, image digest, size on disk, and whether\n" +
			"its pinned weights are complete in the cache. It uses no network.",
		Example: "  tt-model list\n  tt-model list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			c := hub.NewClient(cfg)
			stored, err := runner.StoredPackages(c.Cache())
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			type row struct {
				Repo     string   `json:"repo"`
				Revision string   `json:"revision"`
				Refs     []string `json:"refs"`
				Name     string   `json:"name"`
				Kind     string   `json:"kind"`
				Profiles []string `json:"profiles"`
				Image    string   `json:"image"`
				Size     int64    `json:"size"`
				Weights  bool     `json:"weights_present"`
				Dir      string   `json:"dir"`
			}
			var rows []row
			for _, sp := range stored {
				present, err := runner.WeightsPresent(cmd.Context(), c, sp.Package)
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				r := row{Repo: sp.Repo, Revision: sp.Commit, Refs: sp.Refs, Name: sp.Package.Wire.Name, Image: imageLine(sp.Package),
					Size: sp.Size, Weights: present, Dir: sp.Dir, Kind: sp.Package.Wire.Container.Kind}
				if m, ok := sp.Package.Wire.Container.Runtime["model"].(string); ok {
					r.Kind += "/" + m
				}
				for _, p := range sp.Package.Wire.Container.Profiles() {
					r.Profiles = append(r.Profiles, p.Name)
				}
				rows = append(rows, r)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "REPO\tREVISION\tNAME\tKIND\tPROFILES\tIMAGE\tSIZE\tWEIGHTS")
			for _, r := range rows {
				rev := r.Revision[:12]
				if len(r.Refs) > 0 {
					rev = strings.Join(r.Refs, ",") + " (" + rev + ")"
				}
				weights := "missing"
				if r.Weights {
					weights = "present"
				}
				img := r.Image
				if i := strings.LastIndex(img, ":"); i >= 0 && len(img)-i > 13 {
					img = img[:i+13]
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Repo, rev, r.Name, r.Kind, strings.Join(r.Profiles, ","), img, hub.FormatBytes(r.Size), weights)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the packages as JSON")
	return cmd
}
