package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// The commands flux-core writes in Python print argparse's help: a
// "usage: flux-NAME SUB ..." line, the description, "supported
// subcommands:" for a command group, then "options:". Scripts (and
// flux-core's tests) grep for those words, so those commands' help
// keeps that shape.

// setArgparseHelp gives c and its subcommands argparse-shaped help.
func setArgparseHelp(c *cobra.Command) {
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		writeArgparseHelp(cmd.OutOrStdout(), cmd)
	})
}

// argparseProg is the program name argparse shows: "flux-sproc ps" for
// "flux sproc ps".
func argparseProg(cmd *cobra.Command) string {
	path := strings.Fields(cmd.CommandPath())
	if len(path) < 2 {
		return cmd.CommandPath()
	}
	return strings.Join(append([]string{"flux-" + path[1]}, path[2:]...), " ")
}

func writeArgparseHelp(w io.Writer, cmd *cobra.Command) {
	use := strings.TrimSpace(strings.TrimPrefix(cmd.Use, cmd.Name()))
	if cmd.HasAvailableSubCommands() && use == "" {
		use = "{" + strings.Join(subcommandNames(cmd), ",") + "} ..."
	}
	fmt.Fprintf(w, "usage: %s [-h] %s\n\n", argparseProg(cmd), use)
	desc := cmd.Long
	if desc == "" {
		desc = cmd.Short
	}
	if desc != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(desc))
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintln(w, "supported subcommands:")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-14s %s\n", sub.Name(), sub.Short)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "options:")
	fmt.Fprint(w, cmd.LocalFlags().FlagUsages())
	if inh := cmd.InheritedFlags().FlagUsages(); inh != "" {
		fmt.Fprint(w, inh)
	}
}

func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}
