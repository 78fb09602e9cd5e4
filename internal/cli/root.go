// Package cli implements the flux command line. Each subcommand lives in its
// own file; cobra only wires flags to functions that take their inputs and
// an io.Writer so tests can call them directly.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit code out of a command without printing
// anything more (the command already reported what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode returns an error that makes Main exit with code without an
// extra message.
func exitCode(code int) error { return exitError{code: code} }

// exitCodeOrNil is exitCode, nil for 0.
func exitCodeOrNil(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

// command is a top-level subcommand: its name and its constructor.
type command struct {
	name string
	new  func() *cobra.Command
}

// commandTable lists every top-level subcommand, in the order help shows
// them. Add new commands here; there is no init()-time registration. The
// name must be the command's Name() (a test checks).
var commandTable = []command{
	{"version", newVersionCmd},
	{"broker", newBrokerCmd},
	{"start", newStartCmd},
	{"getattr", newGetattrCmd},
	{"setattr", newSetattrCmd},
	{"lsattr", newLsattrCmd},
	{"R", newRCmd},
	{"job", newJobCmd},
	{"jobspec", newJobspecCmd}, {"submit", newSubmitCmd}, {"run", newRunCmd}, {"bulksubmit", newBulksubmitCmd}, {"multi-prog", newMultiProgCmd}, {"capacitor", newCapacitorCmd}, {"mini", newMiniCmd},
	{"cancel", newCancelCmd}, {"update", newUpdateCmd}, {"watch", newWatchCmd},
	{"batch", newBatchCmd}, {"alloc", newAllocCmd}, {"batch-exec", newBatchExecCmd}, {"proxy", newProxyCmd}, {"uri", newURICmd}, {"pstree", newPstreeCmd},
	{"jobs", newJobsCmd}, {"pgrep", newPgrepCmd}, {"pkill", newPkillCmd}, {"jobtap", newJobtapCmd}, {"queue", newQueueCmd}, {"pool", newPoolCmd}, {"usage", newUsageCmd}, {"account", newAccountCmd}, {"top", newTopCmd},
	{"hostlist", newHostlistCmd},
	{"ping", newPingCmd}, {"event", newEventCmd}, {"dmesg", newDmesgCmd}, {"logger", newLoggerCmd}, {"module", newModuleCmd},
	{"overlay", newOverlayCmd}, {"uptime", newUptimeCmd}, {"shutdown", newShutdownCmd}, {"keygen", newKeygenCmd},
	{"exec", newExecCmd}, {"sproc", newSprocCmd}, {"config", newConfigCmd}, {"shell", newShellCmd},
	{"content", newContentCmd},
	{"kvs", newKVSCmd}, {"dump", newDumpCmd}, {"restore", newRestoreCmd}, {"archive", newArchiveCmd},
	{"resource", newResourceCmd}, {"startlog", newStartlogCmd},
	{"python", newPythonCmd}, {"env", newEnvCmd}, {"modprobe", newModprobeCmd}, {"fortune", newFortuneCmd},
	{"web", newWebCmd},
}

// commands builds every top-level subcommand.
func commands() []*cobra.Command {
	out := make([]*cobra.Command, len(commandTable))
	for i, c := range commandTable {
		out[i] = c.new()
	}
	return out
}

// newRoot builds the flux command tree with the given streams.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := newBareRoot(stdin, stdout, stderr)
	for _, c := range commands() {
		root.AddCommand(c)
	}
	return root
}

// newRootFor builds the command tree args need: only the named command
// when args start with one (building every command's flags is a good
// part of a short command's start-up), the whole tree otherwise (help,
// completion, a mistyped name and its suggestions).
func newRootFor(args []string, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	if len(args) > 0 {
		for _, c := range commandTable {
			if c.name == args[0] {
				root := newBareRoot(stdin, stdout, stderr)
				root.AddCommand(c.new())
				return root
			}
		}
	}
	return newRoot(stdin, stdout, stderr)
}

func newBareRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "flux",
		Short: "fluxgo: the Flux resource and job management framework",
		Long: `flux is the single fluxgo binary: the command-line tool, the broker
and the job shell of a Flux instance.

Run 'flux help COMMAND' for the options of a command.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetHelpCommand(newHelpCmd())
	return root
}

// newHelpCmd is flux help [COMMAND...]: the help of a command, or of
// flux. An unknown command is an error (exit 1), not the command list.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			if len(args) == 0 {
				err := root.Help()
				writeCmdhelp(c.OutOrStdout())
				return err
			}
			if len(args) == 1 && strings.Contains(args[0], "_") {
				// an API call's page (flux help flux_open)
				if code, ok := manHelp(args[0], true); ok {
					return exitCodeOrNil(code)
				}
			}
			cmd, rest, err := root.Find(args)
			if err != nil || cmd == nil || cmd == root || len(rest) > 0 {
				// flux-core shows man flux-CMD, and exits as man does
				if code, ok := manHelp("flux-"+strings.Join(args, "-"), true); ok {
					return exitCodeOrNil(code)
				}
				fmt.Fprintf(c.ErrOrStderr(), "flux-help: no help for %q: unknown command (flux help lists the commands)\n", strings.Join(args, " "))
				return exitCode(1)
			}
			if code, ok := manHelp("flux-"+strings.Join(args, "-"), false); ok {
				return exitCodeOrNil(code)
			}
			return cmd.Help()
		},
	}
}

// colorArgs rewrites -LWHEN (flux-core's attached form of -L,--color[=WHEN],
// which the flag parser would read as -L followed by other short flags)
// to --color=WHEN, for the commands that have that option.
func colorArgs(args []string) []string {
	if len(args) == 0 {
		return args
	}
	switch args[0] {
	case "dmesg", "overlay", "resource":
	case "job":
		if len(args) < 2 || (args[1] != "eventlog" && args[1] != "wait-event") {
			return args
		}
	default:
		return args
	}
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == "--" {
			break
		}
		if w, ok := strings.CutPrefix(a, "-L"); ok && (w == "always" || w == "never" || w == "auto") {
			out[i] = "--color=" + w
		}
	}
	return out
}

// Main runs the flux command line with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && strings.Contains(args[0], "/") {
		// flux /path/to/prog: run it in flux's environment
		if err := execPathCommand(args); err != nil {
			fmt.Fprintf(stderr, "flux: %v\n", err)
			return 127
		}
	}
	root := newRootFor(args, stdin, stdout, stderr)
	for _, c := range root.Commands() {
		requireSubcommand(c)
		usageOnArgErrors(c)
		if pythonStyle["flux-"+c.Name()] {
			setArgparseHelp(c)
		}
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.SetArgs(expandAbbrevs(root, jobsWidthArgs(colorArgs(args))))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if code := interruptedStatus(); code != 0 {
		return code
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// errors are reported by the top-level command: flux-event, not
	// flux-pub
	name := topName(cmd)
	if pythonStyle[name] && !errors.As(err, new(usageError)) {
		// flux-core writes these commands in Python, whose logger
		// prefixes the level: scripts grep for "flux-submit: ERROR:"
		fmt.Fprintf(stderr, "%s: ERROR: %v\n", name, err)
	} else {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	if errors.As(err, new(usageError)) {
		// as flux-core's commands do: what was wrong, then how to call it
		fmt.Fprintf(stderr, "Usage: %s\n", cmd.UseLine())
	}
	return 1
}

// pythonStyle are the commands flux-core writes in Python (src/cmd/*.py):
// their errors read "flux-NAME: ERROR: message".
var pythonStyle = map[string]bool{
	"flux-admin": true, "flux-alloc": true, "flux-batch": true, "flux-bulksubmit": true,
	"flux-cancel": true, "flux-fortune": true, "flux-hostlist": true, "flux-housekeeping": true,
	"flux-jobs": true, "flux-jobtap": true, "flux-modprobe": true, "flux-multi-prog": true,
	"flux-pgrep": true, "flux-pkill": true, "flux-post-job-event": true, "flux-pstree": true,
	"flux-queue": true, "flux-resource": true, "flux-run": true, "flux-sproc": true,
	"flux-submit": true, "flux-update": true, "flux-uri": true, "flux-watch": true,
}

// usageError is a command line that does not fit the command (an
// unknown subcommand or option, a wrong number of arguments): reported
// with the command's usage line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageOnArgErrors makes the argument checks of c and its subcommands
// return usageErrors.
func usageOnArgErrors(c *cobra.Command) {
	for _, sub := range c.Commands() {
		usageOnArgErrors(sub)
	}
	check := c.Args
	if check == nil {
		return // cobra's own check: its errors are flagged in Main
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// topName is the name a command reports its errors under: that of its
// top-level command (flux-event, not flux-pub), or flux.
func topName(cmd *cobra.Command) string {
	name := "flux"
	for c := cmd; c != nil && c.HasParent(); c = c.Parent() {
		if !c.Parent().HasParent() {
			name = "flux-" + c.Name()
		}
	}
	return name
}

// requireSubcommand makes every command group under c (a command with
// subcommands and no action of its own) refuse an unknown subcommand,
// and print its usage to stderr with exit code 1 when given none; cobra
// would print the help and exit 0 for both.
func requireSubcommand(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireSubcommand(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
		}
		if name := topName(cmd); !pythonStyle[name] {
			// flux-core's optparse says what was wrong first
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: missing subcommand\n", name)
		}
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Usage()
		return exitCode(1)
	}
}
