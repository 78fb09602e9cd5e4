package cli

// flux pstree: the tree of running jobs by name, descending into jobs
// that run Flux instances (flux batch, flux alloc) the way flux jobs -R
// does. Identical leaves under one parent are combined as N*[label].
// Labels and the optional details columns use flux jobs format fields.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// pstreeDetails are the named --details formats.
var pstreeDetails = map[string]string{
	"default": "{id.f58:>12} {username:<8.8} {status_abbrev:>2.2} {ntasks:>6} {nnodes:>6h} {runtime!F:>8h}",
}

type pstreeOptions struct {
	all          bool
	count        int
	filters      []string
	long         bool
	parentIDs    bool
	level        int
	levelSet     bool
	extended     bool
	details      string
	detailFormat string
	noHeader     bool
	noCombine    bool
	label        string
	parentLabel  string
	skipRoot     string
	compact      bool
	ascii        bool
	ids          []string
}

func newPstreeCmd() *cobra.Command {
	var o pstreeOptions
	cmd := &cobra.Command{
		Use:   "pstree [OPTIONS] [JOBID...]",
		Short: "Display a tree of running jobs by name",
		Long: `Display the tree of the user's running jobs by name, descending into
jobs that are Flux instances. Identical leaves are combined as N*[name].
Labels (-o, --parent-label) and details (-x, --detail-format) take
flux jobs format fields.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ids = args
			o.levelSet = cmd.Flags().Changed("level")
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return runPstree(ctx, h, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "a", false, "Include jobs in all states (--filter=pending,running,inactive)")
	f.IntVarP(&o.count, "count", "c", 1000, "Limit output to `N` jobs at every level")
	f.StringSliceVarP(&o.filters, "filter", "f", nil, "Include jobs with specific job `STATE|RESULT`s")
	f.BoolVarP(&o.long, "long", "l", false, "Do not truncate long lines to COLUMNS characters")
	f.BoolVarP(&o.parentIDs, "parent-ids", "p", false, "Prepend jobid to parent labels")
	f.IntVarP(&o.level, "level", "L", 0, "Only descend `N` levels of the job hierarchy")
	f.BoolVarP(&o.extended, "extended", "x", false, "Print extended details before the tree (--details=default)")
	f.StringVarP(&o.details, "details", "d", "", "Print details `NAME` before the tree (default)")
	f.StringVar(&o.detailFormat, "detail-format", "", "Print details in `FORMAT` before the tree")
	f.BoolVarP(&o.noHeader, "no-header", "n", false, "With details, do not print the header")
	f.BoolVarP(&o.noCombine, "no-combine", "X", false, "Do not combine identical leaves")
	f.StringVarP(&o.label, "label", "o", "", "Label jobs with `FORMAT` (default {name}, {name}:{status_abbrev} with -a)")
	f.StringVar(&o.parentLabel, "parent-label", "", "Label parent jobs (instances) with `FORMAT`")
	f.StringVar(&o.skipRoot, "skip-root", "", "Skip (yes) or show (no) the enclosing instance, the root of the tree")
	f.BoolVarP(&o.compact, "compact", "C", false, "Use compact tree connectors")
	f.BoolVar(&o.ascii, "ascii", false, "Use ASCII tree connectors")
	return cmd
}

// pstreeNode is a job in the tree (the root has no job).
type pstreeNode struct {
	row      *jobRow
	instance bool
	children []*pstreeNode
	count    int // >1: combined identical leaves
	label    string
}

func runPstree(ctx context.Context, h *flux.Handle, o pstreeOptions, out, errw io.Writer) error {
	label := o.label
	if label == "" {
		label = "{name}"
		if o.all || len(o.filters) > 0 {
			label = "{name}:{status_abbrev}"
		}
	}
	parent := o.parentLabel
	if parent == "" {
		parent = label
	}
	if o.parentIDs {
		parent = "{id.f58} " + parent
	}
	details := o.detailFormat
	if details == "" {
		name := o.details
		if name == "" && o.extended {
			name = "default"
		}
		if name != "" {
			var ok bool
			if details, ok = pstreeDetails[name]; !ok {
				return fmt.Errorf("unknown details format %q (known: default)", name)
			}
		}
	}
	skip := details != "" || len(o.ids) > 0
	switch o.skipRoot {
	case "yes":
		skip = true
	case "no":
		skip = false
	case "":
	default:
		return fmt.Errorf("--skip-root=%s: want yes or no", o.skipRoot)
	}
	lf, err := compileFormat(label, jobFieldSource)
	if err != nil {
		return fmt.Errorf("--label: %w", err)
	}
	pf, err := compileFormat(parent, jobFieldSource)
	if err != nil {
		return fmt.Errorf("--parent-label: %w", err)
	}
	var df *outputFormat[jobRow]
	if details != "" {
		if df, err = compileFormat(details, jobFieldSource); err != nil {
			return fmt.Errorf("details: %w", err)
		}
	}
	attrs := jobFieldsAttrs(lf.fields)
	attrs = append(attrs, jobFieldsAttrs(pf.fields)...)
	if df != nil {
		attrs = append(attrs, jobFieldsAttrs(df.fields)...)
	}
	attrs = append(attrs, "annotations", "state", "userid", "name")
	t := &pstreeWalk{o: o, attrs: attrs, now: time.Now(), errw: errw}
	root := &pstreeNode{instance: true}
	if err := t.fill(ctx, h, root, 0, o.ids); err != nil {
		return err
	}
	lines := t.render(root, lf, pf, df, skip, !o.noCombine && df == nil)
	if df != nil && !o.noHeader {
		lines = append([]string{strings.TrimRight(df.header(), " ")}, lines...)
	}
	width := 0
	if !o.long {
		width = terminalWidth(out)
	}
	for _, l := range lines {
		if width > 0 && utf8.RuneCountInString(l) > width {
			l = string([]rune(l)[:width])
		}
		fmt.Fprintln(out, l)
	}
	return nil
}

// pstreeWalk fetches the tree.
type pstreeWalk struct {
	o     pstreeOptions
	attrs []string
	now   time.Time
	errw  io.Writer
}

// fill lists the jobs of the instance at h under n, and theirs.
func (t *pstreeWalk) fill(ctx context.Context, h *flux.Handle, n *pstreeNode, depth int, ids []string) error {
	now := float64(t.now.UnixNano()) / 1e9
	var infos []*job.Info
	if len(ids) > 0 {
		for _, s := range ids {
			id, err := parseJobIDArg(s)
			if err != nil {
				return err
			}
			j, err := job.ListID(ctx, h, id, t.attrs, 0)
			if err != nil {
				fmt.Fprintf(t.errw, "flux-pstree: %s: %s\n", s, flux.ErrorText(err))
				continue
			}
			infos = append(infos, j)
		}
	} else {
		jo := jobsOptions{all: t.o.all, filters: t.o.filters, now: t.now}
		if !jo.all && len(jo.filters) == 0 {
			jo.filters = []string{"running"}
		}
		c, since, err := jobsConstraint(&jo)
		if err != nil {
			return err
		}
		err = job.ListPages(ctx, h, job.ListRequest{MaxEntries: t.o.count, Attrs: t.attrs, Since: since, Constraint: c},
			func(p []byte) error {
				return job.DecodeJobs(p, func(j *job.Info) { infos = append(infos, j) })
			})
		if err != nil {
			return err
		}
	}
	me := uint32(os.Getuid())
	for _, j := range infos {
		child := &pstreeNode{row: &jobRow{Info: j, now: now}, count: 1}
		n.children = append(n.children, child)
		uri := instanceURI(j)
		if uri == "" {
			continue
		}
		child.instance = true
		if j.Userid != me || (t.o.levelSet && depth >= t.o.level) {
			continue
		}
		local, err := localURI(uri)
		if err != nil {
			fmt.Fprintf(t.errw, "flux-pstree: %s: %v\n", j.ID.String(), err)
			continue
		}
		ch, err := flux.Open(local)
		if err != nil {
			fmt.Fprintf(t.errw, "flux-pstree: %s: %v\n", j.ID.String(), err)
			continue
		}
		err = t.fill(ctx, ch, child, depth+1, nil)
		ch.Close()
		if err != nil {
			fmt.Fprintf(t.errw, "flux-pstree: %s: %v\n", j.ID.String(), err)
		}
	}
	return nil
}

// connectors are the tree drawing strings: branch, last branch,
// continuation, blank.
type connectors struct{ branch, last, cont, blank string }

func (o pstreeOptions) connectors() connectors {
	switch {
	case o.ascii && o.compact:
		return connectors{"|-", "`-", "| ", "  "}
	case o.ascii:
		return connectors{"|-- ", "`-- ", "|   ", "    "}
	case o.compact:
		return connectors{"├─", "└─", "│ ", "  "}
	}
	return connectors{"├── ", "└── ", "│   ", "    "}
}

