package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux job hostpids: HOST:PID of each task of a running job.

type jobHostpidsOptions struct {
	delimiter string
	ranks     string
	timeout   string
}

func newJobHostpidsCmd() *cobra.Command {
	o := jobHostpidsOptions{delimiter: ","}
	cmd := &cobra.Command{
		Use:   "hostpids [OPTIONS] ID",
		Short: "Print the host:pid of each task of a running job",
		Long: `Print HOST:PID for every task of job ID, in task rank order, separated
by the delimiter (a comma by default). A pending job is waited for
until all its tasks run; a job that has ended has no processes left
and is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			id, err := parseJobIDArg(args[0])
			if err != nil {
				return err
			}
			var want *idset.Set
			if o.ranks != "" && o.ranks != "all" {
				s, err := idset.Parse(o.ranks)
				if err != nil {
					return fmt.Errorf("--ranks=%s: %v", o.ranks, err)
				}
				want = &s
			}
			timeout := 0.0
			if o.timeout != "" {
				if timeout, err = fsd.Parse(o.timeout); err != nil {
					return fmt.Errorf("--timeout=%s: %v", o.timeout, err)
				}
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, fsd.ToDuration(timeout))
					defer cancel()
				}
				list, err := jobHostpids(ctx, h, id)
				if timeout > 0 && ctx.Err() != nil {
					return fmt.Errorf("job %s: timed out after %s waiting for its tasks", id.String(), o.timeout)
				}
				if err != nil {
					return err
				}
				out := make([]string, 0, len(list))
				for _, t := range list {
					if want == nil || want.Contains(uint(t.rank)) {
						out = append(out, fmt.Sprintf("%s:%d", t.host, t.pid))
					}
				}
				delim := o.delimiter
				if u, err := strconv.Unquote(`"` + delim + `"`); err == nil {
					delim = u // "\n", "\t" as flux-core reads them
				}
				fmt.Fprintln(cmd.OutOrStdout(), strings.Join(out, delim))
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&o.delimiter, "delimiter", "d", ",", "Separate the HOST:PID pairs with `STRING`")
	f.StringVarP(&o.ranks, "ranks", "r", "", "Only the tasks whose ranks are in `IDSET`")
	f.StringVarP(&o.timeout, "timeout", "t", "", "Give up after `DURATION` (FSD) waiting for the job's tasks")
	return cmd
}

type hostPID struct {
	rank, pid int
	host      string
}

// jobHostpids waits for job id's tasks to run (the shell.start event),
// then asks the job shell on each of its nodes for their process IDs.
func jobHostpids(ctx context.Context, h *flux.Handle, id jobid.ID) ([]hostPID, error) {
	if _, err := jobTaskmapOf(ctx, h, id); err != nil {
		return nil, err
	}
	R, err := jobR(ctx, h, id)
	if err != nil {
		return nil, err
	}
	hosts := R.Nodelist().Hosts()
	var list []hostPID
	node := 0
	for rank := range R.Ranks().All() {
		var resp struct {
			Tasks []struct {
				Rank int `json:"rank"`
				PID  int `json:"pid"`
			} `json:"tasks"`
		}
		if err := h.Call(ctx, "job-shell.pids", uint32(rank), map[string]any{"id": id}, &resp); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				return nil, fmt.Errorf("job %s is not running (rank %d: %s)", id.String(), rank, flux.ErrorText(err))
			}
			return nil, fmt.Errorf("job %s on rank %d: %s", id.String(), rank, flux.ErrorText(err))
		}
		host := fmt.Sprintf("rank%d", rank)
		if node < len(hosts) {
			host = hosts[node]
		}
		for _, t := range resp.Tasks {
			list = append(list, hostPID{rank: t.Rank, pid: t.PID, host: host})
		}
		node++
	}
	sort.Slice(list, func(a, b int) bool { return list[a].rank < list[b].rank })
	return list, nil
}
