package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// updateAliases maps flux update's short keys to jobspec keys.
var updateAliases = map[string]string{
	"duration": "attributes.system.duration",
	"name":     "attributes.system.job.name",
	"queue":    "attributes.system.queue",
}

func newUpdateCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "update [--dry-run] JOBID KEY=VALUE...",
		Short: "Update attributes of a pending or running job",
		Long: `Change attributes of an active job after submission. KEY is a jobspec key
(attributes.system.duration, ...) or one of the short names duration, name,
queue, urgency. duration takes an FSD, or +FSD / -FSD to adjust the current
value. Users may change their own pending jobs within configured limits;
the instance owner may change anything, after which the job's owner may no
longer change it. Of a running job, only the name and (by the instance
owner) the duration can change: the new time limit counts from the job's
start.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := jobid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("invalid jobid %q", args[0])
			}
			updates := map[string]any{}
			urgency := -1
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("%q: want KEY=VALUE", kv)
				}
				if k == "urgency" {
					if urgency, err = urgencyValue(v); err != nil {
						return fmt.Errorf("urgency: %w", err)
					}
					continue
				}
				if full, ok := updateAliases[k]; ok {
					k = full
				}
				var val any
				switch {
				case k == "attributes.system.duration":
					d, err := durationUpdate(v)
					if err != nil {
						return fmt.Errorf("duration: %w", err)
					}
					val = d
				case json.Valid([]byte(v)):
					json.Unmarshal([]byte(v), &val)
				default:
					val = v
				}
				updates[k] = val
			}
			if dryRun {
				b, _ := json.Marshal(map[string]any{"id": id, "updates": updates})
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if d, ok := updates["attributes.system.duration"].(relDuration); ok {
					cur, err := currentDuration(ctx, h, id)
					if err != nil {
						return err
					}
					if cur == 0 {
						return fmt.Errorf("duration: job %s has no time limit to adjust by %+gs: give a duration instead", id.String(), float64(d))
					}
					nd := cur + float64(d)
					if nd <= 0 {
						return fmt.Errorf("duration: %s adjusted by %+gs is not positive", fsd.Format(cur), float64(d))
					}
					updates["attributes.system.duration"] = nd
				}
				if len(updates) > 0 {
					if err := h.Call(ctx, "job-manager.update", flux.NodeidAny, map[string]any{"id": id, "updates": updates}, nil); err != nil {
						return err
					}
				}
				if urgency >= 0 {
					if err := h.Call(ctx, "job-manager.urgency", flux.NodeidAny, map[string]any{"id": id, "urgency": urgency}, nil); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "print the update request instead of sending it")
	return cmd
}

// relDuration is a +/- adjustment of the current duration.
type relDuration float64

func durationUpdate(v string) (any, error) {
	sign := 0.0
	switch {
	case strings.HasPrefix(v, "+"):
		sign, v = 1, v[1:]
	case strings.HasPrefix(v, "-"):
		sign, v = -1, v[1:]
	}
	d, err := fsd.Parse(v)
	if err != nil {
		return nil, err
	}
	if sign != 0 {
		return relDuration(sign * d), nil
	}
	return d, nil
}

// currentDuration reads a job's duration from its jobspec (job-info).
func currentDuration(ctx context.Context, h *flux.Handle, id jobid.ID) (float64, error) {
	var resp struct {
		Jobspec string `json:"jobspec"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"jobspec"}, "flags": 0}, &resp); err != nil {
		return 0, fmt.Errorf("reading jobspec of %s: %w", id.String(), err)
	}
	js, err := jobspec.Parse([]byte(resp.Jobspec))
	if err != nil {
		return 0, err
	}
	return js.Duration()
}
