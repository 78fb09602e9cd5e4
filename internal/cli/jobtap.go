package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux jobtap list|load|remove|query: manage the job manager's jobtap
// plugins at runtime (job-manager.jobtap, job-manager.jobtap-query).

func newJobtapCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobtap COMMAND [OPTIONS] ARGS...",
		Short: "List, load, remove and query job-manager jobtap plugins",
		Long: `Query, load and remove jobtap plugins of the job-manager module at runtime.
Plugins built in to the job manager have a leading "." in their name
(.priority-default ...) and are listed only with list --all.`,
	}
	var all bool
	list := &cobra.Command{
		Use:   "list [-a]",
		Short: "List loaded plugins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return jobtapRequest(cmd.OutOrStdout(), map[string]any{"query_only": true}, all)
		},
	}
	list.Flags().BoolVarP(&all, "all", "a", false, "include builtin plugins")

	var removeFirst string
	load := &cobra.Command{
		Use:   "load [-r NAME] PLUGIN [KEY=VAL...]",
		Short: "Load a plugin, optionally with configuration",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return fmt.Errorf("load: the PLUGIN name must not be empty")
			}
			conf, err := jobtapConf(args[1:])
			if err != nil {
				return err
			}
			req := map[string]any{"load": args[0]}
			if conf != nil {
				req["conf"] = conf
			}
			if removeFirst != "" {
				req["remove"] = removeFirst
			}
			return jobtapRequest(cmd.OutOrStdout(), req, false)
		},
	}
	load.Flags().StringVarP(&removeFirst, "remove", "r", "", "remove plugin `NAME` first")

	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a plugin (\"all\" removes every non-builtin plugin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return jobtapRequest(cmd.OutOrStdout(), map[string]any{"remove": args[0]}, false)
		},
	}

	query := &cobra.Command{
		Use:   "query NAME",
		Short: "Print a plugin's query data as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				var resp json.RawMessage
				if err := h.Call(ctx, "job-manager.jobtap-query", flux.NodeidAny, map[string]any{"name": args[0]}, &resp); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(resp))
				return nil
			})
		},
	}
	cmd.AddCommand(list, load, remove, query)
	return cmd
}

// jobtapConf turns KEY=VAL arguments into a config object; a VAL that is
// valid JSON is taken as such, anything else as a string.
func jobtapConf(args []string) (map[string]any, error) {
	if len(args) == 0 {
		return nil, nil
	}
	conf := make(map[string]any, len(args))
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: plugin configuration must be KEY=VAL", kv)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		conf[k] = val
	}
	return conf, nil
}

// jobtapRequest sends a job-manager.jobtap request; for a query
// (query_only) it prints the plugin names, builtins only with all.
func jobtapRequest(w io.Writer, req map[string]any, all bool) error {
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		if req["query_only"] != true {
			return h.Call(ctx, "job-manager.jobtap", flux.NodeidAny, req, nil)
		}
		var resp struct {
			Plugins []string `json:"plugins"`
		}
		if err := h.Call(ctx, "job-manager.jobtap", flux.NodeidAny, req, &resp); err != nil {
			return err
		}
		for _, name := range resp.Plugins {
			if all || !strings.HasPrefix(name, ".") {
				fmt.Fprintln(w, name)
			}
		}
		return nil
	})
}
