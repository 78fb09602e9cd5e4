package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

func newGetattrCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "getattr NAME",
		Short: "Print the value of a broker attribute",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return getattr(ctx, h, args[0], cmd.OutOrStdout())
			})
		},
	}
}

func getattr(ctx context.Context, h *flux.Handle, name string, w io.Writer) error {
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(ctx, "attr.get", flux.NodeidAny, map[string]string{"name": name}, &resp); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintln(w, resp.Value)
	return nil
}

func newSetattrCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "setattr NAME VALUE",
		Short: "Set a broker attribute",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				req := map[string]any{"name": args[0], "value": args[1]}
				if err := h.Call(ctx, "attr.set", flux.NodeidAny, req, nil); err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				return nil
			})
		},
	}
}

func newLsattrCmd() *cobra.Command {
	var values bool
	cmd := &cobra.Command{
		Use:   "lsattr [-v]",
		Short: "List broker attributes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return lsattr(ctx, h, values, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVarP(&values, "values", "v", false, "show values too")
	return cmd
}

func lsattr(ctx context.Context, h *flux.Handle, values bool, w io.Writer) error {
	var resp struct {
		Names []string `json:"names"`
	}
	if err := h.Call(ctx, "attr.list", flux.NodeidAny, nil, &resp); err != nil {
		return err
	}
	sort.Strings(resp.Names)
	for _, n := range resp.Names {
		if !values {
			fmt.Fprintln(w, n)
			continue
		}
		var v struct {
			Value string `json:"value"`
		}
		if err := h.Call(ctx, "attr.get", flux.NodeidAny, map[string]string{"name": n}, &v); err != nil {
			fmt.Fprintf(w, "%-40s %s\n", n, "-")
			continue
		}
		fmt.Fprintf(w, "%-40s %s\n", n, v.Value)
	}
	return nil
}
