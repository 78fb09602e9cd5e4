package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// flux queue: list, status and control the job queues (flux-queue(1)).

func newQueueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List and manipulate flux queues",
		Long: `List and control the instance's job queues. Without [queues] in the
configuration there is one anonymous queue; named queues are configured
with [queues.NAME] tables (see docs/JOBS.md).

Submission (enable/disable) decides whether jobs may be submitted to a
queue; scheduling (start/stop) whether its pending jobs are given
resources. Changing either is for the instance owner, and is kept across
a restart of the instance (unless --nocheckpoint).`,
	}
	cmd.AddCommand(newQueueListCmd(), newQueueStatusCmd(),
		newQueueControlCmd("enable", "Allow jobs to be submitted to the queue"),
		newQueueControlCmd("disable", "Refuse jobs submitted to the queue, with a reason shown to submitters"),
		newQueueControlCmd("start", "Start allocating resources to the queue's jobs"),
		newQueueControlCmd("stop", "Stop allocating resources to the queue's jobs (pending jobs stay queued, running jobs run on)"),
		newQueueWaitCmd("drain", "Block until every queue is empty (no active jobs)"),
		newQueueWaitCmd("idle", "Block until no job is running or waiting for the scheduler's answer"))
	return cmd
}

// queueStatus is job-manager.queue-status's answer.
type queueStatus = job.QueueStatus

// queueNames returns the named queues ([] without any).
func queueNames(ctx context.Context, h *flux.Handle) ([]string, error) {
	var resp job.QueueListResponse
	if err := h.Call(ctx, "job-manager.queue-list", flux.NodeidAny, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Queues, nil
}

func getQueueStatus(ctx context.Context, h *flux.Handle, name string) (queueStatus, error) {
	var st queueStatus
	err := h.Call(ctx, "job-manager.queue-status", flux.NodeidAny, job.QueueStatusRequest{Name: name}, &st)
	return st, err
}

// printEnableStatus prints flux-core's submission line of a queue.
func printEnableStatus(w io.Writer, name string, st queueStatus) {
	prefix := ""
	if name != "" {
		prefix = name + ": "
	}
	if st.Enable {
		fmt.Fprintf(w, "%sJob submission is enabled\n", prefix)
	} else {
		fmt.Fprintf(w, "%sJob submission is disabled: %s\n", prefix, st.DisableReason)
	}
}

// printStartStatus prints flux-core's scheduling line of a queue.
func printStartStatus(w io.Writer, name string, st queueStatus) {
	prefix := ""
	if name != "" {
		prefix = name + ": "
	}
	switch {
	case st.Start:
		fmt.Fprintf(w, "%sScheduling is started\n", prefix)
	case st.StopReason != "":
		fmt.Fprintf(w, "%sScheduling is stopped: %s\n", prefix, st.StopReason)
	default:
		fmt.Fprintf(w, "%sScheduling is stopped\n", prefix)
	}
}

// printQueueStatus prints both status lines of a queue.
func printQueueStatus(w io.Writer, name string, st queueStatus) {
	printEnableStatus(w, name, st)
	printStartStatus(w, name, st)
}

// statusOf prints the status of queue name, or of every queue when name
// is "" or all is set (flux-core's -v shows every queue), with show.
func statusOf(ctx context.Context, h *flux.Handle, w io.Writer, name string, all bool,
	show func(io.Writer, string, queueStatus)) error {
	if name != "" {
		// a queue that does not exist is an error, even with -v
		st, err := getQueueStatus(ctx, h, name)
		if err != nil {
			return err
		}
		if !all {
			show(w, name, st)
			return nil
		}
	}
	names, err := queueNames(ctx, h)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = []string{""} // the anonymous queue
	}
	for _, n := range names {
		st, err := getQueueStatus(ctx, h, n)
		if err != nil {
			return err
		}
		show(w, n, st)
	}
	return nil
}

// allocCounts is job-manager.alloc-query's answer.
type allocCounts struct {
	QueueLength  int `json:"queue_length"`
	AllocPending int `json:"alloc_pending"`
	Running      int `json:"running"`
}

