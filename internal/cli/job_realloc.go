package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux job realloc: grow or shrink a running job (RFC 51 through
// job-manager.realloc; see internal/modules/jobmanager/realloc.go).

type jobReallocOptions struct {
	addNodes, addCores, removeNodes int
	removeR                         string
	quiet                           bool
}

func newJobReallocCmd() *cobra.Command {
	var o jobReallocOptions
	cmd := &cobra.Command{
		Use:   "realloc [--add-nodes=N | --add-cores=N] [--remove-nodes=N | --remove=R-FILE] ID",
		Short: "Grow or shrink a running job's resources (RFC 51)",
		Long: `Ask the scheduler for more resources for running job ID (--add-nodes
whole nodes, or --add-cores cores), or give some back: its last nodes
(--remove-nodes) or the resources in an R file (--remove, "-" for
standard input). The job's R, its eventlog (resource-update) and flux
jobs show the change; resources given back are freed at once, so give
back only what the job no longer uses. Prints what changed and the job's
resources; a request the scheduler cannot satisfy now is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			id, err := parseJobIDArg(args[0])
			if err != nil {
				return err
			}
			req := map[string]any{"id": id}
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
				if req["spec_add"], err = spec(jobspec.CommandOptions{NTasks: o.addNodes, NNodes: o.addNodes, Exclusive: true}); err != nil {
					return err
				}
			}
			if o.addCores > 0 {
				if req["spec_add"], err = spec(jobspec.CommandOptions{NTasks: o.addCores}); err != nil {
					return err
				}
			}
			if o.removeNodes > 0 {
				if req["spec_sub"], err = spec(jobspec.CommandOptions{NTasks: o.removeNodes, NNodes: o.removeNodes}); err != nil {
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
				if _, err := rset.Parse(b); err != nil {
					return fmt.Errorf("--remove=%s: %w", o.removeR, err)
				}
				req["R"] = json.RawMessage(b)
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				var resp job.ReallocResponse
				if err := h.Call(ctx, "job-manager.realloc", flux.NodeidAny, req, &resp); err != nil {
					return err
				}
				if resp.Type != job.ReallocSuccess {
					what := map[int]string{job.ReallocDeny: "denied", job.ReallocCancel: "canceled", job.ReallocUnsupported: "not supported by the scheduler"}[resp.Type]
					return fmt.Errorf("%s: %s: %s", id.String(), what, resp.Note)
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
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing")
	return cmd
}
