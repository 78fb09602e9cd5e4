package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

func newOverlayErrorsCmd() *cobra.Command {
	var timeout string
	cmd := &cobra.Command{
		Use:   "errors [-t FSD]",
		Short: "Summarize the errors of lost brokers",
		Long: `flux overlay errors walks the overlay tree from rank 0 and prints one line
per distinct error of the brokers that were lost, prefixed by the hosts
that had it, e.g.

  node[2,5]: lost connection
  node[6-7]: lost parent

Brokers below a lost one are reported as "lost parent"; a broker that does
not answer within the timeout is reported with that error. Offline brokers
(not started yet, or shut down cleanly) are not errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := fsd.ParseDuration(timeout)
			if err != nil {
				return fmt.Errorf("--timeout: %w", err)
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				shape, err := instanceShape(ctx, h)
				if err != nil {
					return err
				}
				hosts, _ := instanceHosts(ctx, h)()
				wk := &overlayWalker{h: h, timeout: d, shape: shape, hosts: hosts}
				errs := map[string]*idset.Set{}
				if err := overlayGatherErrors(ctx, wk, 0, errs); err != nil {
					return err
				}
				return overlayPrintErrors(errs, hosts, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().StringVarP(&timeout, "timeout", "t", "0.5s", "give each broker `FSD` to answer (0: no limit)")
	return cmd
}

// overlayGatherErrors adds the errors of the subtree at rank to errs
// (error text -> ranks).
func overlayGatherErrors(ctx context.Context, wk *overlayWalker, rank uint32, errs map[string]*idset.Set) error {
	add := func(r uint32, text string) {
		if errs[text] == nil {
			errs[text] = &idset.Set{}
		}
		errs[text].Add(uint(r))
	}
	below := func(r uint32) {
		for _, c := range wk.shape.children(r) {
			add(c, "lost parent")
			overlaySubtree(wk.shape, c, func(d uint32) { add(d, "lost parent") })
		}
	}
	resp, _, err := wk.query(ctx, rank)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		add(rank, flux.ErrorText(err))
		below(rank)
		return nil
	}
	for _, c := range resp.Children {
		switch c.Status {
		case subtreeLost:
			text := c.Error
			if text == "" {
				text = "unknown error"
			}
			add(c.Rank, text)
			below(c.Rank)
		case subtreeOffline:
		default:
			if err := overlayGatherErrors(ctx, wk, c.Rank, errs); err != nil {
				return err
			}
		}
	}
	return nil
}

// overlaySubtree calls fn for every rank below r.
func overlaySubtree(shape tbonShape, r uint32, fn func(uint32)) {
	for _, c := range shape.children(r) {
		fn(c)
		overlaySubtree(shape, c, fn)
	}
}

// overlayPrintErrors prints "HOSTS: ERROR" lines, ordered by the lowest
// rank having each error (ranks when the hostnames are not known).
func overlayPrintErrors(errs map[string]*idset.Set, hosts *hostlist.Hostlist, w io.Writer) error {
	texts := make([]string, 0, len(errs))
	for t := range errs {
		texts = append(texts, t)
	}
	first := func(s *idset.Set) uint {
		for r := range s.All() {
			return r
		}
		return 0
	}
	sort.Slice(texts, func(i, j int) bool {
		a, b := first(errs[texts[i]]), first(errs[texts[j]])
		return a < b || a == b && texts[i] < texts[j]
	})
	for _, t := range texts {
		who := errs[t].String()
		if hosts != nil {
			if hl, err := overlayLookup(hosts, who); err == nil {
				who = hl
			}
		}
		fmt.Fprintf(w, "%s: %s\n", who, t)
	}
	return nil
}

func newOverlayDisconnectCmd() *cobra.Command {
	var parent int64
	cmd := &cobra.Command{
		Use:   "disconnect [-r PARENT] TARGET",
		Short: "Disconnect the overlay subtree rooted at a broker",
		Long: `flux overlay disconnect asks the overlay parent of TARGET (a rank or a
hostname) to drop its link to TARGET, for a broker that is hung but not
yet seen as lost. TARGET is then lost ("administrative disconnect" in flux
overlay errors), and its subtree shuts down. -r/--parent names the parent
rank to ask instead of the one from the topology.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return overlayDisconnect(ctx, h, args[0], parent, cmd.ErrOrStderr())
			})
		},
	}
	cmd.Flags().Int64VarP(&parent, "parent", "r", -1, "ask broker `NODEID` (default: TARGET's parent)")
	return cmd
}

func overlayDisconnect(ctx context.Context, h *flux.Handle, target string, parent int64, stderr io.Writer) error {
	shape, err := instanceShape(ctx, h)
	if err != nil {
		return err
	}
	hosts, _ := instanceHosts(ctx, h)()
	var rank uint32
	if n, err := strconv.ParseUint(target, 10, 32); err == nil {
		rank = uint32(n)
	} else {
		i := -1
		if hosts != nil {
			i = hosts.Find(target)
		}
		if i < 0 {
			return fmt.Errorf("TARGET must be a valid rank or hostname: %q is neither", target)
		}
		rank = uint32(i)
	}
	if rank >= shape.size {
		return fmt.Errorf("%d is not a valid rank in this instance (size %d)", rank, shape.size)
	}
	if parent < 0 {
		p, ok := shape.parent(rank)
		if !ok {
			return fmt.Errorf("%d has no parent", rank)
		}
		parent = int64(p)
	} else if parent >= int64(shape.size) {
		return fmt.Errorf("--parent=%d is not a valid rank in this instance (size %d)", parent, shape.size)
	}
	name := func(r uint32) string {
		if hosts != nil {
			if s, err := hosts.Nth(int(r)); err == nil {
				return s
			}
		}
		return "rank" + strconv.Itoa(int(r))
	}
	fmt.Fprintf(stderr, "flux-overlay: asking %s (rank %d) to disconnect child %s (rank %d)\n",
		name(uint32(parent)), parent, name(rank), rank)
	if err := h.Call(ctx, "overlay.disconnect-subtree", uint32(parent), map[string]any{"rank": rank}, nil); err != nil {
		return fmt.Errorf("overlay.disconnect-subtree: %s", flux.ErrorText(err))
	}
	return nil
}
