package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// expandAbbrevs lets every command take an unambiguous prefix of a long
// option, as flux-core's do (Python's argparse and getopt_long both
// allow it: flux resource list --state for --states, flux job attach
// --show-event for --show-events): each such prefix in args
// is replaced by the option's full name. Options after the first
// argument of a command that stops there (flux submit's job command) and
// after "--" are left alone (expansion stops at the first argument).
func expandAbbrevs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == root {
		return args
	}
	if cmd.DisableFlagParsing {
		return args // its arguments are another program's
	}
	// skip the command path (flux resource list: two words)
	depth := 0
	for c := cmd; c != root; c = c.Parent() {
		depth++
	}
	out := append([]string(nil), args...)
	flags := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	flags.AddFlagSet(cmd.Flags())
	flags.AddFlagSet(cmd.InheritedFlags())
	seen := 0
	for i := 0; i < len(out); i++ {
		a := out[i]
		if seen < depth && !strings.HasPrefix(a, "-") {
			seen++
			continue
		}
		switch {
		case a == "--":
			return out
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			f := flags.Lookup(name)
			if f == nil {
				if full := uniquePrefix(flags, name); full != "" {
					f = flags.Lookup(full)
					out[i] = "--" + full
					if hasVal {
						out[i] += "=" + val
					}
				}
			}
			if f != nil && f.NoOptDefVal == "" && !hasVal {
				i++ // its value
			}
		case strings.HasPrefix(a, "-") && len(a) == 2:
			if f := flags.ShorthandLookup(a[1:]); f != nil && f.NoOptDefVal == "" {
				i++
			}
		case strings.HasPrefix(a, "-"):
		default:
			return out
		}
	}
	return out
}

// uniquePrefix returns the one long option of flags that starts with
// prefix, or "" if none or several do.
func uniquePrefix(flags *pflag.FlagSet, prefix string) string {
	if prefix == "" {
		return ""
	}
	match := ""
	flags.VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, prefix) {
			if match != "" {
				match = "\x00" // ambiguous
				return
			}
			match = f.Name
		}
	})
	if match == "\x00" {
		return ""
	}
	return match
}
