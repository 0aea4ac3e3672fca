package commands

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

func newPsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ps",
		Short:   "List tt-model servers: containers on the Docker engine and host-mode servers",
		Example: "  tt-model ps",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := openRunners(cmd, true)
			if err != nil {
				return err
			}
			defer set.Close()
			insts, err := set.listAll(cmd.Context())
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPROFILE\tRUNNER\tPORT\tCHIPS\tSTATE\tUPTIME\tINSTANCE")
			now := time.Now()
			for _, i := range insts {
				uptime := "-"
				if i.Running {
					uptime = i.Uptime(now).String()
				}
				state := i.State
				switch {
				case i.Orphan != nil:
					state = fmt.Sprintf("orphaned (server pid %d, no supervisor)", i.Orphan.PID)
				case !i.Running && i.ExitCode >= 0:
					state = fmt.Sprintf("%s (%d)", i.State, i.ExitCode)
				}
				if len(i.PortHolders) > 0 {
					state += fmt.Sprintf("; port held by %s", runner.DescribePIDs(i.PortHolders))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", i.Package, i.Profile, i.Runner, i.Port,
					runner.FormatChips(i.Chips), state, uptime, i.Name)
			}
			return tw.Flush()
		},
	}
}
