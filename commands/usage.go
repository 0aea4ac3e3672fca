package commands

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ttmodel/tt-model/internal/suggest"
)

// exitUsage is the exit code of a command line that does not parse: an
// unknown command or flag, a missing or extra argument.
const exitUsage = 2

// usageError is a command line that does not parse; Main prints the
// command's usage after it.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// checkUsage makes every command of the tree report a bad command line as a
// usageError, with suggestions for a mistyped flag or subcommand: cobra
// suggests subcommands only at the root, and flags never.
func checkUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{err: fmt.Errorf("%w%s", err, suggestFlag(c, err))}
	})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasParent() && c.HasSubCommands() && !c.Runnable():
			// A group (tt-model weights): its help without a subcommand,
			// an unknown one named with the nearest ones.
			c.Args = func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return nil
				}
				return &usageError{err: fmt.Errorf("unknown command %q for %q%s", args[0], c.CommandPath(), suggestions(c.SuggestionsFor(args[0])))}
			}
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		case c.Args != nil:
			check := c.Args
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return &usageError{err: err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// suggestFlag names the flags of c nearest to the unknown one in err.
func suggestFlag(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	near := suggest.Near(name, names)
	for i, n := range near {
		near[i] = "--" + n
	}
	return suggestions(near)
}

// suggestions is cobra's "Did you mean this?" block for names, or "".
func suggestions(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n\t" + strings.Join(names, "\n\t")
}

// isUsageError reports whether err, returned for cmd, is a command line
// that does not parse: a usageError, or cobra's unknown command at the root
// (the one error a command without RunE returns).
func isUsageError(cmd *cobra.Command, err error) bool {
	var ue *usageError
	return errors.As(err, &ue) || (cmd != nil && !cmd.Runnable())
}
