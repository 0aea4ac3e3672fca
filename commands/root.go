// Package commands wires the tt-model CLI: one file per command, each a thin
// layer of flags over the packages that do the work (manifest, builder,
// supervisor, hub, …), in the shape of ko's pkg/commands.
package commands

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/internal/version"
)

// ExitError carries a process exit code through cobra's error path.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// exitf builds an ExitError with a formatted message.
func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// newRoot builds the command tree. Every command is added here, in the order
// `tt-model --help` lists them.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:     "tt-model",
		Short:   "Package, ship, serve and supervise models for Tenstorrent hosts",
		Version: version.Version,
		Example: "  tt-model validate models/rf-detr/tt-model.yaml\n" +
			"  tt-model package --container models/rf-detr/tt-model.yaml\n" +
			"  tt-model serve build/rf-detr",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newValidateCmd(),
		newProfilesCmd(),
		newWeightsCmd(),
		newServeCmd(),
		newStopCmd(),
		newPsCmd(),
		newLogsCmd(),
		newPackageCmd(),
		newCardCmd(),
		newPushCmd(),
		newPullCmd(),
		newListCmd(),
		newInfoCmd(),
		newRmCmd(),
		newCurlCmd(),
		newLoginCmd(),
		newSuperviseCmd(),
		newServiceCmd(),
		newHealthCmd(),
		newK8sCmd(),
	)
	checkUsage(root)
	return root
}

// Main runs the CLI with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if isUsageError(cmd, err) {
		fmt.Fprintf(stderr, "tt-model: %v\n\n%s", err, cmd.UsageString())
		return exitUsage
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil && ee.Err.Error() != "" {
			fmt.Fprintln(stderr, "tt-model:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(stderr, "tt-model:", err)
	return 1
}
