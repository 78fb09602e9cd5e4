package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

func newOverlayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "overlay",
		Short: "Show the status of the tree-based overlay network",
	}
	cmd.AddCommand(newOverlayStatusCmd(), newOverlayErrorsCmd(), newOverlayLookupCmd(), newOverlayParentofCmd(), newOverlayDisconnectCmd(), newOverlayTraceCmd())
	return cmd
}

// Subtree status values (flux-overlay(1) SUBTREE STATUS).
const (
	subtreeFull     = "full"
	subtreePartial  = "partial"
	subtreeDegraded = "degraded"
	subtreeLost     = "lost"
	subtreeOffline  = "offline"
)

func validSubtreeStatus(s string) bool {
	switch s {
	case subtreeFull, subtreePartial, subtreeDegraded, subtreeLost, subtreeOffline:
		return true
	}
	return false
}

// overlayStatusOptions are the flux overlay status flags.
type overlayStatusOptions struct {
	rank     string
	verbose  int
	timeout  time.Duration
	summary  bool
	down     bool
	noPretty bool
	noGhost  bool
	color    string
	wait     string
}

func newOverlayStatusCmd() *cobra.Command {
	var o overlayStatusOptions
	var timeout string
	cmd := &cobra.Command{
		Use:   "status [OPTIONS]",
		Short: "Show the overlay network's health, broker by broker",
		Long: `flux overlay status asks each broker, from rank 0 (or --rank) down, for the
state of its overlay children and prints the tree with each subtree's status:

  full      online, and every child is full
  partial   online; some children partial or offline, none degraded or lost
  degraded  online; some children degraded or lost
  lost      gone missing, as its parent sees it
  offline   not joined yet, or shut down cleanly

Brokers below a lost or offline broker can't be asked; they are shown with
its status, presumed (omit them with --no-ghost).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := fsd.ParseDuration(timeout)
			if err != nil {
				return fmt.Errorf("--timeout: %w", err)
			}
			o.timeout = d
			if o.wait != "" && !validSubtreeStatus(o.wait) {
				return fmt.Errorf("--wait=%q: must be full, partial, degraded, lost or offline", o.wait)
			}
			color, err := useColor(o.color, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return overlayStatus(ctx, h, o, color, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.rank, "rank", "r", "0", "show the subtree rooted at rank `N`")
	f.CountVarP(&o.verbose, "verbose", "v", "show time in the current state (-vv: and RPC round-trip times)")
	f.StringVarP(&timeout, "timeout", "t", "0.5s", "give each broker `FSD` to answer (0: no limit)")
	f.BoolVar(&o.summary, "summary", false, "show only the root subtree's status")
	f.BoolVar(&o.down, "down", false, "show only the subtrees that are not full")
	f.BoolVar(&o.noPretty, "no-pretty", false, "don't indent entries or draw the tree")
	f.BoolVar(&o.noGhost, "no-ghost", false, "don't show brokers hidden behind lost or offline ones")
	addColorFlag(f, &o.color, true)
	f.StringVarP(&o.wait, "wait", "w", "", "wait until the subtree's status is `STATE`, then report")
	return cmd
}

// tbonShape is the k-ary tree of an instance (RFC 3 overlay topology):
// rank r's children are k*r+1 .. k*r+k.
type tbonShape struct {
	size, fanout uint32
}

func (t tbonShape) children(r uint32) []uint32 {
	var out []uint32
	for i := uint32(1); i <= t.fanout; i++ {
		c := uint64(r)*uint64(t.fanout) + uint64(i)
		if c >= uint64(t.size) {
			break
		}
		out = append(out, uint32(c))
	}
	return out
}

func (t tbonShape) parent(r uint32) (uint32, bool) {
	if r == 0 || t.fanout == 0 {
		return 0, false
	}
	return (r - 1) / t.fanout, true
}

// instanceShape reads size and tbon.fanout from the local broker.
func instanceShape(ctx context.Context, h *flux.Handle) (tbonShape, error) {
	var sh tbonShape
	for _, a := range []struct {
		name string
		dst  *uint32
	}{{"size", &sh.size}, {"tbon.fanout", &sh.fanout}} {
		s, err := h.Attr(ctx, a.name)
		if err != nil {
			return sh, err
		}
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n == 0 {
			return sh, fmt.Errorf("attribute %s=%q is not a positive integer", a.name, s)
		}
		*a.dst = uint32(n)
	}
	return sh, nil
}

// overlayNode is one broker in the status tree.
type overlayNode struct {
	rank     uint32
	host     string
	status   string        // subtree status; presumed for ghosts
	errText  string        // set when the broker could not be asked
	duration float64       // seconds in the current state; < 0: unknown
	rtt      time.Duration // overlay.status round trip; 0: not asked
	ghost    bool          // behind a lost or offline broker: not asked
	children []*overlayNode
}

type overlayStatusResponse = flux.OverlayStatus

// overlayWalker asks brokers for their overlay.status, down the tree.
type overlayWalker struct {
	h       *flux.Handle
	timeout time.Duration
	shape   tbonShape
	hosts   *hostlist.Hostlist // may be nil
}

func (wk *overlayWalker) hostname(rank uint32) string {
	if wk.hosts == nil {
		return ""
	}
	s, err := wk.hosts.Nth(int(rank))
	if err != nil {
		return ""
	}
	return s
}

func (wk *overlayWalker) query(parent context.Context, rank uint32) (*overlayStatusResponse, time.Duration, error) {
	ctx := parent
	if wk.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, wk.timeout)
		defer cancel()
	}
	t0 := time.Now()
	var resp overlayStatusResponse
	err := wk.h.Call(ctx, "overlay.status", rank, nil, &resp)
	rtt := time.Since(t0)
	// the rank's own timeout, not the command's context ending
	if errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil {
		err = fmt.Errorf("no answer within %s", fsd.FormatDuration(wk.timeout))
	}
	return &resp, rtt, err
}

// walk builds the subtree at rank. link is the rank's state as its parent
// sees it ("" for the root of the walk) and linkDur the time in it.
func (wk *overlayWalker) walk(ctx context.Context, rank uint32, link string, linkDur float64, root bool) (*overlayNode, error) {
	n := &overlayNode{rank: rank, host: wk.hostname(rank), duration: linkDur}
	if link == subtreeLost || link == subtreeOffline {
		n.status = link
		n.children = wk.ghosts(rank, link)
		return n, nil
	}
	resp, rtt, err := wk.query(ctx, rank)
	if err != nil {
		if root || ctx.Err() != nil {
			return nil, fmt.Errorf("rank %d: %w", rank, err)
		}
		n.errText = flux.ErrorText(err)
		n.status = subtreeDegraded
		n.children = wk.ghosts(rank, link)
		return n, nil
	}
	n.rtt = rtt
	if resp.Hostname != "" {
		n.host = resp.Hostname
	}
	if root {
		n.duration = resp.Uptime
	}
	n.children = make([]*overlayNode, len(resp.Children))
	errs := make([]error, len(resp.Children))
	var wg sync.WaitGroup
	for i, c := range resp.Children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.children[i], errs[i] = wk.walk(ctx, c.Rank, c.Status, c.Duration, false)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	n.status = subtreeStatus(n.children)
	return n, nil
}

// ghosts fills in the brokers below an unreachable one with its status.
func (wk *overlayWalker) ghosts(rank uint32, status string) []*overlayNode {
	var out []*overlayNode
	for _, c := range wk.shape.children(rank) {
		out = append(out, &overlayNode{rank: c, host: wk.hostname(c), status: status,
			duration: -1, ghost: true, children: wk.ghosts(c, status)})
	}
	return out
}

// subtreeStatus is an online broker's subtree status given its children's.
func subtreeStatus(children []*overlayNode) string {
	st := subtreeFull
	for _, c := range children {
		switch c.status {
		case subtreeDegraded, subtreeLost:
			return subtreeDegraded
		case subtreePartial, subtreeOffline:
			st = subtreePartial
		}
	}
	return st
}

func overlayStatus(ctx context.Context, h *flux.Handle, o overlayStatusOptions, color bool, w io.Writer) error {
	rank, err := parseNodeid(o.rank, nil)
	if err != nil || rank == flux.NodeidAny || rank == flux.NodeidUpstream {
		return fmt.Errorf("--rank=%q: must be a rank", o.rank)
	}
	shape, err := instanceShape(ctx, h)
	if err != nil {
		return err
	}
	if rank >= shape.size {
		return fmt.Errorf("--rank=%d: the instance has %d brokers", rank, shape.size)
	}
	wk := &overlayWalker{h: h, timeout: o.timeout, shape: shape}
	if s, err := h.Attr(ctx, "hostlist"); err == nil {
		wk.hosts, _ = hostlist.Parse(s)
	}
	var tree *overlayNode
	for {
		if tree, err = wk.walk(ctx, rank, "", -1, true); err != nil {
			if o.wait != "" && ctx.Err() != nil {
				return fmt.Errorf("interrupted while waiting for %s", o.wait)
			}
			return err
		}
		if o.wait == "" || tree.status == o.wait {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s (now %s)", o.wait, tree.status)
		case <-time.After(250 * time.Millisecond):
		}
	}
	p := overlayPrinter{w: w, verbose: o.verbose, pretty: !o.noPretty, ghosts: !o.noGhost, down: o.down, color: color}
	if o.summary {
		fmt.Fprintln(w, p.describe(tree))
		return nil
	}
	p.print(tree, "", "")
	return nil
}

// overlayPrinter renders a status tree like flux-overlay(1):
//
//	0 host0: degraded
//	├─ 1 host1: full
//	└─ 2 host2: lost
type overlayPrinter struct {
	w       io.Writer
	verbose int
	pretty  bool
	ghosts  bool
	down    bool
	color   bool
}

// describe is a node's "status[ for DURATION][ (RTT ms)]".
func (p *overlayPrinter) describe(n *overlayNode) string {
	if n.errText != "" {
		return n.errText
	}
	s := n.status
	switch {
	case n.ghost:
		s = paint(p.color, sgrGray, s)
	case s == subtreeLost || s == subtreeDegraded:
		s = paint(p.color, sgrRed, s)
	case s == subtreeOffline || s == subtreePartial:
		s = paint(p.color, sgrYellow, s)
	}
	if p.verbose >= 1 && n.duration >= 0 {
		s += " for " + fsd.Format(n.duration)
	}
	if p.verbose >= 2 && n.rtt > 0 {
		s += fmt.Sprintf(" (%.3f ms)", ms(n.rtt))
	}
	return s
}

func (p *overlayPrinter) name(n *overlayNode) string {
	if n.host == "" {
		return strconv.FormatUint(uint64(n.rank), 10)
	}
	return fmt.Sprintf("%d %s", n.rank, n.host)
}

// print writes n with prefix and its children, which are drawn under
// childPrefix.
func (p *overlayPrinter) print(n *overlayNode, prefix, childPrefix string) {
	fmt.Fprintf(p.w, "%s%s: %s\n", prefix, p.name(n), p.describe(n))
	var shown []*overlayNode
	for _, c := range n.children {
		if (c.ghost && !p.ghosts) || (p.down && c.status == subtreeFull && c.errText == "") {
			continue
		}
		shown = append(shown, c)
	}
	for i, c := range shown {
		if !p.pretty {
			p.print(c, "", "")
			continue
		}
		if i == len(shown)-1 {
			p.print(c, childPrefix+"└─ ", childPrefix+"   ")
		} else {
			p.print(c, childPrefix+"├─ ", childPrefix+"│  ")
		}
	}
}

func newOverlayLookupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lookup TARGET",
		Short: "Translate ranks to hostnames or hostnames to ranks",
		Long: `With an idset of ranks ("0-2"), print their hostlist; with a hostlist
("node[1-2]"), print the ranks of those hosts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				hosts, err := instanceHosts(ctx, h)()
				if err != nil {
					return err
				}
				out, err := overlayLookup(hosts, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), out)
				return nil
			})
		},
	}
}