// printAllocCounts prints the job manager's scheduling counts, as
// flux-core's -v does.
func printAllocCounts(ctx context.Context, h *flux.Handle, w io.Writer) error {
	var c allocCounts
	if err := h.Call(ctx, "job-manager.alloc-query", flux.NodeidAny, nil, &c); err != nil {
		return fmt.Errorf("alloc-query: %w", err)
	}
	fmt.Fprintf(w, "%d alloc requests queued\n", c.QueueLength)
	fmt.Fprintf(w, "%d alloc requests pending to scheduler\n", c.AllocPending)
	fmt.Fprintf(w, "%d running jobs\n", c.Running)
	return nil
}

// queueArg returns the queue a subcommand names: its QUEUE argument, or
// -q/--queue NAME (flux-core keeps that older spelling), not both.
func queueArg(cmd *cobra.Command, args []string, opt string) (string, error) {
	if !cmd.Flags().Changed("queue") {
		if len(args) == 1 {
			return args[0], nil
		}
		return "", nil
	}
	if len(args) == 1 {
		return "", fmt.Errorf("Conflicting queues specified as --queue=%s and %s", opt, args[0])
	}
	return opt, nil
}

func newQueueStatusCmd() *cobra.Command {
	var verbose bool
	var queueOpt string
	cmd := &cobra.Command{
		Use:   "status [QUEUE]",
		Short: "Report whether submission is enabled and scheduling started, for one queue or all",
		Long: `Report whether submission is enabled and scheduling started, for the
named queue or for every queue. With -v, every queue is shown, followed by
the job manager's counts of jobs waiting to be offered to the scheduler,
alloc requests the scheduler has not answered, and running jobs.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := queueArg(cmd, args, queueOpt)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				w := cmd.OutOrStdout()
				if err := statusOf(ctx, h, w, name, verbose, printQueueStatus); err != nil {
					return fmt.Errorf("status: %w", err)
				}
				if verbose {
					return printAllocCounts(ctx, h, w)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&queueOpt, "queue", "q", "", "Select a queue by `NAME` (same as the QUEUE argument)")
	f.BoolVarP(&verbose, "verbose", "v", false, "Display more detail about internal job manager state")
	return cmd
}

// defaultDisableReason is flux-core's reason for flux queue disable
// without -m.
const defaultDisableReason = "disabled by administrator"

// newQueueControlCmd makes enable, disable, start or stop.
func newQueueControlCmd(verb, short string) *cobra.Command {
	var all, quiet, verbose, nocheckpoint bool
	var message, queueOpt string
	scheduling := verb == "start" || verb == "stop"
	cmd := &cobra.Command{
		Use:   verb + " [QUEUE]",
		Short: short,
		Long: short + `.

With named queues, name one or give --all. Afterwards the queue's
` + map[bool]string{true: "scheduling", false: "submission"}[scheduling] + ` status is printed, unless --quiet; -v prints that of every
queue` + map[bool]string{true: ", then the job manager's counts (see flux queue status)", false: ""}[scheduling] + `.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := queueArg(cmd, args, queueOpt)
			if err != nil {
				return err
			}
			if name != "" && all {
				return fmt.Errorf("a queue name (%s) and --all cannot be used together", name)
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				req := job.QueueChange{Name: name, All: all}
				on := verb == "enable" || verb == "start"
				topic, what := "job-manager.queue-enable", "enable"
				switch verb {
				case "enable":
					req.Enable = &on
				case "disable":
					req.Enable, req.NoCheckpoint = &on, nocheckpoint
					if message == "" {
						message = defaultDisableReason
					}
					req.Reason = message
				case "start", "stop":
					topic, what = "job-manager.queue-start", verb
					// flux-core checks this before asking
					if name == "" && !all {
						named, err := queueNames(ctx, h)
						if err != nil {
							return fmt.Errorf("list: %w", err)
						}
						if len(named) > 0 {
							return fmt.Errorf("Named queues are defined. Specify queues or use --all.")
						}
					}
					req.Start = &on
					if verb == "stop" {
						req.NoCheckpoint, req.Reason = nocheckpoint, message
					}
				}
				if err := h.Call(ctx, topic, flux.NodeidAny, req, nil); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				if quiet {
					return nil
				}
				w := cmd.OutOrStdout()
				show := printEnableStatus
				if scheduling {
					show = printStartStatus
				}
				if err := statusOf(ctx, h, w, name, verbose, show); err != nil {
					return fmt.Errorf("status: %w", err)
				}
				if scheduling && verbose {
					return printAllocCounts(ctx, h, w)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&queueOpt, "queue", "q", "", "Select a queue by `NAME` (same as the QUEUE argument)")
	f.BoolVarP(&all, "all", "a", false, "Apply to every queue")
	f.BoolVar(&quiet, "quiet", false, "Display only errors")
	f.BoolVarP(&verbose, "verbose", "v", false, "Display more detail about internal job manager state")
	if verb == "disable" || verb == "stop" {
		f.StringVarP(&message, "message", "m", "", "Add a `REASON` the queue is "+map[string]string{"disable": "disabled", "stop": "stopped"}[verb])
		f.BoolVar(&nocheckpoint, "nocheckpoint", false, "Do not keep this change across a restart of the instance")
	}
	return cmd
}

// newQueueWaitCmd makes drain or idle. idle then prints how many jobs
// are pending, as flux-core does (with --quiet, only when some are).
func newQueueWaitCmd(verb, short string) *cobra.Command {
	var timeout string
	var quiet bool
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			limit := math.Inf(1)
			if timeout != "" {
				secs, err := fsd.Parse(timeout)
				if err != nil {
					return fmt.Errorf("--timeout: %w", err)
				}
				limit = secs
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if !math.IsInf(limit, 1) {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(limit*float64(time.Second)))
					defer cancel()
				}
				var resp struct {
					Pending int `json:"pending"`
				}
				var out any // drain's answer has no payload
				if verb == "idle" {
					out = &resp
				}
				err := h.Call(ctx, "job-manager."+verb, flux.NodeidAny, nil, out)
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) {
					return fmt.Errorf("%s: timeout", verb)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", verb, err)
				}
				if verb == "idle" && (!quiet || resp.Pending > 0) {
					fmt.Fprintf(cmd.OutOrStdout(), "%d jobs\n", resp.Pending)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&timeout, "timeout", "t", "", "Give up after `DURATION` (FSD, e.g. 30s, 5m)")
	if verb == "idle" {
		cmd.Flags().BoolVar(&quiet, "quiet", false, "Only display pending job count if nonzero")
	}
	return cmd
}

// queueLine is one line of flux queue list.
type queueLine struct {
	name   string
	deflt  bool
	status queueStatus
	limits queueLimits
	// res counts the queue's resources in each of resourceStates, as
	// nnodes, ncores, ngpus (nil when the format needs none)
	res   map[string][3]int
	color bool // color_* fields give terminal escapes
}

// resourceStates are the states of a queue's resources flux queue list
// shows (resources.STATE.*).
var resourceStates = []string{"all", "free", "allocated", "up", "down"}

// resourceCounts are the names of the counts of resources and limits,
// in the order of queueLimits' arrays.
var resourceCounts = []string{"nnodes", "ncores", "ngpus"}

// queueResources counts the resources of queue name in each state: the
// nodes with every property the queue requires (all nodes for a queue
// that requires none, or for the anonymous queue).
func queueResources(ss *resource.SchedStatus, pol *policy.Config, name string) (map[string][3]int, error) {
	if req := pol.Requires(name); len(req) > 0 {
		ranks, err := propertyFilter(ss.All, strings.Join(req, ","))
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", name, err)
		}
		ss = &resource.SchedStatus{All: ss.All.CopyRanks(ranks), Down: ss.Down.CopyRanks(ranks), Allocated: ss.Allocated.CopyRanks(ranks)}
	}
	out := make(map[string][3]int, len(resourceStates))
	for _, state := range resourceStates {
		set, err := ss.State(state)
		if err != nil {
			return nil, err
		}
		out[state] = [3]int{set.NNodes(), set.NCores(), set.NGPUs()}
	}
	return out, nil
}

