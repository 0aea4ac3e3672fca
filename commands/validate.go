package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/manifest"
)

// Exit codes of validate: 0 valid, 1 unreadable, 2 invalid.
const (
	exitUnreadable = 1
	exitInvalid    = 2
)

func newValidateCmd() *cobra.Command {
	var checkSources, asJSON bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a tt-model.yaml against the schema and the semantic rules",
		Long: "validate reads a tt-model.yaml as Tenstorrent's tt-model does and reports every problem with\n" +
			"file:line:column and the field path. Exit 0 when valid, 2 when invalid, 1 when unreadable.",
		Example: "  tt-model validate models/rf-detr/tt-model.yaml\n  tt-model validate my-dit/tt-model.yaml --check-sources --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := manifest.Load(args[0], manifest.Options{CheckSources: checkSources})
			if err != nil {
				return reportLoadError(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], err, asJSON)
			}
			summary, err := summarize(m)
			if err != nil {
				return &ExitError{Code: exitInvalid, Err: err}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), summary)
			}
			printSummary(cmd.OutOrStdout(), summary)
			return nil
		},
	}
	cmd.Flags().BoolVar(&checkSources, "check-sources", false, "also require every local source path to exist (relative roots resolve against the working directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a machine-readable result")
	return cmd
}

// loadManifest loads FILE for commands that need a valid manifest, mapping
// failures to validate's exit codes.
func loadManifest(stderr io.Writer, path string, opts manifest.Options) (*manifest.Manifest, error) {
	m, err := manifest.Load(path, opts)
	if err != nil {
		return nil, reportLoadError(io.Discard, stderr, path, err, false)
	}
	return m, nil
}

// reportLoadError prints a load failure and returns the ExitError for it.
func reportLoadError(stdout, stderr io.Writer, path string, err error, asJSON bool) error {
	var list manifest.ErrorList
	var readErr *manifest.ReadError
	switch {
	case errors.As(err, &list):
		if asJSON {
			if werr := writeJSON(stdout, jsonErrors(list)); werr != nil {
				return werr
			}
		} else {
			fmt.Fprintln(stderr, list.Error())
		}
		return &ExitError{Code: exitInvalid, Err: fmt.Errorf("%s: %d problem(s)", path, len(list))}
	case errors.As(err, &readErr):
		if asJSON {
			_ = writeJSON(stdout, map[string]any{"valid": false, "file": path, "error": readErr.Error()})
		}
		return &ExitError{Code: exitUnreadable, Err: readErr}
	}
	return &ExitError{Code: exitUnreadable, Err: err}
}

type jsonError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

func jsonErrors(list manifest.ErrorList) map[string]any {
	out := make([]jsonError, len(list))
	for i, e := range list {
		out[i] = jsonError{File: e.File, Line: e.Pos.Line, Column: e.Pos.Col, Path: e.Path, Message: e.Msg}
	}
	return map[string]any{"valid": false, "errors": out}
}

// profileSummary is one resolved profile as validate and profiles show it.
type profileSummary struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Hardware    string            `json:"hardware"`
	MeshDevice  string            `json:"mesh_device"`
	MeshShape   string            `json:"mesh_shape"`
	Chips       int               `json:"chips"`
	Port        int               `json:"port"`
	Default     bool              `json:"default"`
	Env         map[string]string `json:"env"`
}

type manifestSummary struct {
	Valid          bool             `json:"valid"`
	File           string           `json:"file"`
	Name           string           `json:"name"`
	Repo           string           `json:"repo"`
	Kind           string           `json:"kind"`
	Arch           string           `json:"arch"`
	Weights        string           `json:"weights"`
	TTMetal        string           `json:"tt_metal"`
	DefaultProfile string           `json:"default_profile"`
	Profiles       []profileSummary `json:"profiles"`
}

func summarize(m *manifest.Manifest) (manifestSummary, error) {
	s, err := summarizeWire(m.ToWire(manifest.WireInfo{}), m.File)
	s.Repo, s.TTMetal = m.Repo, m.Source.TTMetal.String()
	return s, err
}

// summarizeWire summarizes a published manifest (a built or pulled package)
// as validate and profiles show an authored one.
func summarizeWire(w *manifest.Wire, file string) (manifestSummary, error) {
	c := w.Container
	s := manifestSummary{Valid: true, File: file, Name: w.Name, Kind: c.Kind, Arch: w.Arch, TTMetal: w.TTMetalVersion,
		DefaultProfile: c.DefaultProfileName()}
	s.Repo, _ = c.Built["repo"].(string)
	repo := ""
	if w.Weights != nil {
		s.Weights, repo = weightsPin(w.Weights.Ref()), w.Weights.Repo
	}
	if model, ok := c.Runtime["model"].(string); ok && c.Kind == manifest.KindGoServer {
		s.Kind += " (model " + model + ")"
	}
	for _, p := range c.Profiles() {
		r, err := c.ResolveProfile(p.Name)
		if err != nil {
			return s, err
		}
		ps := profileSummary{Name: r.Name, Description: r.Description, Hardware: r.Hardware, MeshDevice: r.MeshDevice,
			Default: r.Name == s.DefaultProfile}
		if rows, cols, err := manifest.MeshShape(r.MeshDevice); err == nil {
			ps.MeshShape = fmt.Sprintf("%dx%d", rows, cols)
		}
		ps.Chips, _ = manifest.ChipCount(r.Hardware)
		if l, err := manifest.LaunchFor(c.Kind, c.Runtime, repo, r); err == nil {
			ps.Env, ps.Port = l.Env, l.Port
		}
		s.Profiles = append(s.Profiles, ps)
	}
	return s, nil
}

func weightsPin(w manifest.WeightsRef) string {
	if w.Revision == "" {
		return w.Repo + " (unpinned: the default branch at download time)"
	}
	return w.Repo + "@" + w.Revision
}

func printSummary(w io.Writer, s manifestSummary) {
	fmt.Fprintf(w, "%s: valid\n", s.File)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "  name\t%s\n  repo\t%s\n  kind\t%s\n  arch\t%s\n  weights\t%s\n  tt-metal\t%s\n", s.Name, s.Repo, s.Kind, s.Arch, s.Weights, s.TTMetal)
	tw.Flush()
	fmt.Fprintf(w, "  profiles (default: %s)\n", s.DefaultProfile)
	tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "    NAME\tHARDWARE\tMESH\tSHAPE\tCHIPS\tPORT\t")
	for _, p := range s.Profiles {
		mark := ""
		if p.Default {
			mark = "(default)"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%d\t%d\t%s\n", p.Name, p.Hardware, p.MeshDevice, p.MeshShape, p.Chips, p.Port, mark)
	}
	tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
