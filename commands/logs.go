package commands

import (
	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

func newLogsCmd() *cobra.Command {
	var profile string
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print a tt-model server's output (-f to follow it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInstance(cmd, args[0], profile, func(r runner.Runner, inst *runner.Instance) error {
				if err := r.Logs(cmd.Context(), inst, follow, cmd.OutOrStdout()); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "", "the profile, when NAME runs under several")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until interrupted")
	return cmd
}
