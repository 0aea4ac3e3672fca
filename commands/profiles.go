package commands

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/manifest"
)

func newProfilesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "profiles FILE",
		Short: "List a package's serve profiles with their hardware and resolved server environment",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := manifest.Load(args[0], manifest.Options{})
			if err != nil {
				return reportLoadError(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], err, asJSON)
			}
			s, err := summarize(m)
			if err != nil {
				return &ExitError{Code: exitInvalid, Err: err}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), s.Profiles)
			}
			printProfiles(cmd.OutOrStdout(), s)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the profiles as JSON")
	return cmd
}

func printProfiles(w io.Writer, s manifestSummary) {
	for i, p := range s.Profiles {
		if i > 0 {
			fmt.Fprintln(w)
		}
		mark := ""
		if p.Default {
			mark = " (default)"
		}
		fmt.Fprintf(w, "%s%s\n", p.Name, mark)
		if p.Description != "" {
			fmt.Fprintln(w, indent(p.Description, "  "))
		}
		fmt.Fprintf(w, "  hardware %s, mesh %s (%s), %d chips, port %d\n", p.Hardware, p.MeshDevice, p.MeshShape, p.Chips, p.Port)
		keys := make([]string, 0, len(p.Env))
		for k := range p.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, p.Env[k])
		}
	}
}
