package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux job memo [--volatile] ID KEY=VALUE...: attach user annotations to
// a job (a memo event; flux jobs shows them as {user.KEY}).

func newJobMemoCmd() *cobra.Command {
	var volatile bool
	cmd := &cobra.Command{
		Use:   "memo [--volatile] ID KEY=VALUE...",
		Short: "Post a memo (user annotations) to an active job",
		Long: `Post a memo to an active job: each KEY=VALUE sets annotation
user.KEY, shown by flux jobs -o {user.KEY}. KEY may be dotted (a.b=1 sets
{"a":{"b":1}}); VALUE is JSON if it parses as JSON, else a string, and
null removes the key. --volatile is accepted for compatibility (memos are
always recorded in the job's eventlog).`,
		Args: cobra.MinimumNArgs(2),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			id, err := parseJobIDArg(args[0])
			if err != nil {
				return err
			}
			memo := map[string]any{}
			for _, kv := range args[1:] {
				if !isKeyValue(kv) {
					return fmt.Errorf("%q is not KEY=VALUE", kv)
				}
				t, err := keyValueTable(kv)
				if err != nil {
					return err
				}
				mergeTables(memo, t)
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				req := map[string]any{"id": id, "volatile": volatile, "memo": memo}
				if err := h.Call(ctx, "job-manager.memo", flux.NodeidAny, req, nil); err != nil {
					return fmt.Errorf("%s: %s", id.String(), flux.ErrorText(err))
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&volatile, "volatile", false, "Accepted for compatibility: the memo is recorded all the same")
	return cmd
}
