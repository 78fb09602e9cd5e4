package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux account: the accounting database (issue 25), with
// flux-accounting's command names and options. The instance's
// accounting module keeps the database; the instance owner changes it,
// everyone may list the banks and projects and view their own
// associations. account_bank.go, account_user.go and account_project.go
// hold the subcommands.

func newAccountCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "account COMMAND",
		Short: "Manage the accounting database: banks, users, projects",
		Long: `Manage the instance's accounting database (flux-accounting's commands):
banks in a hierarchy with shares, users and their associations with banks
(a default bank, shares, limits, exempt and expedite flags), and projects.

Once the database has users, every job is charged to a bank and project
of its user's: -B/--bank and --project must name ones the user belongs to,
and a job that names none gets the user's default bank and project. A user
who is not in the database may not submit (the instance owner may).

The instance owner changes the database; other users may list banks and
projects and view their own associations (view-user, list-users).

The database is STATEDIR/accounting.sqlite (RUNDIR's without a statedir),
made by the first change.`,
	}
	// a name that is not UTF-8 would reach the module as U+FFFD (JSON
	// encoding replaces the bytes), another name: refuse it here
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		return checkUTF8(cmd, args)
	}
	for _, c := range []*cobra.Command{
		newAccountAddBankCmd(), newAccountEditBankCmd(), newAccountDeleteBankCmd(), newAccountListBanksCmd(), newAccountViewBankCmd(),
		newAccountAddUserCmd(), newAccountEditUserCmd(), newAccountDeleteUserCmd(), newAccountViewUserCmd(), newAccountListUsersCmd(),
		newAccountAddProjectCmd(), newAccountDeleteProjectCmd(), newAccountListProjectsCmd(),
		newAccountUpdateUsageCmd(), newAccountViewUsageReportCmd(),
	} {
		cmd.AddCommand(c)
	}
	return cmd
}

// checkUTF8 refuses arguments and option values that are not valid
// UTF-8, naming which.
func checkUTF8(cmd *cobra.Command, args []string) error {
	for i, a := range args {
		if !utf8.ValidString(a) {
			return fmt.Errorf("argument %d %q is not valid UTF-8", i+1, a)
		}
	}
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if v := f.Value.String(); err == nil && !utf8.ValidString(v) {
			err = fmt.Errorf("--%s=%q is not valid UTF-8", f.Name, v)
		}
	})
	return err
}

// accountCall sends one request to the accounting module.
func accountCall(ctx context.Context, h *flux.Handle, cmd string, req, resp any) error {
	err := h.Call(ctx, accounting.Service+"."+cmd, flux.NodeidAny, req, resp)
	if flux.ErrnoOf(err) == syscall.ENOSYS {
		return fmt.Errorf("%s: the instance has no accounting module (flux module load accounting)", cmd)
	}
	return err
}

// accountRPC is accountCall on the enclosing instance.
func accountRPC(cmd string, req, resp any) error {
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		return accountCall(ctx, h, cmd, req, resp)
	})
}

func printJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// limitFlags are the association limits' options (add-user, edit-user).
type limitFlags struct {
	running, active, nodes, cores int
}

func (l *limitFlags) add(cmd *cobra.Command, what string) {
	f := cmd.Flags()
	f.IntVar(&l.running, "max-running-jobs", 0, "at most `N` jobs running at once "+what)
	f.IntVar(&l.active, "max-active-jobs", 0, "at most `N` jobs submitted and not yet ended "+what)
	f.IntVarP(&l.nodes, "max-nodes", "N", 0, "at most `N` nodes across the running jobs "+what)
	f.IntVarP(&l.cores, "max-cores", "c", 0, "at most `N` cores across the running jobs "+what)
}

// limits are the limit options given on the command line.
func (l *limitFlags) limits(cmd *cobra.Command) accounting.Limits {
	var out accounting.Limits
	for _, f := range []struct {
		name string
		v    int
		dst  **int
	}{{"max-running-jobs", l.running, &out.MaxRunningJobs}, {"max-active-jobs", l.active, &out.MaxActiveJobs},
		{"max-nodes", l.nodes, &out.MaxNodes}, {"max-cores", l.cores, &out.MaxCores}} {
		if cmd.Flags().Changed(f.name) {
			v := f.v
			*f.dst = &v
		}
	}
	return out
}

// floatText shows v with prec decimals: "-" when nil (not computed).
func floatText(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}

// limitText shows a limit: "-" when unset (the configuration's applies).
func limitText(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}
