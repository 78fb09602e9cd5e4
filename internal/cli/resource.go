package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux resource: list (the scheduler's view), info, R, status (the
// administrative view), drain and undrain, reload and acquire-mute, after
// flux-resource(1). The
// output formats use the flux jobs format engine (jobs_format.go).

func newResourceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resource",
		Short: "List and manipulate the instance's resources",
		Long: `flux resource lists the instance's resources as the scheduler sees them
(list, info, R) or as the resource service does (status), drains and
undrains nodes, reloads the inventory (reload) and mutes the scheduler's
resource updates before shutdown (acquire-mute).`,
	}
	cmd.AddCommand(newResourceListCmd(), newResourceInfoCmd(), newResourceRCmd(),
		newResourceStatusCmd(), newResourceDrainCmd(), newResourceUndrainCmd(),
		newResourceReloadCmd(), newResourceAcquireMuteCmd(), newResourceReservationsCmd(),
		newResourceEventlogCmd(), newResourceGrowCmd(), newResourceShrinkCmd())
	return cmd
}

func newResourceReloadCmd() *cobra.Command {
	var xml, force bool
	cmd := &cobra.Command{
		Use:   "reload [OPTIONS] PATH",
		Short: "Replace the resource inventory (mostly for tests)",
		Long: `Replace the instance's resource inventory with the RFC 20 R in the file PATH,
or with --xml, with the resources of the hwloc topologies PATH/<rank>.xml.
The scheduler must be unloaded first. For the instance owner.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// rank 0's broker reads the path: make it absolute
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if real, err := filepath.EvalSymlinks(path); err == nil {
				path = real
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return resource.Reload(ctx, h, path, xml, force)
			})
		},
	}
	cmd.Flags().BoolVarP(&xml, "xml", "x", false, "PATH is a directory of hwloc <rank>.xml files")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "Accept resources with ranks the instance does not have")
	return cmd
}

func newResourceAcquireMuteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "acquire-mute",
		Short: "Stop resource updates to the scheduler (before shutdown)",
		Long: `Tell the resource service to send no more resource.acquire updates to the
scheduler, so that it does not process the offline updates of an instance
shutting down. For the instance owner.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return resource.AcquireMute(ctx, h)
			})
		},
	}
}

// resourceFormats are the named formats of flux resource list, status
// and drain; flux-resource.toml files may add more ([list.formats.NAME]).
var resourceFormats = map[string]*formatSet{
	"list": {prog: "flux-resource", table: "list", env: "FLUX_RESOURCE_LIST_FORMAT_DEFAULT", builtin: []namedFormat{
		{"default", "Default flux-resource list format string",
			"{state:>10} ?+:{queue:<5} ?:{propertiesx:<10.10+} {nnodes:>6} +:{ncores:>6} ?+:{ngpus:>5} {nodelist}"},
		{"rlist", "Format including resource list details",
			"{state:>10} ?+:{queue:<5} ?:{propertiesx:<10.10+} {nnodes:>6} +:{ncores:>6} ?+:{ngpus:>5} {rlist}"},
	}},
	"status": {prog: "flux-resource", table: "status", env: "FLUX_RESOURCE_STATUS_FORMAT_DEFAULT", builtin: []namedFormat{
		{"default", "Default flux-resource status format string",
			"{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} {nodelist}"},
		{"long", "Long flux-resource status format string",
			"{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} {reason:<30.30+} {nodelist}"},
	}},
	"drain": {prog: "flux-resource", table: "drain", env: "FLUX_RESOURCE_DRAIN_FORMAT_DEFAULT", builtin: []namedFormat{
		{"default", "Default flux-resource drain format string",
			"{timestamp!d:%b%d %R::<12} {state:<8.8} {reason:<30.30+} {nodelist}"},
		{"long", "Long flux-resource drain format string",
			"{timestamp!d:%FT%T::<20} {state:<8.8} {ranks:<8.8+} {reason:<30.30+} {nodelist}"},
	}},
}

// resourceFormat resolves a format argument of cmd ("default", "long",
// a configured name or a format string).
func resourceFormat(cmd, arg string) (string, error) {
	return resourceFormats[cmd].resolve(arg)
}