// queueLimits are the policy limits and defaults shown by flux queue
// list.
type queueLimits struct {
	defaultDuration float64 // seconds; +Inf: none
	duration        float64 // seconds; +Inf: none
	minN, maxN      [3]int  // nnodes, ncores, ngpus; max -1: none
}

func limitsOf(p *policy.Config, queue string) queueLimits {
	l := queueLimits{maxN: [3]int{-1, -1, -1}, defaultDuration: p.DefaultDurationOf(queue), duration: math.Inf(1)}
	if l.defaultDuration <= 0 {
		l.defaultDuration = math.Inf(1)
	}
	duration, size := p.Limits(queue)
	if duration != "" {
		if d, err := fsd.Parse(duration); err == nil {
			l.duration = d
		}
	}
	for i, k := range resourceCounts {
		if v, ok := size["min"][k]; ok && v > 0 {
			l.minN[i] = v
		}
		if v, ok := size["max"][k]; ok && v >= 0 {
			l.maxN[i] = v
		}
	}
	return l
}

// maxOf is limit i's maximum, a number or Python's inf.
func (l queueLimits) maxOf(i int) fmtVal {
	if l.maxN[i] < 0 {
		return vFloat(math.Inf(1))
	}
	return vInt(int64(l.maxN[i]))
}