// overlayLookup maps an idset of ranks to a hostlist, or a hostlist to an
// idset of ranks.
func overlayLookup(hosts *hostlist.Hostlist, target string) (string, error) {
	if ranks, err := idset.Parse(target); err == nil {
		out := hostlist.New()
		for r := range ranks.All() {
			host, err := hosts.Nth(int(r))
			if err != nil {
				return "", fmt.Errorf("rank %d is not in this instance (size %d)", r, hosts.Len())
			}
			out.Append(host)
		}
		return out.String(), nil
	}
	hl, err := hostlist.Parse(target)
	if err != nil {
		return "", fmt.Errorf("%q is neither an idset of ranks nor a hostlist: %w", target, err)
	}
	var ranks idset.Set
	for host := range hl.All() {
		i := hosts.Find(host)
		if i < 0 {
			return "", fmt.Errorf("host %q is not in this instance", host)
		}
		ranks.Add(uint(i))
	}
	return ranks.String(), nil
}

func newOverlayParentofCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "parentof RANK",
		Short: "Print the overlay parent of a broker rank",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rank, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("rank %q is not a non-negative integer", args[0])
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				shape, err := instanceShape(ctx, h)
				if err != nil {
					return err
				}
				if uint32(rank) >= shape.size {
					return fmt.Errorf("rank %d is not in this instance (size %d)", rank, shape.size)
				}
				p, ok := shape.parent(uint32(rank))
				if !ok {
					return fmt.Errorf("rank 0 has no parent")
				}
				fmt.Fprintln(cmd.OutOrStdout(), p)
				return nil
			})
		},
	}
}