// ---- list, info, R ----

type resourceListOptions struct {
	format   string
	states   string
	noHeader bool
	include  string
	queues   []string       // -q: only nodes of these queues
	policy   *policy.Config // the instance's queues (nil: none)
	// skipEmpty and noSkipEmpty: --skip-empty, --no-skip-empty (empty
	// lines are skipped by default only with -i)
	skipEmpty, noSkipEmpty bool
}

func newResourceListCmd() *cobra.Command {
	var o resourceListOptions
	cmd := &cobra.Command{
		Use:   "list [OPTIONS]",
		Short: "Show the scheduler's view of resources",
		Long: `Show the scheduler's view of resources, one line per state (and per set of
properties and queues): free, allocated and down by default. A state with no
resources still makes a line (one per queue when queues are configured),
with or without -q, unless --skip-empty (the default with -i). States: up,
down, allocated, free, all. Named formats: default, rlist (-o help lists
them). Fields: state, queue, properties, propertiesx, nnodes, ncores,
ngpus, ranks, nodelist, rlist, and the topology fields nnuma, nsockets,
nnics and memory (NUMA domains, sockets and network interfaces holding some
of the line's cores or GPUs, where the inventory records them, 0
elsewhere; those domains' memory, "-" where it is not recorded).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if done, err := resourceFormats["list"].special(cmd.OutOrStdout(), o.format); done {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				ss, err := resource.GetSchedStatus(ctx, h)
				if err != nil {
					return err
				}
				if o.policy, err = policy.Fetch(ctx, h); err != nil {
					return err
				}
				return runResourceList(ss, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Only resources of these QUEUES (a node belongs to the queues whose required properties it has)")
	f.StringVarP(&o.format, "format", "o", "default", "Output format (Python format syntax) or a format name (use 'help' to list them)")
	f.StringVarP(&o.states, "states", "s", "free,allocated,down", "Show resources in these states (up, down, allocated, free, all)")
	f.BoolVarP(&o.noHeader, "no-header", "n", false, "Suppress the header line")
	f.StringVarP(&o.include, "include", "i", "", "Only resources on these TARGETS (an idset of ranks or a hostlist)")
	f.BoolVar(&o.skipEmpty, "skip-empty", false, "Skip lines with no resources (the default with --include)")
	f.BoolVar(&o.noSkipEmpty, "no-skip-empty", false, "Do not skip lines with no resources, even with --include")
	return cmd
}

func newResourceInfoCmd() *cobra.Command {
	var o resourceListOptions
	cmd := &cobra.Command{
		Use:   "info [OPTIONS]",
		Short: "Show a one-line summary of the scheduler's view of resources",
		Long: `Show a one-line summary of the scheduler's view of resources. -o takes a
format of the fields of flux resource list; the topology fields {nnuma},
{nsockets} and {nnics} count NUMA domains, sockets and network interfaces
where the inventory records them, {memory} is those domains' memory (e.g.
-o "{nnodes} Nodes, {nnuma} NUMA domains, {nsockets} Sockets, {memory}").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.noHeader = true
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				ss, err := getSchedStatusFor(ctx, h, &o)
				if err != nil {
					return err
				}
				return runResourceList(ss, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.states, "states", "s", "all", "Count resources in these states")
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Only resources of these QUEUES")
	f.StringVarP(&o.include, "include", "i", "", "Only resources on these TARGETS (an idset of ranks or a hostlist)")
	f.StringVarP(&o.format, "format", "o", resourceInfoFormat, "Output format (the fields of flux resource list)")
	return cmd
}

// resourceInfoFormat is flux resource info's line.
const resourceInfoFormat = "{nnodes} Nodes, {ncores} Cores, {ngpus} GPUs"