func (l queueLimits) rangeOf(i int) string {
	return fmt.Sprintf("%d-%s", l.minN[i], l.maxOf(i).String())
}

// effectiveRangeOf is limit i's range with its maximum clipped to the
// queue's resources (all: their count).
func (l queueLimits) effectiveRangeOf(i, all int) string {
	hi := all
	if l.maxN[i] >= 0 && l.maxN[i] < all {
		hi = l.maxN[i]
	}
	return fmt.Sprintf("%d-%d", l.minN[i], hi)
}

// checkMark and the ascii letters are flux-core's single character
// status symbols.
func checkMark(b bool) string {
	if b {
		return "✔"
	}
	return "✗"
}

func yn(b bool) string {
	if b {
		return "y"
	}
	return "n"
}

// Terminal escapes of the color_* fields (flux-core's): bold green for
// enabled or started, bold red otherwise.
const (
	queueColorYes   = sgrBoldGreen
	queueColorNo    = sgrBoldRed
	queueColorReset = sgrResetFlux
)

func colorOf(l queueLine, on bool) fmtVal {
	switch {
	case !l.color:
		return vStr("")
	case on:
		return vStr(queueColorYes)
	}
	return vStr(queueColorNo)
}

// queueListHeadings are flux-core's column headings of the fields with
// fixed names (resources.STATE.COUNT headings are made by
// resourceHeading).
var queueListHeadings = map[string]string{
	"queue":                         "QUEUE",
	"queuem":                        "QUEUE",
	"parent":                        "PARENT",
	"submission":                    "SUBMIT",
	"scheduling":                    "SCHED",
	"enabled":                       "EN",
	"started":                       "ST",
	"enabled.ascii":                 "EN",
	"started.ascii":                 "ST",
	"color_enabled":                 "",
	"color_started":                 "",
	"color_off":                     "",
	"defaults.timelimit":            "TDEFAULT",
	"limits.timelimit":              "TLIMIT",
	"limits.range.nnodes":           "NNODES",
	"limits.range.ncores":           "NCORES",
	"limits.range.ngpus":            "NGPUS",
	"limits.range.effective.nnodes": "NNODES",
	"limits.range.effective.ncores": "NCORES",
	"limits.range.effective.ngpus":  "NGPUS",
	"limits.min.nnodes":             "MINNODES",
	"limits.max.nnodes":             "MAXNODES",
	"limits.min.ncores":             "MINCORES",
	"limits.max.ncores":             "MAXCORES",
	"limits.min.ngpus":              "MINGPUS",
	"limits.max.ngpus":              "MAXGPUS",
}

// resourceHeading is the heading of resources.STATE.COUNT: the count's
// name without its leading n, upper case, then for a state other than
// all a colon and its first five letters (NODES, CORES:FREE,
// GPUS:ALLOC).
func resourceHeading(state, count string) string {
	h := strings.ToUpper(count[1:])
	if state != "all" {
		h += ":" + strings.ToUpper(state[:min(5, len(state))])
	}
	return h
}

