package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/accounting"
)

// flux account add-user, edit-user, delete-user, view-user, list-users.

// splitList reads a comma-separated option value ("" is none).
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newAccountAddUserCmd() *cobra.Command {
	var a accounting.Association
	var lim limitFlags
	var projects string
	cmd := &cobra.Command{
		Use:   "add-user --username=USER --bank=BANK [--shares=N] [LIMITS] [--projects=P,...] [--default-project=P]",
		Short: "Add a user to a bank",
		Long: `Add USER's association with BANK. A user's first bank is their default
bank (edit-user --default-bank changes it). Limits left out are unset: the
[accounting] configuration's apply (none there: no limit); 0 is no limit.
--projects lists the projects the user may charge (each added with
add-project first); the first is the default project unless
--default-project names one. --userid is needed only for a user this host
does not know.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.Username == "" || a.Bank == "" {
				return usageError{fmt.Errorf("add-user needs --username and --bank")}
			}
			if cmd.Flags().Changed("userid") && a.Userid == 0 && a.Username != "root" {
				// 0 asks the module to look the name up: say what it is
				return usageError{fmt.Errorf("--userid=0 is root's uid, not %s's: leave --userid out to look %s up on this host", a.Username, a.Username)}
			}
			a.Limits = lim.limits(cmd)
			a.Projects = splitList(projects)
			return accountRPC("add-user", a, nil)
		},
	}
	f := cmd.Flags()
	nameVarP(f, &a.Username, "username", "u", "the user's `NAME`")
	useridVarP(f, &a.Userid, "userid", "i", "the user's `UID` (default: looked up by name; a host user's must be theirs)")
	nameVarP(f, &a.Bank, "bank", "B", "the `BANK` the user joins")
	f.Int64Var(&a.Shares, "shares", 1, "the association's `N` shares of the bank")
	lim.add(cmd, "for the association")
	f.StringVarP(&projects, "projects", "P", "", "the `PROJECTS` (comma-separated) the user may charge")
	nameVarP(f, &a.DefaultProject, "default-project", "", "the `PROJECT` of the user's jobs that name none")
	f.BoolVar(&a.Exempt, "exempt", false, "the association's jobs pass every limit")
	f.BoolVar(&a.Expedite, "expedite", false, "the association may submit with urgency above 16")
	return cmd
}

func newAccountEditUserCmd() *cobra.Command {
	var bank, defBank, projects, defProject string
	var shares int64
	var userid uint32
	var exempt, expedite bool
	var lim limitFlags
	cmd := &cobra.Command{
		Use:   "edit-user USERNAME [--bank=BANK] [--default-bank=BANK] [--shares=N] [LIMITS] [--projects=P,...] [--default-project=P]",
		Short: "Change a user's associations",
		Long: `Change USERNAME. Shares, limits and --exempt/--expedite change the
association with --bank, or every association of the user without it; a
limit of -1 unsets it (the configuration's applies again). --projects
replaces the user's list of projects.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e := accounting.UserEdit{Username: args[0], Bank: bank, Limits: lim.limits(cmd)}
			ch := cmd.Flags().Changed
			if ch("default-bank") {
				e.DefaultBank = &defBank
			}
			if ch("shares") {
				e.Shares = &shares
			}
			if ch("userid") {
				e.Userid = &userid
			}
			if ch("exempt") {
				e.Exempt = &exempt
			}
			if ch("expedite") {
				e.Expedite = &expedite
			}
			if ch("projects") {
				p := splitList(projects)
				e.Projects = &p
			}
			if ch("default-project") {
				e.DefaultProject = &defProject
			}
			if cmd.Flags().NFlag() == 0 || (cmd.Flags().NFlag() == 1 && ch("bank")) {
				return fmt.Errorf("edit-user %s: nothing to change", args[0])
			}
			return accountRPC("edit-user", e, nil)
		},
	}
	f := cmd.Flags()
	nameVarP(f, &bank, "bank", "B", "change the association with `BANK` only")
	nameVarP(f, &defBank, "default-bank", "", "make `BANK` the user's default bank")
	f.Int64Var(&shares, "shares", 1, "the association's `N` shares")
	useridVarP(f, &userid, "userid", "i", "the user's `UID` (a host user's must be theirs)")
	lim.add(cmd, "(-1: unset)")
	f.StringVarP(&projects, "projects", "P", "", "the `PROJECTS` (comma-separated) the user may charge")
	f.StringVar(&defProject, "default-project", "", "the `PROJECT` of the user's jobs that name none")
	f.BoolVar(&exempt, "exempt", false, "the association's jobs pass every limit (--exempt=false to withdraw)")
	f.BoolVar(&expedite, "expedite", false, "the association may submit with urgency above 16 (--expedite=false to withdraw)")
	return cmd
}

func newAccountDeleteUserCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete-user USERNAME BANK [--force]",
		Short: "Deactivate a user's association with a bank (with --force, remove it)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return accountRPC("delete-user", accounting.DeleteRequest{Username: args[0], Bank: args[1], Force: force}, nil)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove the association instead of deactivating it")
	return cmd
}

func newAccountViewUserCmd() *cobra.Command {
	var asJSON, listBanks bool
	cmd := &cobra.Command{
		Use:   "view-user USERNAME [--json] [--list-banks]",
		Short: "Show a user's associations (users other than the owner: their own)",
		// flux-accounting's view-user requires the name too
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("view-user needs one USERNAME (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp accounting.AssociationsResponse
			if err := accountRPC("view-user", accounting.NameRequest{Username: args[0]}, &resp); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case listBanks:
				banks := []string{}
				for _, a := range resp.Associations {
					banks = append(banks, a.Bank)
				}
				if asJSON {
					return printJSON(out, banks)
				}
				for _, b := range banks {
					fmt.Fprintln(out, b)
				}
				return nil
			case asJSON:
				return printJSON(out, resp.Associations)
			}
			return listAssociations(out, resp.Associations)
		},
	}
	cmd.Flags().BoolVarP(&asJSON, "json", "j", false, "print JSON")
	cmd.Flags().BoolVar(&listBanks, "list-banks", false, "print only the user's banks, one a line (with --json: a list)")
	return cmd
}

func newAccountListUsersCmd() *cobra.Command {
	var asJSON bool
	var bank string
	cmd := &cobra.Command{
		Use:   "list-users [--bank=BANK] [--json]",
		Short: "List the associations (users other than the owner: their own)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp accounting.AssociationsResponse
			if err := accountRPC("list-users", nil, &resp); err != nil {
				return err
			}
			if bank != "" {
				if err := knownBank("--bank", bank); err != nil {
					return err
				}
			}
			as := []accounting.Association{}
			for _, a := range resp.Associations {
				if bank == "" || a.Bank == bank {
					as = append(as, a)
				}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), as)
			}
			return listAssociations(cmd.OutOrStdout(), as)
		},
	}
	cmd.Flags().BoolVarP(&asJSON, "json", "j", false, "print JSON")
	nameVarP(cmd.Flags(), &bank, "bank", "B", "only the associations with `BANK`")
	return cmd
}

// knownBank refuses a bank the database does not have (inactive ones
// are known): an option naming it would show nothing and say nothing.
func knownBank(option, bank string) error {
	var resp accounting.BanksResponse
	if err := accountRPC("list-banks", nil, &resp); err != nil {
		return err
	}
	names := []string{}
	for _, b := range resp.Banks {
		if b.Name == bank {
			return nil
		}
		names = append(names, b.Name)
	}
	if len(names) == 0 {
		names = append(names, "none")
	}
	return fmt.Errorf("%s=%s: bank %s is not in the accounting database (banks: %s)", option, bank, bank, strings.Join(names, ", "))
}

// usageDecimals is how JOB_USAGE (core-hours) and FAIRSHARE are shown:
// the same 4 decimals, so a short job's usage is not 0.00.
const usageDecimals = 4

// listAssociations prints associations as a table; "-" is an unset
// limit (or a fair-share not computed yet), "*" marks the default bank.
// JOB_USAGE is the association's decayed core-hours, FAIRSHARE its
// factor (flux-accounting's job_usage and fairshare).
func listAssociations(out io.Writer, as []accounting.Association) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "USERNAME\tUSERID\tBANK\tDEFAULT\tACTIVE\tSHARES\tJOB_USAGE\tFAIRSHARE\tMAX_RUNNING\tMAX_ACTIVE\tMAX_NODES\tMAX_CORES\tEXEMPT\tEXPEDITE\tPROJECTS\tDEFAULT_PROJECT")
	for _, a := range as {
		def := ""
		if a.Bank == a.DefaultBank {
			def = "*"
		}
		projects := strings.Join(a.Projects, ",")
		if projects == "" {
			projects = "-"
		}
		defProject := a.DefaultProject
		if defProject == "" {
			defProject = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", a.Username, a.Userid, a.Bank, def, btoi(a.Active), a.Shares,
			floatText(a.JobUsage, usageDecimals), floatText(a.FairShare, usageDecimals), limitText(a.MaxRunningJobs), limitText(a.MaxActiveJobs), limitText(a.MaxNodes), limitText(a.MaxCores),
			btoi(a.Exempt), btoi(a.Expedite), projects, defProject)
	}
	return tw.Flush()
}