// render labels the tree and draws it.
func (t *pstreeWalk) render(root *pstreeNode, lf, pf, df *outputFormat[jobRow], skipRoot, combine bool) []string {
	var label func(n *pstreeNode)
	label = func(n *pstreeNode) {
		for _, c := range n.children {
			f := lf
			if c.instance {
				f = pf
			}
			c.label, _ = f.line(*c.row)
			label(c)
		}
		if combine {
			n.children = combineLeaves(n.children)
		}
	}
	label(root)
	cs := t.o.connectors()
	var lines []string
	detail := func(n *pstreeNode) string {
		if df == nil {
			return ""
		}
		if n.row == nil {
			s, _ := df.line(jobRow{Info: &job.Info{}})
			return strings.Repeat(" ", utf8.RuneCountInString(s)) + " "
		}
		s, _ := df.line(*n.row)
		return s + " "
	}
	text := func(n *pstreeNode) string {
		if n.count > 1 {
			return strconv.Itoa(n.count) + "*[" + n.label + "]"
		}
		return n.label
	}
	var walk func(n *pstreeNode, prefix string)
	walk = func(n *pstreeNode, prefix string) {
		for i, c := range n.children {
			conn, next := cs.branch, cs.cont
			if i == len(n.children)-1 {
				conn, next = cs.last, cs.blank
			}
			lines = append(lines, detail(c)+prefix+conn+text(c))
			walk(c, prefix+next)
		}
	}
	if skipRoot {
		for _, c := range root.children {
			lines = append(lines, detail(c)+text(c))
			walk(c, "")
		}
	} else {
		lines = append(lines, detail(root)+".")
		walk(root, "")
	}
	return lines
}

// combineLeaves merges leaves with the same label, keeping the first's
// place.
func combineLeaves(list []*pstreeNode) []*pstreeNode {
	var out []*pstreeNode
	seen := map[string]*pstreeNode{}
	for _, n := range list {
		if n.instance || len(n.children) > 0 {
			out = append(out, n)
			continue
		}
		if first, ok := seen[n.label]; ok {
			first.count++
			continue
		}
		seen[n.label] = n
		out = append(out, n)
	}
	return out
}

// terminalWidth is $COLUMNS, or the width of the terminal w is, or 0.
func terminalWidth(w io.Writer) int {
	if c := os.Getenv("COLUMNS"); c != "" {
		if n, err := strconv.Atoi(c); err == nil && n > 0 {
			return n
		}
	}
	cols, _, _ := terminalSize(w)
	return cols
}