// parseResourceField splits resources.STATE.COUNT.
func parseResourceField(name string) (state string, i int, ok bool) {
	rest, found := strings.CutPrefix(name, "resources.")
	if !found {
		return "", 0, false
	}
	state, count, _ := strings.Cut(rest, ".")
	if !slices.Contains(resourceStates, state) {
		return "", 0, false
	}
	i = slices.Index(resourceCounts, count)
	return state, i, i >= 0
}

// needsResources reports whether a field is computed from the queue's
// resources.
func needsResources(name string) bool {
	_, _, ok := parseResourceField(name)
	return ok || strings.HasPrefix(name, "limits.range.effective.")
}

var queueListFields = fieldSource[queueLine]{
	get: func(name string) (func(queueLine) fmtVal, error) {
		switch name {
		case "queue":
			return func(l queueLine) fmtVal { return vStr(l.name) }, nil
		case "queuem":
			return func(l queueLine) fmtVal {
				if l.deflt {
					return vStr(l.name + "*")
				}
				return vStr(l.name)
			}, nil
		case "parent":
			// fluxgo has no virtual queues (RFC 33): no queue has a parent
			return func(queueLine) fmtVal { return vStr("") }, nil
		case "submission":
			return func(l queueLine) fmtVal {
				return vStr(map[bool]string{true: "enabled", false: "disabled"}[l.status.Enable])
			}, nil
		case "scheduling":
			return func(l queueLine) fmtVal {
				return vStr(map[bool]string{true: "started", false: "stopped"}[l.status.Start])
			}, nil
		case "enabled":
			return func(l queueLine) fmtVal { return vStr(checkMark(l.status.Enable)) }, nil
		case "started":
			return func(l queueLine) fmtVal { return vStr(checkMark(l.status.Start)) }, nil
		case "enabled.ascii":
			return func(l queueLine) fmtVal { return vStr(yn(l.status.Enable)) }, nil
		case "started.ascii":
			return func(l queueLine) fmtVal { return vStr(yn(l.status.Start)) }, nil
		case "color_enabled":
			return func(l queueLine) fmtVal { return colorOf(l, l.status.Enable) }, nil
		case "color_started":
			return func(l queueLine) fmtVal { return colorOf(l, l.status.Start) }, nil
		case "color_off":
			return func(l queueLine) fmtVal {
				if !l.color {
					return vStr("")
				}
				return vStr(queueColorReset)
			}, nil
		case "defaults.timelimit":
			return func(l queueLine) fmtVal { return vFloat(l.limits.defaultDuration) }, nil
		case "limits.timelimit":
			return func(l queueLine) fmtVal { return vFloat(l.limits.duration) }, nil
		}
		if state, i, ok := parseResourceField(name); ok {
			return func(l queueLine) fmtVal { return vInt(int64(l.res[state][i])) }, nil
		}
		for i, k := range resourceCounts {
			switch name {
			case "limits.range." + k:
				return func(l queueLine) fmtVal { return vStr(l.limits.rangeOf(i)) }, nil
			case "limits.range.effective." + k:
				return func(l queueLine) fmtVal { return vStr(l.limits.effectiveRangeOf(i, l.res["all"][i])) }, nil
			case "limits.min." + k:
				return func(l queueLine) fmtVal { return vInt(int64(l.limits.minN[i])) }, nil
			case "limits.max." + k:
				return func(l queueLine) fmtVal { return l.limits.maxOf(i) }, nil
			}
		}
		return nil, fmt.Errorf("unknown format field %q", name)
	},
	heading: func(name string) string {
		if h, ok := queueListHeadings[name]; ok {
			return h
		}
		if state, i, ok := parseResourceField(name); ok {
			return resourceHeading(state, resourceCounts[i])
		}
		return strings.ToUpper(name)
	},
}

// The queue status columns of flux-core's named formats.
const queueListStatusColumns = "?:{queuem:<8.8} ?:{parent:<8.8} " +
	"{color_enabled}{enabled:>2}{color_off} {color_started}{started:>2}{color_off} "