// getSchedStatusFor fetches the scheduler's view and, when -q asks for
// queues, the instance's queue configuration into o.
func getSchedStatusFor(ctx context.Context, h *flux.Handle, o *resourceListOptions) (*resource.SchedStatus, error) {
	ss, err := resource.GetSchedStatus(ctx, h)
	if err != nil {
		return nil, err
	}
	if len(o.queues) > 0 {
		if o.policy, err = policy.Fetch(ctx, h); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

func newResourceRCmd() *cobra.Command {
	var o resourceListOptions
	cmd := &cobra.Command{
		Use:   "R [OPTIONS]",
		Short: "Print the scheduler's view of resources as an RFC 20 R",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				ss, err := getSchedStatusFor(ctx, h, &o)
				if err != nil {
					return err
				}
				return runResourceR(ss, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.states, "states", "s", "all", "Include resources in these states")
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Only resources of these QUEUES")
	f.StringVarP(&o.include, "include", "i", "", "Only resources on these TARGETS (an idset of ranks or a hostlist)")
	return cmd
}

var listStates = []string{"up", "down", "allocated", "free", "all"}

// parseStates splits a -s argument and checks each state.
func parseStates(arg string, valid []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(arg, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(valid, s) {
			return nil, fmt.Errorf("invalid resource state %q (valid: %s)", s, strings.Join(valid, ","))
		}
		out = append(out, s)
	}
	return out, nil
}

// includeRanks resolves -i TARGETS against R; hosts or ranks that do not
// exist are not an error.
func includeRanks(targets string, R *rset.R) (idset.Set, error) {
	if ids, err := idset.Parse(targets); err == nil {
		return ids, nil
	}
	hl, err := hostlist.Parse(targets)
	if err != nil {
		return idset.Set{}, fmt.Errorf("--include %q is neither an idset nor a hostlist", targets)
	}
	var ids idset.Set
	for h := range hl.All() {
		if r, err := R.RanksOf(hostlist.New(h)); err == nil {
			ids = ids.Union(r)
		}
	}
	return ids, nil
}

// filterSchedStatus applies -q (the ranks of the queues, computed before
// -i as flux-core does) and then -i to every set.
func filterSchedStatus(ss *resource.SchedStatus, o resourceListOptions) (*resource.SchedStatus, error) {
	if len(o.queues) > 0 {
		ids, err := selectQueues(ss.All, o.policy, o.queues)
		if err != nil {
			return nil, err
		}
		ss = schedStatusRanks(ss, ids)
	}
	if o.include == "" {
		return ss, nil
	}
	ids, err := includeRanks(o.include, ss.All)
	if err != nil {
		return nil, err
	}
	return schedStatusRanks(ss, ids), nil
}

// schedStatusRanks keeps only ranks ids of every set of ss.
func schedStatusRanks(ss *resource.SchedStatus, ids idset.Set) *resource.SchedStatus {
	return &resource.SchedStatus{All: ss.All.CopyRanks(ids), Down: ss.Down.CopyRanks(ids), Allocated: ss.Allocated.CopyRanks(ids)}
}

// selectQueues returns the ranks of R in any of the named queues (-q);
// a name that is not a configured queue is an error naming it.
func selectQueues(R *rset.R, pol *policy.Config, names []string) (idset.Set, error) {
	if pol == nil {
		pol = &policy.Config{}
	}
	qranks, err := queueRanks(R, pol)
	if err != nil {
		return idset.Set{}, err
	}
	var ids idset.Set
	for _, q := range names {
		r, ok := qranks[q]
		if !ok {
			return idset.Set{}, fmt.Errorf("--queue: %s: no such queue", q)
		}
		ids = ids.Union(r)
	}
	return ids, nil
}

// splitQueues splits -q values (repeatable, comma-separated) and drops
// duplicates, keeping the order given.
func splitQueues(values []string) []string {
	var out []string
	for _, v := range values {
		for _, q := range strings.Split(v, ",") {
			if q = strings.TrimSpace(q); q != "" && !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
	}
	return out
}

// rlistLine is one line of flux resource list: a state and its resources
// that share the values of the format's grouping fields.
type rlistLine struct {
	state string
	set   *rset.R
	queue string         // the queues its nodes belong to, comma-separated
	pol   *policy.Config // for propertiesx
	numa  numaIndex      // the inventory's domains (resource_numa.go)
}

// queueRanks returns the ranks of R that belong to each named queue:
// those with every property the queue requires (none of a "^name" one).
func queueRanks(R *rset.R, pol *policy.Config) (map[string]idset.Set, error) {
	out := make(map[string]idset.Set, len(pol.Queues))
	for _, name := range pol.Names() {
		ranks := R.Ranks()
		if req := pol.Requires(name); len(req) > 0 {
			var err error
			if ranks, err = propertyFilter(R, strings.Join(req, ",")); err != nil {
				return nil, fmt.Errorf("queue %s: %w", name, err)
			}
		}
		out[name] = ranks
	}
	return out, nil
}

// propertiesExcludingQueues drops the properties named like a queue
// (flux resource list's propertiesx).
func propertiesExcludingQueues(pol *policy.Config, props string) string {
	if pol == nil || !pol.Named() || props == "" {
		return props
	}
	var keep []string
	for _, p := range strings.Split(props, ",") {
		if _, isQueue := pol.Queues[p]; !isQueue {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ",")
}

func propertyNames(r *rset.R) string {
	names := make([]string, 0)
	for name := range r.Properties() {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

var rlistFields = fieldSource[rlistLine]{
	get: func(name string) (func(rlistLine) fmtVal, error) {
		switch name {
		case "state":
			return func(l rlistLine) fmtVal { return vStr(l.state) }, nil
		case "queue":
			return func(l rlistLine) fmtVal { return vStr(l.queue) }, nil
		case "properties":
			return func(l rlistLine) fmtVal { return vStr(propertyNames(l.set)) }, nil
		case "propertiesx":
			return func(l rlistLine) fmtVal { return vStr(propertiesExcludingQueues(l.pol, propertyNames(l.set))) }, nil
		case "nnodes":
			return func(l rlistLine) fmtVal { return vInt(int64(l.set.NNodes())) }, nil
		case "ncores":
			return func(l rlistLine) fmtVal { return vInt(int64(l.set.NCores())) }, nil
		case "ngpus":
			return func(l rlistLine) fmtVal { return vInt(int64(l.set.NGPUs())) }, nil
		case "nnuma":
			return func(l rlistLine) fmtVal { return vInt(int64(l.numa.count(l.set).domains)) }, nil
		case "nsockets":
			return func(l rlistLine) fmtVal { return vInt(int64(l.numa.count(l.set).sockets)) }, nil
		case "nnics":
			return func(l rlistLine) fmtVal { return vInt(int64(l.numa.count(l.set).nics)) }, nil
		case "memory":
			return func(l rlistLine) fmtVal { return vStr(l.numa.count(l.set).memoryString()) }, nil
		case "ranks":
			return func(l rlistLine) fmtVal { return vStr(l.set.Ranks().String()) }, nil
		case "nodelist":
			return func(l rlistLine) fmtVal { return vStr(l.set.Nodelist().String()) }, nil
		case "rlist":
			return func(l rlistLine) fmtVal { return vStr(l.set.String()) }, nil
		}
		return nil, fmt.Errorf("unknown format field %q", name)
	},
	heading: func(name string) string {
		switch name {
		case "properties", "propertiesx":
			return "PROPERTIES"
		case "rlist":
			return "LIST"
		}
		return strings.ToUpper(name)
	},
}

// runResourceList prints ss as flux resource list does: for each state,
// the resources that give the same values for the grouping fields of the
// format (state, properties, queue) make one line; an empty state still
// makes a line.
func runResourceList(ss *resource.SchedStatus, o resourceListOptions, w io.Writer) error {
	states, err := parseStates(o.states, listStates)
	if err != nil {
		return err
	}
	pol := o.policy
	if pol == nil {
		pol = &policy.Config{}
	}
	o.policy = pol
	numa := newNUMAIndex(ss.All)
	// queue membership is that of the whole inventory
	qranks, err := queueRanks(ss.All, pol)
	if err != nil {
		return err
	}
	o.queues = splitQueues(o.queues)
	if ss, err = filterSchedStatus(ss, o); err != nil {
		return err
	}
	// rankQueues: the queues a node belongs to, comma-separated
	rankQueues := func(rank uint) string {
		var in []string
		for _, name := range pol.Names() {
			if qranks[name].Contains(rank) {
				in = append(in, name)
			}
		}
		return strings.Join(in, ",")
	}
	// the queues an empty state is shown for: those of -q, else every
	// configured queue, else none
	emptyQueues := o.queues
	if len(emptyQueues) == 0 {
		emptyQueues = pol.Names()
	}
	if len(emptyQueues) == 0 {
		emptyQueues = []string{""}
	}
	format, err := resourceFormat("list", o.format)
	if err != nil {
		return err
	}
	of, err := compileFormat(format, rlistFields)
	if err != nil {
		return err
	}
	fields, _ := parseFormat(format)
	var names []string
	for _, f := range fields {
		if f.name != "" {
			names = append(names, f.name)
		}
	}
	var keyFields []string
	if len(names) > 1 || slices.Contains(names, "state") {
		for _, n := range names {
			if n == "state" || n == "properties" || n == "propertiesx" || n == "queue" {
				keyFields = append(keyFields, n)
			}
		}
	}
	keyOf := func(state, props, queue string) string {
		var b strings.Builder
		for _, n := range keyFields {
			switch n {
			case "state":
				b.WriteString(state)
			case "properties":
				b.WriteString(props)
			case "propertiesx":
				b.WriteString(propertiesExcludingQueues(pol, props))
			case "queue":
				b.WriteString(queue)
			}
			b.WriteByte(':')
		}
		return b.String()
	}
	type group struct {
		state string
		queue string
		sets  []*rset.R
		ranks map[*rset.R]idset.Set
	}
	var order []string
	groups := map[string]*group{}
	add := func(key, state, queue string, set *rset.R, ranks idset.Set) {
		g := groups[key]
		if g == nil {
			g = &group{state: state, queue: queue, ranks: map[*rset.R]idset.Set{}}
			groups[key] = g
			order = append(order, key)
		}
		if set == nil {
			return
		}
		if _, ok := g.ranks[set]; !ok {
			g.sets = append(g.sets, set)
		}
		g.ranks[set] = g.ranks[set].Union(ranks)
	}
	for _, state := range states {
		set, err := ss.State(state)
		if err != nil {
			return err
		}
		if set.Empty() {
			// an empty state still makes a line (one per queue)
			for _, q := range emptyQueues {
				add(keyOf(state, "", q), state, q, nil, idset.Set{})
			}
			continue
		}
		// nodes with the same properties belong to the same queues
		byProps := map[string]idset.Set{}
		queueOf := map[string]string{}
		var propOrder []string
		for rank := range set.Ranks().All() {
			p := strings.Join(set.RankProperties(rank), ",")
			if _, ok := byProps[p]; !ok {
				propOrder = append(propOrder, p)
				queueOf[p] = rankQueues(rank)
			}
			s := byProps[p]
			s.Add(rank)
			byProps[p] = s
		}
		for _, p := range propOrder {
			add(keyOf(state, p, queueOf[p]), state, queueOf[p], set, byProps[p])
		}
	}
	var lines []rlistLine
	for _, key := range order {
		g := groups[key]
		line := rlistLine{state: g.state, set: rset.New(), pol: pol, queue: g.queue, numa: numa}
		for _, s := range g.sets {
			line.set = line.set.Union(s.CopyRanks(g.ranks[s]))
		}
		if line.set.Empty() && (o.skipEmpty || (o.include != "" && !o.noSkipEmpty)) {
			continue
		}
		lines = append(lines, line)
	}
	// in the order of the states asked for, then of their first rank
	// (empty lines last)
	firstRank := func(l rlistLine) uint {
		if r, ok := l.set.Ranks().First(); ok {
			return r
		}
		return ^uint(0)
	}
	slices.SortStableFunc(lines, func(a, b rlistLine) int {
		if c := slices.Index(states, a.state) - slices.Index(states, b.state); c != 0 {
			return c
		}
		return cmp.Compare(firstRank(a), firstRank(b))
	})
	return printFormatted(of, lines, o.noHeader, w)
}

func printFormatted[T any](of *outputFormat[T], items []T, noHeader bool, w io.Writer) error {
	if err := of.prepareHeader(items, !noHeader); err != nil {
		return err
	}
	var b strings.Builder
	if !noHeader {
		b.WriteString(of.header())
		b.WriteByte('\n')
	}
	for _, it := range items {
		l, err := of.line(it)
		if err != nil {
			return err
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// runResourceR prints the union of the chosen states as one R.
func runResourceR(ss *resource.SchedStatus, o resourceListOptions, w io.Writer) error {
	states, err := parseStates(o.states, listStates)
	if err != nil {
		return err
	}
	o.queues = splitQueues(o.queues)
	if ss, err = filterSchedStatus(ss, o); err != nil {
		return err
	}
	out := rset.New()
	for _, state := range states {
		set, err := ss.State(state)
		if err != nil {
			return err
		}
		out = out.Union(set)
	}
	if ss.All != nil {
		// the instance's validity window (flux-core prints it)
		out.SetTimes(ss.All.StartTime(), ss.All.Expiration())
	}
	_, err = fmt.Fprintf(w, "%s\n", out.Encode())
	return err
}

// ---- drain, undrain ----

type resourceDrainOptions struct {
	force    int
	update   bool
	format   string
	noHeader bool
	include  string
	queues   []string
	color    string
}

func newResourceDrainCmd() *cobra.Command {
	var o resourceDrainOptions
	cmd := &cobra.Command{
		Use:   "drain [OPTIONS] [TARGETS [REASON...]]",
		Short: "Drain nodes, or list drained nodes",
		Long: `Without TARGETS, list drained nodes. With TARGETS (an idset of ranks or a
hostlist), drain them: the scheduler gives them no new work. The remaining
arguments are the reason. Draining is for the instance owner.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if done, err := resourceFormats["drain"].special(cmd.OutOrStdout(), o.format); done {
					return err
				}
				format, err := resourceFormat("drain", o.format)
				if err != nil {
					return err
				}
				so := resourceStatusOptions{format: format, states: "drain", statesSet: true,
					skipEmpty: true, noHeader: o.noHeader, include: o.include, queues: o.queues, color: o.color}
				return withHandle(func(ctx context.Context, h *flux.Handle) error {
					return resourceStatus(ctx, h, so, cmd.OutOrStdout())
				})
			}
			if o.force > 0 && o.update {
				return fmt.Errorf("only one of --force and --update may be specified")
			}
			mode := resource.DrainFail
			switch {
			case o.update:
				mode = resource.DrainUpdate
			case o.force == 1:
				mode = resource.DrainOverwrite
			case o.force >= 2:
				mode = resource.DrainForceOverwrite
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				err := resource.Drain(ctx, h, args[0], strings.Join(args[1:], " "), mode)
				if errors.Is(err, syscall.EEXIST) {
					fmt.Fprintf(cmd.ErrOrStderr(), "flux-resource: %s\nflux-resource: Use --force to overwrite existing drain reason\n", flux.ErrorText(err))
					return exitCode(1)
				}
				return err
			})
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // the reason may hold words starting with '-'
	f.CountVarP(&o.force, "force", "f", "Overwrite the reason of nodes already drained (twice: and their timestamp)")
	f.BoolVarP(&o.update, "update", "u", false, "Leave nodes already drained as they are")
	f.StringVarP(&o.format, "format", "o", "default", "Output format when listing (use 'help' to list the named ones)")
	f.BoolVarP(&o.noHeader, "no-header", "n", false, "Suppress the header line")
	f.StringVarP(&o.include, "include", "i", "", "Only list these TARGETS (an idset of ranks or a hostlist)")
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Only list nodes of these QUEUES")
	addColorFlag(f, &o.color, true)
	return cmd
}

func newResourceUndrainCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "undrain [OPTIONS] TARGETS",
		Short: "Return drained nodes to service",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return resource.Undrain(ctx, h, args[0], force)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "Do not fail if some TARGETS are not drained")
	return cmd
}
