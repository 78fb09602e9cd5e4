package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux resource grow / shrink: a nested instance (flux alloc, flux
// batch) asks the enclosing instance for more nodes or gives some back,
// through its job's shell there (RFC 51). Growing ends once the new
// brokers have joined and their resources are up here; shrinking drains
// the instance's last nodes, waits for their jobs to end, stops their
// brokers (overlay.shrink) and only then gives the nodes back.

// enclosingJob is what a nested instance knows of the job it runs as.
type enclosingJob struct {
	uri string
	id  jobid.ID
}

func enclosingOf(ctx context.Context, h *flux.Handle) (*enclosingJob, error) {
	uri, err1 := h.Attr(ctx, "parent-uri")
	ids, err2 := h.Attr(ctx, "jobid")
	if err1 != nil || err2 != nil || uri == "" || ids == "" {
		return nil, fmt.Errorf("this instance does not run as a job of another (no parent-uri and jobid attributes): there is nothing to grow from or give back to")
	}
	id, err := jobid.Parse(ids)
	if err != nil {
		return nil, fmt.Errorf("jobid attribute %q: %w", ids, err)
	}
	return &enclosingJob{uri: uri, id: id}, nil
}

// waitTimeout bounds the waits of grow and shrink (new brokers joining,
// jobs draining): --timeout.
type resizeOptions struct {
	nodes   int
	noWait  bool
	timeout time.Duration
}

func newResourceGrowCmd() *cobra.Command {
	var o resizeOptions
	cmd := &cobra.Command{
		Use:   "grow --nodes=N [--no-wait]",
		Short: "Grow this nested instance by N nodes of the enclosing one (RFC 51)",
		Long: `Ask the enclosing instance (this instance runs as one of its jobs, as
flux alloc and flux batch start it) for N more nodes. The request waits
in the enclosing instance's queue until it can be met (--no-wait: fail at
once), brokers start on the new nodes and join this instance, and the
command ends once their resources are up here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.nodes < 1 {
				return fmt.Errorf("--nodes=%d: give a number of nodes of at least 1", o.nodes)
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				enc, err := enclosingOf(ctx, h)
				if err != nil {
					return err
				}
				before, err := resource.GetStatus(ctx, h)
				if err != nil {
					return err
				}
				ph, err := flux.Open(enc.uri)
				if err != nil {
					return fmt.Errorf("enclosing instance %s: %w", enc.uri, err)
				}
				defer ph.Close()
				js, err := jobspec.FromCommand([]string{"grow"}, jobspec.CommandOptions{NTasks: o.nodes, NNodes: o.nodes, Exclusive: true})
				if err != nil {
					return err
				}
				spec, _ := js.MarshalJSON()
				resp, err := job.ShellRealloc(ctx, ph, uint32(os.Getuid()), enc.id, job.ReallocRequest{SpecAdd: spec, NoWait: o.noWait})
				if err != nil {
					return err
				}
				if resp.Type != job.ReallocSuccess {
					return fmt.Errorf("enclosing job %s: %s: %s", enc.id.String(), job.ReallocTypeName(resp.Type), resp.Note)
				}
				add, err := rset.Parse(resp.RDeltaAdd)
				if err != nil {
					return fmt.Errorf("R_delta_add: %w", err)
				}
				want := before.R.NNodes() + add.NNodes()
				wctx, cancel := context.WithTimeout(ctx, o.timeout)
				defer cancel()
				var st *resource.Status
				for {
					st, err = resource.GetStatus(wctx, h)
					if err == nil && st.R.NNodes() >= want && st.Online.Count() >= want {
						break
					}
					select {
					case <-wctx.Done():
						return fmt.Errorf("the enclosing job grew by %s, but its brokers had not all joined here after %v", add.String(), o.timeout)
					case <-time.After(50 * time.Millisecond):
					}
				}
				var ranks idset.Set
				ranks.AddRange(uint(before.R.NNodes()), uint(want-1))
				fmt.Fprintf(cmd.OutOrStdout(), "grew by %d node(s): ranks %s (%s); %d nodes\n", add.NNodes(),
					ranks.String(), add.Nodelist().String(), st.R.NNodes())
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.nodes, "nodes", 1, "add `N` nodes")
	f.BoolVar(&o.noWait, "no-wait", false, "fail if the enclosing instance cannot give the nodes now")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the new brokers to join")
	return cmd
}

func newResourceShrinkCmd() *cobra.Command {
	var o resizeOptions
	cmd := &cobra.Command{
		Use:   "shrink --nodes=N",
		Short: "Give the last N nodes of this nested instance back to the enclosing one (RFC 51)",
		Long: `Give back this instance's last N nodes (its highest ranks; never rank 0)
to the enclosing instance: they are drained, the jobs running on them end
(the command waits for them, up to --timeout), their brokers stop, and
the enclosing job releases them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				enc, err := enclosingOf(ctx, h)
				if err != nil {
					return err
				}
				sizeAttr, err := h.Attr(ctx, "size")
				if err != nil {
					return err
				}
				size, _ := strconv.Atoi(sizeAttr)
				if o.nodes < 1 || o.nodes >= size {
					return fmt.Errorf("--nodes=%d: this instance has %d nodes: give back from 1 to %d (rank 0 stays)", o.nodes, size, size-1)
				}
				keep := size - o.nodes
				var ranks idset.Set
				ranks.AddRange(uint(keep), uint(size-1))
				progress := cmd.ErrOrStderr()
				if err := resource.Drain(ctx, h, ranks.String(), "giving the nodes back to the enclosing instance", "update"); err != nil {
					return fmt.Errorf("draining ranks %s: %w", ranks.String(), err)
				}
				wctx, cancel := context.WithTimeout(ctx, o.timeout)
				defer cancel()
				said := false
				for {
					ss, err := resource.GetSchedStatus(wctx, h)
					if err == nil && ss.Allocated.CopyRanks(ranks).Empty() {
						break
					}
					if !said {
						fmt.Fprintf(progress, "flux-resource: waiting for the jobs on ranks %s to end\n", ranks.String())
						said = true
					}
					select {
					case <-wctx.Done():
						return fmt.Errorf("jobs still run on ranks %s after %v (they stay drained: flux resource undrain %s)", ranks.String(), o.timeout, ranks.String())
					case <-time.After(100 * time.Millisecond):
					}
				}
				var mapped struct {
					Ranks string `json:"ranks"`
				}
				if err := h.Call(ctx, "resource.enclosing-ranks", 0, map[string]string{"ranks": ranks.String()}, &mapped); err != nil {
					return err
				}
				ph, err := flux.Open(enc.uri)
				if err != nil {
					return fmt.Errorf("enclosing instance %s: %w", enc.uri, err)
				}
				defer ph.Close()
				pranks, err := idset.Parse(mapped.Ranks)
				if err != nil {
					return fmt.Errorf("enclosing ranks %q: %w", mapped.Ranks, err)
				}
				var info struct {
					R string `json:"R"`
				}
				if err := ph.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": enc.id, "keys": []string{"R"}, "flags": 0}, &info); err != nil {
					return fmt.Errorf("enclosing job %s: %w", enc.id.String(), err)
				}
				jobR, err := rset.Parse([]byte(info.R))
				if err != nil {
					return fmt.Errorf("enclosing job %s: R: %w", enc.id.String(), err)
				}
				sub := jobR.CopyRanks(pranks)
				js, err := jobspec.FromCommand([]string{"shrink"}, jobspec.CommandOptions{NTasks: o.nodes, NNodes: o.nodes})
				if err != nil {
					return err
				}
				spec, _ := js.MarshalJSON()
				uid := uint32(os.Getuid())
				resp, err := job.ShellRealloc(ctx, ph, uid, enc.id, job.ReallocRequest{SpecSub: spec, R: sub.Encode()})
				if err != nil {
					return err
				}
				if resp.Type != job.ReallocSuccess {
					return fmt.Errorf("enclosing job %s: %s: %s", enc.id.String(), job.ReallocTypeName(resp.Type), resp.Note)
				}
				// the brokers leave before their nodes go
				if err := h.Call(ctx, "overlay.shrink", 0, map[string]int{"size": keep}, nil); err != nil {
					return fmt.Errorf("stopping the brokers of ranks %s: %w", ranks.String(), err)
				}
				if err := job.ShellRelease(context.WithoutCancel(ctx), ph, uid, enc.id, json.RawMessage(resp.RDeltaSub)); err != nil {
					return fmt.Errorf("giving back %s: %w", sub.String(), err)
				}
				for {
					st, err := resource.GetStatus(wctx, h)
					if err == nil && st.R.NNodes() == keep {
						break
					}
					select {
					case <-wctx.Done():
						return fmt.Errorf("ranks %s were given back, but this instance's inventory still has them after %v", ranks.String(), o.timeout)
					case <-time.After(50 * time.Millisecond):
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "gave back %d node(s): ranks %s (%s); %d nodes\n", o.nodes, ranks.String(), sub.Nodelist().String(), keep)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.nodes, "nodes", 1, "give back the last `N` nodes")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the jobs on those nodes to end")
	return cmd
}
