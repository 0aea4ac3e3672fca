package commands

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

func newStopCmd() *cobra.Command {
	var sel selector
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a tt-model server: SIGTERM, SIGKILL after the grace period, then remove it",
		Long: "stop finds the server of package NAME (or the instance named NAME) on the Docker engine or the host,\n" +
			"sends SIGTERM, waits up to --grace (120 s: closing a mesh cleanly takes long), kills it if it is still\n" +
			"there, and removes it. After a forced kill it resets that server's chips with `tt-smi -r`, as upstream.",
		Example: "  tt-model stop rf-detr\n  tt-model stop rf-detr --profile default --runner host --grace 30s",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInstance(cmd, args[0], sel, func(r runner.Runner, inst *runner.Instance) error {
				return stopInstance(cmd, r, inst, grace)
			})
		},
	}
	sel.bind(cmd)
	cmd.Flags().DurationVar(&grace, "grace", runner.StopGrace, "time between SIGTERM and SIGKILL")
	return cmd
}

// stopInstance stops inst with r and prints what the stop did.
func stopInstance(cmd *cobra.Command, r runner.Runner, inst *runner.Instance, grace time.Duration) error {
	if inst.Running {
		fmt.Fprintf(cmd.ErrOrStderr(), "stopping %s (grace %s)\n", inst.Name, grace)
	}
	res, err := r.Stop(cmd.Context(), inst, grace, cmd.ErrOrStderr())
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	printStop(cmd.OutOrStdout(), inst, res, grace)
	return nil
}

// printStop says what the stop did, and only that.
func printStop(out io.Writer, inst *runner.Instance, res runner.StopResult, grace time.Duration) {
	code := "exit code unknown"
	if res.ExitCode >= 0 {
		code = fmt.Sprintf("exit %d", res.ExitCode)
	}
	switch {
	case res.AlreadyExited:
		fmt.Fprintf(out, "%s: had already stopped (%s) before this command; removed\n", inst.Name, code)
	case res.Killed:
		fmt.Fprintf(out, "%s: did not stop within %s: killed (%s) and removed\n", inst.Name, grace, code)
	default:
		fmt.Fprintf(out, "%s: stopped (%s) and removed\n", inst.Name, code)
	}
	if res.Reset != "" {
		fmt.Fprintf(out, "  %s\n", res.Reset)
	}
	for _, d := range res.Detail {
		fmt.Fprintf(out, "  %s\n", d)
	}
}
