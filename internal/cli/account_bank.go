package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/accounting"
)

// flux account add-bank, edit-bank, delete-bank, list-banks, view-bank.

func parseShares(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > accounting.MaxShares {
		return 0, fmt.Errorf("SHARES=%q: want a whole number from 0 to %d", s, accounting.MaxShares)
	}
	return n, nil
}

func newAccountAddBankCmd() *cobra.Command {
	var parent string
	cmd := &cobra.Command{
		Use:   "add-bank [--parent-bank=PARENT] BANK SHARES",
		Short: "Add a bank",
		Long: `Add BANK with SHARES shares of its parent bank. The first bank is the
root and has no parent; every other bank names its parent with
--parent-bank. A bank deleted without --force comes back.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			shares, err := parseShares(args[1])
			if err != nil {
				return err
			}
			return accountRPC("add-bank", accounting.Bank{Name: args[0], Parent: parent, Shares: shares}, nil)
		},
	}
	nameVarP(cmd.Flags(), &parent, "parent-bank", "", "the bank's parent `BANK`")
	return cmd
}

func newAccountEditBankCmd() *cobra.Command {
	var parent string
	var shares int64
	cmd := &cobra.Command{
		Use:   "edit-bank BANK [--shares=N] [--parent-bank=PARENT]",
		Short: "Change a bank's shares or parent",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e := accounting.BankEdit{Name: args[0]}
			if cmd.Flags().Changed("shares") {
				e.Shares = &shares
			}
			if cmd.Flags().Changed("parent-bank") {
				e.Parent = &parent
			}
			if e.Shares == nil && e.Parent == nil {
				return fmt.Errorf("edit-bank %s: nothing to change (--shares, --parent-bank)", args[0])
			}
			return accountRPC("edit-bank", e, nil)
		},
	}
	cmd.Flags().Int64Var(&shares, "shares", 0, "the bank's `N` shares of its parent")
	nameVarP(cmd.Flags(), &parent, "parent-bank", "", "move the bank below `BANK`")
	return cmd
}

func newAccountDeleteBankCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete-bank BANK [--force]",
		Short: "Deactivate a bank (with --force, remove it and everything below it)",
		Long: `Deactivate BANK: jobs may no longer be charged to it. A bank that still
has active sub-banks or users is refused (delete or move them first), and
so is the root bank.

With --force the rows are removed instead: BANK, every bank below it and
their users' associations (users whose default bank it was get another of
theirs; the root bank takes the whole database). What goes is printed
first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if force {
				var resp accounting.BanksResponse
				if err := accountRPC("view-bank", accounting.NameRequest{Bank: args[0]}, &resp); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "delete-bank: removing bank %s, %d banks below it and %d associations with them\n",
					args[0], max(len(resp.Banks)-1, 0), len(resp.Associations))
			}
			return accountRPC("delete-bank", accounting.DeleteRequest{Bank: args[0], Force: force}, nil)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove the bank, the banks below it and their associations instead of deactivating it")
	return cmd
}

func newAccountListBanksCmd() *cobra.Command {
	var inactive, asJSON bool
	cmd := &cobra.Command{
		Use:   "list-banks [--inactive] [--json]",
		Short: "List the banks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp accounting.BanksResponse
			if err := accountRPC("list-banks", nil, &resp); err != nil {
				return err
			}
			return listBanks(cmd.OutOrStdout(), resp.Banks, inactive, asJSON)
		},
	}
	cmd.Flags().BoolVar(&inactive, "inactive", false, "include deleted (inactive) banks")
	cmd.Flags().BoolVarP(&asJSON, "json", "j", false, "print JSON")
	return cmd
}

func listBanks(out io.Writer, banks []accounting.Bank, inactive, asJSON bool) error {
	shown := []accounting.Bank{}
	for _, b := range banks {
		if b.Active || inactive {
			shown = append(shown, b)
		}
	}
	if asJSON {
		return printJSON(out, shown)
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BANK\tACTIVE\tPARENT_BANK\tSHARES")
	for _, b := range shown {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", b.Name, btoi(b.Active), b.Parent, b.Shares)
	}
	return tw.Flush()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newAccountViewBankCmd() *cobra.Command {
	var tree, users, asJSON bool
	cmd := &cobra.Command{
		Use:   "view-bank BANK [--tree] [--users] [--json]",
		Short: "Show a bank (with --tree, the banks below it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp accounting.BanksResponse
			if err := accountRPC("view-bank", accounting.NameRequest{Bank: args[0]}, &resp); err != nil {
				return err
			}
			return viewBank(cmd.OutOrStdout(), args[0], resp, tree, users, asJSON)
		},
	}
	cmd.Flags().BoolVarP(&tree, "tree", "t", false, "show the banks below it as a tree")
	cmd.Flags().BoolVarP(&users, "users", "u", false, "show the users of the bank (and, with --tree, of the banks below it)")
	cmd.Flags().BoolVarP(&asJSON, "json", "j", false, "print JSON")
	return cmd
}

func viewBank(out io.Writer, name string, resp accounting.BanksResponse, tree, users, asJSON bool) error {
	if !tree {
		var banks []accounting.Bank
		for _, b := range resp.Banks {
			if b.Name == name {
				banks = append(banks, b)
			}
		}
		resp.Banks = banks
		var as []accounting.Association
		for _, a := range resp.Associations {
			if a.Bank == name {
				as = append(as, a)
			}
		}
		resp.Associations = as
	}
	if !users {
		resp.Associations = nil
	}
	if asJSON {
		return printJSON(out, resp)
	}
	if !tree {
		if err := listBanks(out, resp.Banks, true, false); err != nil {
			return err
		}
		if users {
			fmt.Fprintln(out)
			return listAssociations(out, resp.Associations)
		}
		return nil
	}
	printBankTree(out, name, resp)
	return nil
}

// printBankTree prints the bank and those below it, each indented one
// space deeper than its parent, with their users (when given) below
// them.
func printBankTree(out io.Writer, root string, resp accounting.BanksResponse) {
	children := map[string][]accounting.Bank{}
	var top *accounting.Bank
	for i, b := range resp.Banks {
		if b.Name == root {
			top = &resp.Banks[i]
			continue
		}
		children[b.Parent] = append(children[b.Parent], b)
	}
	usersOf := map[string][]accounting.Association{}
	for _, a := range resp.Associations {
		usersOf[a.Bank] = append(usersOf[a.Bank], a)
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BANK\tUSERNAME\tSHARES\tACTIVE\tJOB_USAGE\tFAIRSHARE")
	var walk func(b accounting.Bank, depth int)
	walk = func(b accounting.Bank, depth int) {
		pad := strings.Repeat(" ", depth)
		fmt.Fprintf(tw, "%s%s\t\t%d\t%d\t\t\n", pad, b.Name, b.Shares, btoi(b.Active))
		for _, a := range usersOf[b.Name] {
			fmt.Fprintf(tw, "%s %s\t%s\t%d\t%d\t%s\t%s\n", pad, b.Name, a.Username, a.Shares, btoi(a.Active),
				floatText(a.JobUsage, usageDecimals), floatText(a.FairShare, usageDecimals))
		}
		kids := children[b.Name]
		sort.Slice(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	if top != nil {
		walk(*top, 0)
	}
	tw.Flush()
}
