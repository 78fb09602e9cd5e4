package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

func newKVSNamespaceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "namespace",
		Short: "Perform KVS namespace operations",
	}
	var owner, rootref string
	create := &cobra.Command{
		Use:   "create [-o owner] [-r rootref] NAME [NAME...]",
		Short: "Create a KVS namespace",
		Long: `Create namespaces, owned by the instance owner or by userid OWNER (who may
then read and write them), starting empty or from root ROOTREF.`,
		Args: cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			uid := int64(kvs.OwnerDefault)
			if owner != "" {
				n, err := strconv.ParseUint(owner, 10, 32)
				if err != nil {
					return fmt.Errorf("--owner requires an unsigned integer argument")
				}
				uid = int64(n)
			}
			for _, name := range args {
				if err := kvs.NamespaceCreate(ctx, h, name, uid, rootref); err != nil {
					return keyErr(name, err)
				}
			}
			return nil
		}),
	}
	create.Flags().StringVarP(&owner, "owner", "o", "", "make userid `UID` the owner")
	create.Flags().StringVarP(&rootref, "rootref", "r", "", "initialize the namespace with root `BLOBREF`")
	remove := &cobra.Command{
		Use:   "remove NAME [NAME...]",
		Short: "Remove a KVS namespace",
		Args:  cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			for _, name := range args {
				if err := kvs.NamespaceRemove(ctx, h, name); err != nil {
					return keyErr(name, err)
				}
			}
			return nil
		}),
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List namespaces",
		Args:  cobra.NoArgs,
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsNamespaceList(ctx, h, cmd.OutOrStdout())
		}),
	}
	cmd.AddCommand(create, remove, list)
	return cmd
}

func kvsNamespaceList(ctx context.Context, h *flux.Handle, out io.Writer) error {
	list, err := kvs.NamespaceList(ctx, h)
	if err != nil {
		return fmt.Errorf("kvs.namespace-list: %s", errText(err))
	}
	fmt.Fprintf(out, "NAMESPACE                                 OWNER      FLAGS\n")
	for _, ns := range list {
		fmt.Fprintf(out, "%-36s %10d 0x%08X\n", ns.Namespace, ns.Owner, ns.Flags)
	}
	return nil
}

func newKVSVersionCmd() *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "version [-N ns]",
		Short: "Display current KVS version",
		Long: `Print the root sequence number of the namespace: 0 when created, one more
after each (possibly merged) commit.`,
		Args: cobra.NoArgs,
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			v, err := kvs.GetVersion(ctx, h, ns)
			if err != nil {
				return fmt.Errorf("flux_kvs_get_version: %s", errText(err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), v)
			return nil
		}),
	}
	nsFlag(cmd, &ns)
	return cmd
}

func newKVSWaitCmd() *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "wait [-N ns] VERSION",
		Short: "Block until the KVS reaches version",
		Args:  cobra.ExactArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || v < 0 {
				return fmt.Errorf("wait: %q is not a version", args[0])
			}
			if err := kvs.WaitVersion(ctx, h, ns, v); err != nil {
				return fmt.Errorf("flux_kvs_wait_version: %s", errText(err))
			}
			return nil
		}),
	}
	nsFlag(cmd, &ns)
	return cmd
}

func newKVSGetrootCmd() *cobra.Command {
	var ns string
	var seq, owner, blobref bool
	cmd := &cobra.Command{
		Use:   "getroot [-N ns] [-s|-o|-b]",
		Short: "Get KVS root treeobj",
		Long: `Print the namespace's current root as an RFC 11 dirref, or with -s its
sequence number, -o its owner, -b its blobref.`,
		Args: cobra.NoArgs,
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			r, err := kvs.GetRoot(ctx, h, ns)
			if err != nil {
				return fmt.Errorf("flux_kvs_getroot: %s", errText(err))
			}
			out := cmd.OutOrStdout()
			switch {
			case owner:
				fmt.Fprintln(out, r.Owner)
			case seq:
				fmt.Fprintln(out, r.Rootseq)
			case blobref:
				fmt.Fprintln(out, r.Rootref)
			default:
				fmt.Fprintf(out, "%s\n", r.Treeobj().Encode())
			}
			return nil
		}),
	}
	nsFlag(cmd, &ns)
	cmd.Flags().BoolVarP(&seq, "sequence", "s", false, "show the sequence number")
	cmd.Flags().BoolVarP(&owner, "owner", "o", false, "show the owner")
	cmd.Flags().BoolVarP(&blobref, "blobref", "b", false, "show the blobref")
	return cmd
}

func newKVSDropcacheCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "dropcache [--all]",
		Short: "Tell KVS to drop its cache",
		Long:  `Drop the local KVS cache, or with --all every broker's.`,
		Args:  cobra.NoArgs,
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			var err error
			if all {
				err = kvs.DropcacheAll(h)
			} else {
				err = kvs.Dropcache(ctx, h)
			}
			if err != nil {
				return fmt.Errorf("flux_kvs_dropcache: %s", errText(err))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "drop the KVS cache on every rank")
	return cmd
}
