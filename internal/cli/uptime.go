package cli

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

func newUptimeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "uptime",
		Short: "Tell how long this Flux instance has been running",
		Long: `flux uptime prints, on one line: the time of day, the local broker's state,
how long the instance has been running (or, when the broker is not in the
run state, how long this broker has been up), the instance owner, the
instance depth, its size, and the numbers of drained and offline nodes
when there are any. A second line says "submit disabled" when job
submission is disabled on all queues and "scheduler disabled" when
scheduling is stopped on all queues.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				info, err := getUptimeInfo(ctx, h)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), info.format(time.Now()))
				return nil
			})
		},
	}
}

// uptimeInfo is what flux uptime reports.
type uptimeInfo struct {
	state   string
	uptime  float64 // seconds
	owner   string
	depth   int
	size    int
	drained int
	offline int
	// submitDisabled: submission is disabled on every queue;
	// schedDisabled: scheduling is stopped on every queue.
	submitDisabled bool
	schedDisabled  bool
}

// format renders the flux uptime line:
//
//	15:04:05 run 3.2m,  owner alice,  depth 0,  size 8,  1 offline
func (u uptimeInfo) format(now time.Time) string {
	s := fmt.Sprintf(" %s %s %s,  owner %s,  depth %d,  size %d",
		now.Format("15:04:05"), u.state, fsd.FormatPrecision(u.uptime, 2), u.owner, u.depth, u.size)
	if u.drained > 0 {
		s += fmt.Sprintf(",  %d drained", u.drained)
	}
	if u.offline > 0 {
		s += fmt.Sprintf(",  %d offline", u.offline)
	}
	var notices []string
	if u.submitDisabled {
		notices = append(notices, "submit disabled")
	}
	if u.schedDisabled {
		notices = append(notices, "scheduler disabled")
	}
	if len(notices) > 0 {
		s += "\n  " + strings.Join(notices, ",  ")
	}
	return s
}

// queuesDisabled reports whether submission is disabled and whether
// scheduling is stopped on every queue (the anonymous queue when there
// are no named ones). An instance without a job manager has neither.
func queuesDisabled(ctx context.Context, h *flux.Handle) (submit, sched bool, err error) {
	names, err := queueNames(ctx, h)
	if errors.Is(err, syscall.ENOSYS) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("queue-list: %w", err)
	}
	if len(names) == 0 {
		names = []string{""}
	}
	submit, sched = true, true
	for _, name := range names {
		st, err := getQueueStatus(ctx, h, name)
		if err != nil {
			return false, false, fmt.Errorf("queue-status: %w", err)
		}
		submit = submit && !st.Enable
		sched = sched && !st.Start
	}
	return submit, sched, nil
}

// attrAt reads a broker attribute from the broker at nodeid (no caching:
// Handle.Attr only asks the local broker).
func attrAt(ctx context.Context, h *flux.Handle, nodeid uint32, name string) (string, error) {
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(ctx, "attr.get", nodeid, map[string]string{"name": name}, &resp); err != nil {
		return "", fmt.Errorf("getattr %s: %w", name, err)
	}
	return resp.Value, nil
}

func attrInt(ctx context.Context, h *flux.Handle, name string) (int, error) {
	s, err := h.Attr(ctx, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("attribute %s=%q is not an integer", name, s)
	}
	return n, nil
}

func getUptimeInfo(ctx context.Context, h *flux.Handle) (uptimeInfo, error) {
	var u uptimeInfo
	var err error
	if u.state, err = attrAt(ctx, h, flux.NodeidAny, "broker.state"); err != nil {
		return u, err
	}
	// In the run state the instance's age is rank 0's; otherwise report
	// the local broker's.
	where := flux.NodeidAny
	if u.state == "run" {
		where = 0
	}
	up, err := attrAt(ctx, h, where, "broker.uptime")
	if err != nil {
		return u, err
	}
	if u.uptime, err = strconv.ParseFloat(up, 64); err != nil || u.uptime < 0 {
		return u, fmt.Errorf("attribute broker.uptime=%q is not a duration in seconds", up)
	}
	uid, err := attrInt(ctx, h, "security.owner")
	if err != nil {
		return u, err
	}
	u.owner = strconv.Itoa(uid)
	if usr, err := user.LookupId(u.owner); err == nil {
		u.owner = usr.Username
	}
	if u.depth, err = attrInt(ctx, h, "instance-level"); err != nil {
		return u, err
	}
	if u.size, err = attrInt(ctx, h, "size"); err != nil {
		return u, err
	}
	if u.state != "run" {
		return u, nil
	}
	if u.drained, err = drainedCount(ctx, h); err != nil {
		return u, err
	}
	if u.offline, err = offlineCount(ctx, h, u.size); err != nil {
		return u, err
	}
	if u.submitDisabled, u.schedDisabled, err = queuesDisabled(ctx, h); err != nil {
		return u, err
	}
	return u, nil
}

// drainedCount asks the resource service how many nodes are drained (0
// when the instance has no resource service).
func drainedCount(ctx context.Context, h *flux.Handle) (int, error) {
	st, err := resource.GetStatus(ctx, h)
	if errors.Is(err, syscall.ENOSYS) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("resource.status: %w", err)
	}
	return st.Drained().Count(), nil
}

// offlineCount is the number of brokers not on the overlay: from the
// broker.online group where a groups service exists, otherwise from the
// overlay status of every broker.
func offlineCount(ctx context.Context, h *flux.Handle, size int) (int, error) {
	var resp struct {
		Members string `json:"members"`
	}
	err := h.Call(ctx, "groups.get", 0, map[string]string{"name": "broker.online"}, &resp)
	if err == nil {
		ids, err := idset.Parse(resp.Members)
		if err != nil {
			return 0, fmt.Errorf("groups.get broker.online: %w", err)
		}
		return size - ids.Count(), nil
	}
	if !errors.Is(err, syscall.ENOSYS) {
		return 0, fmt.Errorf("groups.get broker.online: %w", err)
	}
	shape, err := instanceShape(ctx, h)
	if err != nil {
		return 0, err
	}
	wk := &overlayWalker{h: h, timeout: 500 * time.Millisecond, shape: shape}
	tree, err := wk.walk(ctx, 0, "", -1, true)
	if err != nil {
		return 0, err
	}
	return countDown(tree), nil
}

// countDown counts the lost and offline brokers in a status tree.
func countDown(n *overlayNode) int {
	c := 0
	if n.status == subtreeLost || n.status == subtreeOffline {
		c++
	}
	for _, k := range n.children {
		c += countDown(k)
	}
	return c
}