// queueListFormats are flux queue list's named formats, flux-core's
// (flux-queue.toml files may add more: [list.formats.NAME]).
var queueListFormats = &formatSet{prog: "flux-queue", table: "list", env: "FLUX_QUEUE_LIST_FORMAT_DEFAULT", builtin: []namedFormat{
	{"default", "Default flux-queue list format string",
		queueListStatusColumns + "{defaults.timelimit!F:>8} {limits.timelimit!F:>8} " +
			"{limits.range.effective.nnodes:>10} {limits.range.effective.ncores:>10} {limits.range.effective.ngpus:>10}"},
	{"policy", "flux-queue list with policy limits only",
		queueListStatusColumns + "{defaults.timelimit!F:>8} {limits.timelimit!F:>8} " +
			"{limits.range.nnodes:>10} {limits.range.ncores:>10} {limits.range.ngpus:>10}"},
	{"nodes", "Show queue status plus all/up/allocated/free nodes",
		queueListStatusColumns + "{resources.all.nnodes:>6} {resources.up.nnodes:>10} {resources.down.nnodes:>10} " +
			"{resources.allocated.nnodes:>11} {resources.free.nnodes:>10}"},
}}

func newQueueListCmd() *cobra.Command {
	var noHeader bool
	var format string
	var only []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List queues with their status and limits",
		Long: `List the queues: submission (EN) and scheduling (ST) status, the time
limit given to jobs that set none (TDEFAULT), the time limit allowed and
the job size ranges allowed, their maximum clipped to the queue's
resources. Fields for --format: queue, queuem (the default queue marked
with *), parent, submission, scheduling, enabled, started, enabled.ascii,
started.ascii, color_enabled, color_started, color_off,
defaults.timelimit, limits.timelimit, limits.range.{nnodes,ncores,ngpus},
limits.range.effective.*, limits.min.*, limits.max.* and
resources.{all,free,allocated,up,down}.{nnodes,ncores,ngpus} (a queue's
resources are the nodes with the properties it requires). Named formats:
default, policy (the configured ranges) and nodes (node counts by state);
-o help lists those configured too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := queueListFormats.special(cmd.OutOrStdout(), format); done {
				return err
			}
			format, err := queueListFormats.resolve(format)
			if err != nil {
				return err
			}
			of, err := compileFormat(format, queueListFields)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			color, _ := useColor("auto", w)
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				pol, err := policy.Fetch(ctx, h)
				if err != nil {
					return err
				}
				names := pol.Names()
				if len(names) == 0 {
					names = []string{""} // the anonymous queue
				}
				if len(only) > 0 {
					for _, q := range only {
						if err := pol.CheckQueue(q); err != nil {
							return err
						}
					}
					names = only
				}
				// the scheduler's view of resources, only if shown
				var ss *resource.SchedStatus
				for _, f := range of.fields {
					if needsResources(f.name) {
						if ss, err = resource.GetSchedStatus(ctx, h); err != nil {
							return fmt.Errorf("resource status: %w", err)
						}
						break
					}
				}
				var lines []queueLine
				for _, n := range names {
					st, err := getQueueStatus(ctx, h, n)
					if err != nil {
						return err
					}
					l := queueLine{name: n, deflt: n != "" && n == pol.DefaultQueue, status: st, limits: limitsOf(pol, n), color: color}
					if ss != nil {
						if l.res, err = queueResources(ss, pol, n); err != nil {
							return err
						}
					}
					lines = append(lines, l)
				}
				return printQueueList(of, lines, noHeader, w)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&noHeader, "no-header", "n", false, "Do not print the header")
	f.StringVarP(&format, "format", "o", "", "Output format (Python format syntax with the fields above, or a named format)")
	f.StringSliceVarP(&only, "queue", "q", nil, "List only these queues")
	return cmd
}

// printQueueList prints the lines of flux queue list in format of.
func printQueueList(of *outputFormat[queueLine], lines []queueLine, noHeader bool, w io.Writer) error {
	if err := of.prepareHeader(lines, !noHeader); err != nil {
		return err
	}
	if !noHeader {
		fmt.Fprintln(w, strings.TrimRight(of.header(), " "))
	}
	for _, l := range lines {
		s, err := of.line(l)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, strings.TrimRight(s, " "))
	}
	return nil
}
