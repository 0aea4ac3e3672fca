package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

func newProfilesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "profiles FILE|DIR|ORG/NAME[@REV]",
		Short: "List a package's serve profiles with their hardware and resolved server environment",
		Long: "profiles reads an authored tt-model.yaml, a built package (its folder or tt_kernel_manifest.json),\n" +
			"or a package pushed to the Hub (from the local store, else only its manifest is fetched).",
		Example: "  tt-model profiles models/rf-detr/tt-model.yaml\n  tt-model profiles build/rf-detr\n  tt-model profiles acme/rf-detr --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := packageSummary(cmd, args[0], asJSON)
			if err != nil {
				return err
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

// packageSummary summarizes what target names: an authored manifest, a built
// package, or ORG/NAME[@REV] on the Hub.
func packageSummary(cmd *cobra.Command, target string, asJSON bool) (manifestSummary, error) {
	if ref, ok := runner.ParseHubRef(target); ok {
		cfg, err := hub.ConfigFromEnv(os.Getenv)
		if err != nil {
			return manifestSummary{}, err
		}
		pkg, _, err := runner.FetchManifest(cmd.Context(), hub.NewClient(cfg), ref)
		if err != nil {
			return manifestSummary{}, &ExitError{Code: 1, Err: err}
		}
		return summarizeWireOrExit(pkg.Wire, pkg.Path)
	}
	pkg, err := runner.LoadPackage(target)
	if err != nil {
		var list manifest.ErrorList
		var readErr *manifest.ReadError
		if errors.As(err, &list) || errors.As(err, &readErr) {
			return manifestSummary{}, reportLoadError(cmd.OutOrStdout(), cmd.ErrOrStderr(), target, err, asJSON)
		}
		return manifestSummary{}, &ExitError{Code: 1, Err: err}
	}
	if pkg.Dir == "" { // authored: the repo and tree pin come from the YAML
		m, err := manifest.Load(pkg.Path, manifest.Options{})
		if err != nil {
			return manifestSummary{}, reportLoadError(cmd.OutOrStdout(), cmd.ErrOrStderr(), target, err, asJSON)
		}
		s, err := summarize(m)
		if err != nil {
			return s, &ExitError{Code: exitInvalid, Err: err}
		}
		return s, nil
	}
	return summarizeWireOrExit(pkg.Wire, pkg.Path)
}

func summarizeWireOrExit(w *manifest.Wire, file string) (manifestSummary, error) {
	s, err := summarizeWire(w, file)
	if err != nil {
		return s, &ExitError{Code: exitInvalid, Err: err}
	}
	return s, nil
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
