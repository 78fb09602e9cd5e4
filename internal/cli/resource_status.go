package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// flux resource status (and the listing of flux resource drain): the
// administrative view, one line per state and online status.

type resourceStatusOptions struct {
	format    string
	states    string
	statesSet bool // -s given
	noHeader  bool
	skipEmpty bool
	include   string
	color     string
	queues    []string       // -q: only nodes of these queues
	policy    *policy.Config // the instance's queues (fetched for -q)
}

func newResourceStatusCmd() *cobra.Command {
	var o resourceStatusOptions
	cmd := &cobra.Command{
		Use:   "status [OPTIONS]",
		Short: "Show the resource service's view of nodes",
		Long: `Show nodes by state: avail (usable when online), exclude (withheld by
configuration), draining (drained, still running jobs), drained, torpid
(unresponsive), housekeeping, allocated (running jobs), and whether they are
online or offline (state marked '*'). States for -s: ` + strings.Join(statusStates, ", ") + `
(-s help lists them); by default ` + statusDefaultStates + `.
Named formats: default, long (-o help lists them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.states == "help" {
				fmt.Fprintf(cmd.ErrOrStderr(), "flux-resource: valid states: %s\n", strings.Join(statusStates, ","))
				return nil
			}
			if done, err := resourceFormats["status"].special(cmd.OutOrStdout(), o.format); done {
				return err
			}
			o.statesSet = cmd.Flags().Changed("states")
			var err error
			if o.format, err = resourceFormat("status", o.format); err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return resourceStatus(ctx, h, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.format, "format", "o", "default", "Output format (Python format syntax) or a format name")
	f.StringVarP(&o.states, "states", "s", statusDefaultStates, "Show nodes in these states ('help' lists them)")
	f.BoolVarP(&o.noHeader, "no-header", "n", false, "Suppress the header line")
	f.BoolVar(&o.skipEmpty, "skip-empty", false, "Skip empty lines even with --states")
	f.StringVarP(&o.include, "include", "i", "", "Only these TARGETS (an idset of ranks or a hostlist)")
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Only nodes of these QUEUES")
	addColorFlag(f, &o.color, true)
	return cmd
}

// resourceStatus fetches both views and prints the status lines.
func resourceStatus(ctx context.Context, h *flux.Handle, o resourceStatusOptions, w io.Writer) error {
	st, err := resource.GetStatus(ctx, h)
	if err != nil {
		return err
	}
	// allocated nodes come from the scheduler's view; without a
	// scheduler, nothing is allocated
	var allocated idset.Set
	if ss, err := resource.GetSchedStatus(ctx, h); err == nil {
		allocated = ss.Allocated.Ranks()
	}
	if o.queues = splitQueues(o.queues); len(o.queues) > 0 {
		if o.policy, err = policy.Fetch(ctx, h); err != nil {
			return err
		}
	}
	color, err := useColor(o.color, w)
	if err != nil {
		return err
	}
	return runResourceStatus(st, allocated, o, color, w)
}

// statusStates are the states flux resource status accepts, in
// flux-core's order.
var statusStates = []string{"all", "online", "avail", "offline", "exclude", "drain", "draining",
	"drained", "torpid", "allocated", "housekeeping"}

// statusDefaultStates are the states shown without -s.
const statusDefaultStates = "avail,exclude,draining,drained,torpid,housekeeping"

// statusLine is one line of flux resource status.
type statusLine struct {
	state     string
	online    bool
	ranks     idset.Set
	nodelist  string
	reason    string
	timestamp float64
}

var statusFields = fieldSource[statusLine]{
	get: func(name string) (func(statusLine) fmtVal, error) {
		switch name {
		case "state":
			return func(l statusLine) fmtVal {
				if !l.online {
					return vStr(l.state + "*")
				}
				return vStr(l.state)
			}, nil
		case "statex":
			return func(l statusLine) fmtVal { return vStr(l.state) }, nil
		case "status":
			return func(l statusLine) fmtVal {
				if l.online {
					return vStr("online")
				}
				return vStr("offline")
			}, nil
		case "up", "up.ascii":
			yes, no := "✔", "✗"
			if name == "up.ascii" {
				yes, no = "y", "n"
			}
			return func(l statusLine) fmtVal {
				if l.online {
					return vStr(yes)
				}
				return vStr(no)
			}, nil
		case "color_up":
			return func(l statusLine) fmtVal {
				if l.online {
					return vStr(sgrBoldGreen)
				}
				return vStr(sgrBoldRed)
			}, nil
		case "color_off":
			return func(statusLine) fmtVal { return vStr(sgrResetFlux) }, nil
		case "nnodes":
			return func(l statusLine) fmtVal { return vInt(int64(l.ranks.Count())) }, nil
		case "ranks":
			return func(l statusLine) fmtVal { return vStr(l.ranks.String()) }, nil
		case "nodelist":
			return func(l statusLine) fmtVal { return vStr(l.nodelist) }, nil
		case "reason":
			return func(l statusLine) fmtVal { return vStr(l.reason) }, nil
		case "timestamp":
			return func(l statusLine) fmtVal {
				if l.timestamp == 0 {
					return vStr("")
				}
				return vFloat(l.timestamp)
			}, nil
		}
		return nil, fmt.Errorf("unknown format field %q", name)
	},
	heading: func(name string) string {
		switch name {
		case "statex":
			return "STATE"
		case "timestamp":
			return "TIME"
		case "up.ascii":
			return "UP"
		case "color_up", "color_off":
			return ""
		}
		return strings.ToUpper(name)
	},
}

// runResourceStatus builds and prints the status lines of st; allocated
// are the ranks running jobs (drained nodes among them are "draining").
//
// torpid comes from the resource service (fluxgo's never reports torpid
// nodes, flux-core's does). housekeeping is always empty: fluxgo runs no
// housekeeping after jobs.
func runResourceStatus(st *resource.Status, allocated idset.Set, o resourceStatusOptions, color bool, w io.Writer) error {
	states, err := parseStates(o.states, statusStates)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(states, func(s string) bool { return s != "online" && s != "offline" }) {
		states = append(states, strings.Split(statusDefaultStates, ",")...)
	}
	if i := slices.Index(states, "drain"); i >= 0 {
		states = slices.Delete(states, i, i+1)
		states = append(states, "draining", "drained")
	}
	format := o.format
	if !color {
		format = strings.NewReplacer("{color_up}", "", "{color_off}", "").Replace(format)
	}
	of, err := compileFormat(format, statusFields)
	if err != nil {
		return err
	}
	all := st.R.Ranks()
	if len(o.queues) > 0 {
		inq, err := selectQueues(st.R, o.policy, o.queues)
		if err != nil {
			return err
		}
		all = all.Intersect(inq)
	}
	if o.include != "" {
		inc, err := includeRanks(o.include, st.R)
		if err != nil {
			return err
		}
		all = all.Intersect(inc)
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if slices.Contains(states, n) {
				return true
			}
		}
		return false
	}
	includeOnline := has("online") || !has("offline")
	includeOffline := has("offline") || !has("online")
	online := st.Online.Intersect(all)
	offline := st.Offline.Intersect(all)
	allocated = allocated.Intersect(all)
	drained := st.Drained().Intersect(all)
	torpid := st.Torpid.Intersect(all)
	sets := map[string]idset.Set{
		"avail":        all.Difference(st.Exclude).Difference(drained).Difference(torpid),
		"exclude":      all.Intersect(st.Exclude),
		"allocated":    allocated,
		"housekeeping": {},
	}
	// a drained node that is torpid shows as drained when drain states
	// are shown
	if has("all", "draining", "drained") {
		torpid = torpid.Difference(drained)
	}
	sets["torpid"] = torpid
	// dedupe lines that format alike but for nodelist, ranks and nnodes
	fields, _ := parseFormat(format)
	var keyGetters []func(statusLine) fmtVal
	for _, f := range fields {
		if f.name == "" || f.name == "nodelist" || f.name == "ranks" || f.name == "nnodes" {
			continue
		}
		g, err := statusFields.get(f.name)
		if err != nil {
			return err
		}
		keyGetters = append(keyGetters, g)
	}
	var lines []*statusLine
	index := map[string]*statusLine{}
	add := func(l statusLine) {
		var b strings.Builder
		for _, g := range keyGetters {
			b.WriteString(g(l).String())
			b.WriteByte(0)
		}
		key := b.String()
		if cur, ok := index[key]; ok {
			cur.ranks = cur.ranks.Union(l.ranks)
			return
		}
		nl := l
		index[key] = &nl
		lines = append(lines, &nl)
	}
	for _, state := range []string{"avail", "exclude", "allocated", "torpid", "housekeeping"} {
		if !has(state, "all") {
			continue
		}
		for _, on := range []bool{true, false} {
			if (on && !includeOnline) || (!on && !includeOffline) {
				continue
			}
			status := offline
			if on {
				status = online
			}
			add(statusLine{state: state, online: on, ranks: sets[state].Intersect(status)})
		}
	}
	for _, state := range []string{"draining", "drained"} {
		if !has(state, "all") {
			continue
		}
		ranks := drained.Intersect(allocated)
		if state == "drained" {
			ranks = drained.Difference(allocated)
		}
		if ranks.Empty() && includeOnline {
			add(statusLine{state: state, online: true})
		}
		for rank := range ranks.All() {
			on := online.Contains(rank)
			if (on && !includeOnline) || (!on && !includeOffline) {
				continue
			}
			d := st.Drain[rank]
			add(statusLine{state: state, online: on, ranks: idset.New(rank), reason: d.Reason, timestamp: d.Timestamp})
		}
	}
	skipEmpty := o.skipEmpty || !o.statesSet
	skipEmptyOffline := !has("offline")
	var out []statusLine
	for _, l := range lines {
		if l.ranks.Empty() && (skipEmpty || (!l.online && skipEmptyOffline)) {
			continue
		}
		l.nodelist = st.R.CopyRanks(l.ranks).Nodelist().String()
		out = append(out, *l)
	}
	return printFormatted(of, out, o.noHeader, w)
}
