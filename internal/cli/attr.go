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
	var expunge bool
	cmd := &cobra.Command{
		Use:   "setattr NAME VALUE | setattr -e NAME",
		Short: "Set a broker attribute, or remove it with --expunge",
		Args: func(cmd *cobra.Command, args []string) error {
			if expunge {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				topic, req := "attr.set", map[string]any{"name": args[0]}
				if expunge {
					topic = "attr.rm"
				} else {
					req["value"] = args[1]
				}
				if err := h.Call(ctx, topic, flux.NodeidAny, req, nil); err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&expunge, "expunge", "e", false, "remove the attribute instead of setting it")
	return cmd
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
