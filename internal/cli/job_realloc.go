package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux job realloc: grow or shrink a running job (RFC 51 through
// job-manager.realloc; see internal/modules/jobmanager/realloc.go).

type jobReallocOptions struct {
	addNodes, addCores, removeNodes int
	removeR                         string
	quiet, noWait, noRelease        bool
}

func newJobReallocCmd() *cobra.Command {
	var o jobReallocOptions
	cmd := &cobra.Command{
		Use:   "realloc [--add-nodes=N | --add-cores=N] [--remove-nodes=N | --remove=R-FILE] [--no-wait] [ID]",
		Short: "Grow or shrink a running job's resources (RFC 51)",
		Long: `Ask the scheduler for more resources for running job ID (--add-nodes
whole nodes, or --add-cores cores), or give some back: its last nodes
(--remove-nodes) or the resources in an R file (--remove, "-" for
standard input). A request that cannot be met now waits in the queue,
as a pending job would, until it can (interrupt to cancel it), unless
--no-wait is given. Resources given back are taken from the job at once:
its tasks on those nodes are stopped (--no-release leaves that to the
job, through its shell's release method). The job's R, its eventlog
(alloc, resource-update, release, free) and flux jobs show the change.
Prints what changed and the job's resources.

Without ID, inside a job (FLUX_JOB_ID is set), the job asks for itself
through its job shell (the shell's realloc and release methods), as an
application would.`,
		Args: cobra.RangeArgs(0, 1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			viaShell := len(args) == 0
			var id jobid.ID
			var err error
			if viaShell {
				env := os.Getenv("FLUX_JOB_ID")
				if env == "" {
					return fmt.Errorf("give a job ID (or run inside a job, where FLUX_JOB_ID names it)")
				}
				if id, err = jobid.Parse(env); err != nil {
					return fmt.Errorf("FLUX_JOB_ID=%s: %w", env, err)
				}
			} else if id, err = parseJobIDArg(args[0]); err != nil {
				return err
			}
			uid := uint32(os.Getuid())
			var req job.ReallocRequest
			switch {
			case o.addNodes < 0 || o.addCores < 0 || o.removeNodes < 0:
				return fmt.Errorf("counts must be positive")
			case o.addNodes > 0 && o.addCores > 0:
				return fmt.Errorf("give --add-nodes or --add-cores, not both")
			case o.removeNodes > 0 && o.removeR != "":
				return fmt.Errorf("give --remove-nodes or --remove, not both")
			case o.addNodes == 0 && o.addCores == 0 && o.removeNodes == 0 && o.removeR == "":
				return fmt.Errorf("nothing to do: give --add-nodes, --add-cores, --remove-nodes or --remove")
			}
			spec := func(opts jobspec.CommandOptions) (json.RawMessage, error) {
				js, err := jobspec.FromCommand([]string{"realloc"}, opts)
				if err != nil {
					return nil, err
				}
				return js.MarshalJSON()
			}
			if o.addNodes > 0 {
				if req.SpecAdd, err = spec(jobspec.CommandOptions{NTasks: o.addNodes, NNodes: o.addNodes, Exclusive: true}); err != nil {
					return err
				}
			}
			if o.addCores > 0 {
				if req.SpecAdd, err = spec(jobspec.CommandOptions{NTasks: o.addCores}); err != nil {
					return err
				}
			}
			if o.removeNodes > 0 {
				if req.SpecSub, err = spec(jobspec.CommandOptions{NTasks: o.removeNodes, NNodes: o.removeNodes}); err != nil {
					return err
				}
			}
			if o.removeR != "" {
				var b []byte
				if o.removeR == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(o.removeR)
				}
				if err != nil {
					return err
				}
				r, err := rset.Parse(b)
				if err != nil {
					return fmt.Errorf("--remove=%s: %w", o.removeR, err)
				}
				n := max(r.NNodes(), 1)
				if req.SpecSub, err = spec(jobspec.CommandOptions{NTasks: n, NNodes: n}); err != nil {
					return err
				}
				req.R = json.RawMessage(b)
			}
			req.NoWait = o.noWait
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				var resp *job.ReallocResponse
				if viaShell {
					resp, err = job.ShellRealloc(ctx, h, uid, id, req)
				} else {
					resp, err = job.Realloc(ctx, h, id, req)
				}
				if err != nil {
					return err
				}
				if resp.Type != job.ReallocSuccess {
					return fmt.Errorf("%s: %s: %s", id.String(), job.ReallocTypeName(resp.Type), resp.Note)
				}
				if len(resp.RDeltaSub) > 0 && !o.noRelease {
					sub, err := rset.Parse(resp.RDeltaSub)
					if err != nil {
						return fmt.Errorf("R_delta_sub: %w", err)
					}
					rctx := context.WithoutCancel(ctx)
					ranks := sub.Ranks().String()
					if viaShell {
						err = job.ShellRelease(rctx, h, uid, id, resp.RDeltaSub)
					} else {
						err = h.Call(rctx, "job-exec.release", flux.NodeidAny, map[string]any{"id": id, "ranks": ranks}, nil)
					}
					if err != nil {
						return fmt.Errorf("giving back %s: %w", sub.String(), err)
					}
					// done once the scheduler has them (free)
					if _, err := job.WaitEvent(rctx, h, id, "eventlog", 0, func(ev eventlog.Event) bool {
						var c struct {
							Ranks string `json:"ranks"`
						}
						return ev.Name == "free" && ev.DecodeContext(&c) == nil && c.Ranks == ranks
					}); err != nil {
						return fmt.Errorf("giving back %s: %w", sub.String(), err)
					}
					if cur, err := rset.Parse(resp.R); err == nil {
						resp.R = cur.Difference(sub).Encode()
					}
				}
				if o.quiet {
					return nil
				}
				out := cmd.OutOrStdout()
				for _, d := range []struct {
					sign string
					R    json.RawMessage
				}{{"+", resp.RDeltaAdd}, {"-", resp.RDeltaSub}} {
					if r, err := rset.Parse(d.R); err == nil && len(d.R) > 0 {
						fmt.Fprintf(out, "%s %s\n", d.sign, r.String())
					}
				}
				if r, err := rset.Parse(resp.R); err == nil {
					fmt.Fprintf(out, "job %s: %s (%d nodes, %d cores)\n", id.String(), r.String(), r.NNodes(), r.NCores())
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&o.addNodes, "add-nodes", 0, "add `N` whole nodes")
	f.IntVar(&o.addCores, "add-cores", 0, "add `N` cores")
	f.IntVar(&o.removeNodes, "remove-nodes", 0, "give back the job's last `N` nodes")
	f.StringVar(&o.removeR, "remove", "", "give back the resources in R `FILE` (- for standard input)")
	f.BoolVar(&o.noWait, "no-wait", false, "fail if the resources cannot be had now, instead of waiting for them")
	f.BoolVar(&o.noRelease, "no-release", false, "do not stop the job's tasks on the resources given back: the job releases them itself (shell release)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing")
	return cmd
}
