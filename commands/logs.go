package commands

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

func newLogsCmd() *cobra.Command {
	var sel selector
	var follow bool
	cmd := &cobra.Command{
		Use:     "logs NAME",
		Short:   "Print a tt-model server's output (-f to follow it)",
		Example: "  tt-model logs rf-detr\n  tt-model logs rf-detr --profile default --runner docker -f",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInstance(cmd, args[0], sel, func(r runner.Runner, inst *runner.Instance) error {
				err := r.Logs(cmd.Context(), inst, follow, cmd.OutOrStdout())
				var ended *runner.FollowEnded
				if errors.As(err, &ended) {
					fmt.Fprintf(cmd.ErrOrStderr(), "logs: %s\n", ended.Reason)
					return nil
				}
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				return nil
			})
		},
	}
	sel.bind(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until interrupted")
	return cmd
}
