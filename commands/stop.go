package commands

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

func newStopCmd() *cobra.Command {
	var profile string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a tt-model server: SIGTERM, SIGKILL after the grace period, then remove it",
		Long: "stop finds the server of package NAME (or the instance named NAME) on the Docker engine or the host,\n" +
			"sends SIGTERM, waits up to --grace (120 s: closing a mesh cleanly takes long), kills it if it is still\n" +
			"there, and removes it. After a forced kill it resets that server's chips with `tt-smi -r`, as upstream.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInstance(cmd, args[0], profile, func(r runner.Runner, inst *runner.Instance) error {
				return stopInstance(cmd, r, inst, grace)
			})
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "", "the profile, when NAME runs under several")
	cmd.Flags().DurationVar(&grace, "grace", runner.StopGrace, "time between SIGTERM and SIGKILL")
	return cmd
}

// stopInstance stops inst with r and prints how it ended.
func stopInstance(cmd *cobra.Command, r runner.Runner, inst *runner.Instance, grace time.Duration) error {
	if inst.Running {
		fmt.Fprintf(cmd.ErrOrStderr(), "stopping %s (grace %s)\n", inst.Name, grace)
	}
	res, err := r.Stop(cmd.Context(), inst, grace, cmd.ErrOrStderr())
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	out := cmd.OutOrStdout()
	switch {
	case res.Killed:
		fmt.Fprintf(out, "%s: killed after %s and removed\n", inst.Name, grace)
	case res.ExitCode >= 0:
		fmt.Fprintf(out, "%s: stopped (exit %d) and removed\n", inst.Name, res.ExitCode)
	default:
		fmt.Fprintf(out, "%s: stopped and removed\n", inst.Name)
	}
	if res.Reset != "" {
		fmt.Fprintf(out, "  %s\n", res.Reset)
	}
	return nil
}
