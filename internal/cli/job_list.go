package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux job list and flux job list-ids: flux-core's raw job-list
// listings for scripts and tests (one JSON object per job and line);
// people use flux jobs.

const notThisCommand = "This is not the command you are looking for. Try flux-jobs(1)."

func newJobListCmd() *cobra.Command {
	var count int
	var states, user string
	var allUser, all bool
	cmd := &cobra.Command{
		Use:   "list [-c N] [-s STATES] [-u USER] [-a] [-A]",
		Short: "List jobs as JSON, one object per line (for scripts; see flux jobs)",
		Args:  cobra.NoArgs,
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			if isTerminal(cmd.OutOrStdout()) {
				return fmt.Errorf("%s", notThisCommand)
			}
			if count < 0 {
				return fmt.Errorf("--count must be >= 0")
			}
			mask := stateBits["pending"] | stateBits["running"]
			switch {
			case allUser || all:
				mask = stateBits["active"] | stateBits["inactive"]
			case states != "":
				mask = 0
				for _, s := range strings.Split(states, ",") {
					bit, ok := stateBits[strings.ToLower(strings.TrimSpace(s))]
					if !ok {
						return fmt.Errorf("invalid state %s specified", s)
					}
					mask |= bit
				}
			}
			userid := int64(os.Getuid())
			if all {
				userid = 0xFFFFFFFF
			} else if user != "" {
				u, err := lookupUserid(user)
				if err != nil {
					return err
				}
				userid = u
				if u < 0 {
					userid = 0xFFFFFFFF // --user=all: FLUX_USERID_UNKNOWN
				}
			}
			req := map[string]any{"max_entries": count, "attrs": []string{"all"},
				"constraint": map[string]any{"and": []any{map[string]any{"userid": []int64{userid}}, map[string]any{"states": []int{mask}}}}}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return h.Stream(ctx, "job-list.list", flux.NodeidAny, req, func(m *flux.Message) error {
					return printJobObjects(cmd.OutOrStdout(), m.JSON(), "jobs")
				})
			})
		}),
	}
	f := cmd.Flags()
	f.IntVarP(&count, "count", "c", 0, "Limit output to `N` jobs")
	f.StringVarP(&states, "states", "s", "", "List jobs in specific `STATES`")
	f.StringVarP(&user, "user", "u", "", "Limit output to `USER` (or all)")
	f.BoolVarP(&allUser, "all-user", "a", false, "List my jobs, regardless of state")
	f.BoolVarP(&all, "all", "A", false, "List jobs for all users, regardless of state")
	return cmd
}

func newJobListIDsCmd() *cobra.Command {
	var wait string
	cmd := &cobra.Command{
		Use:   "list-ids [--wait-state=STATE] ID...",
		Short: "List jobs by id as JSON, once job-list has them in STATE (for scripts)",
		Args:  cobra.MinimumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			if isTerminal(cmd.OutOrStdout()) {
				return fmt.Errorf("%s", notThisCommand)
			}
			state, ok := stateBits[strings.ToLower(wait)]
			if !ok || strings.Contains(wait, ",") || state&(state-1) != 0 {
				return fmt.Errorf("invalid job state specified")
			}
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				// every request at once (job-list waits for each job in
				// parallel), the answers printed in the order given
				futures := make([]*flux.Future, len(ids))
				for i, id := range ids {
					f, err := h.RPC("job-list.list-id", flux.NodeidAny, map[string]any{"id": id, "attrs": []string{"all"}, "state": state}, 0)
					if err != nil {
						return err
					}
					futures[i] = f
				}
				for i, id := range ids {
					m, err := futures[i].Get(ctx)
					if err != nil {
						return fmt.Errorf("%s: %s", id.String(), flux.ErrorText(err))
					}
					if err := printJobObjects(cmd.OutOrStdout(), m.JSON(), "job"); err != nil {
						return err
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&wait, "wait-state", "W", "depend", "Return only after each job has reached `STATE`")
	return cmd
}

// printJobObjects writes the job object (or array of them) under key of
// payload p, one compact JSON object a line.
func printJobObjects(w io.Writer, p []byte, key string) error {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(p, &resp); err != nil {
		return fmt.Errorf("malformed job-list response: %v", err)
	}
	raw := resp[key]
	var list []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("malformed job-list response: %v", err)
		}
	} else if len(raw) > 0 {
		list = []json.RawMessage{raw}
	}
	for _, o := range list {
		var b bytes.Buffer
		if err := json.Compact(&b, o); err != nil {
			return err
		}
		b.WriteByte('\n')
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
