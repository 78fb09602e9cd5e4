package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/version"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux top: a live view of an instance (flux-top(1)): a summary of its
// resources and jobs, and its running jobs, redrawn every 2 s. On a
// terminal it reads keys (j/k or arrows move, enter opens a job that is
// an instance of the user's, q goes back or quits, d toggles inactive
// details, h/l rotate queues, ^L redraws); with its output not a
// terminal it prints one frame and exits.

type topOptions struct {
	color, queue string
}

func newTopCmd() *cobra.Command {
	var o topOptions
	cmd := &cobra.Command{
		Use:   "top [--color[=WHEN]] [-q QUEUE] [TARGET]",
		Short: "Display running Flux jobs and the instance's state, live",
		Long: `Show a summary of the instance (nodes, cores and GPUs in use and down, job
counts, size, depth, uptime, time left) above its running jobs, newest
first, redrawn every 2 s. TARGET is another instance's URI or the ID of a
job of this one that is an instance.

Keys: j/k or the arrow keys move the cursor; enter opens the selected job
when it is an instance of yours (q comes back); d shows completed and
failed counts instead of inactive; h/l rotate through the queues; ^L
redraws; q quits. When the output is not a terminal, one frame is printed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTop(o, args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	addColorFlag(cmd.Flags(), &o.color, true)
	cmd.Flags().StringVarP(&o.queue, "queue", "q", "", "only the jobs and resources of queue `NAME`")
	return cmd
}

// topView is one instance on the navigation stack.
type topView struct {
	h      *flux.Handle
	path   string // job IDs from the first instance, "" for it
	cursor int
}

// topFrame is what one refresh learned.
type topFrame struct {
	nodes, cores, gpus   [3]int // total, allocated, down
	pending, running     int
	inactive, ok, failed int
	size, depth          int
	uptime, left         float64 // seconds; left < 0: unknown
	jobs                 []*job.Info
	queues               []string
}

func runTop(o topOptions, args []string, in io.Reader, out io.Writer) error {
	color, err := useColor(o.color, out)
	if err != nil {
		return err
	}
	var uri string
	if len(args) == 1 {
		uri, err = resolveTopTarget(args[0])
	} else {
		uri, err = enclosingURI()
	}
	if err != nil {
		return err
	}
	h, err := flux.Open(uri)
	if err != nil {
		return err
	}
	if o.queue != "" {
		ctx, cancel := cmdContext()
		pol, err := policy.Fetch(ctx, h)
		cancel()
		if err == nil {
			err = pol.CheckQueue(o.queue)
		}
		if err != nil {
			h.Close()
			return fmt.Errorf("--queue=%s: %w", o.queue, err)
		}
	}
	stack := []*topView{{h: h}}
	defer func() {
		for _, v := range stack {
			v.h.Close()
		}
	}()
	ctx, cancel := cmdContext()
	defer cancel()
	t := &topState{queue: o.queue, color: color}
	f, isFile := out.(*os.File)
	tty := isFile && isTerminal(f)
	if !tty {
		fr, err := t.fetch(ctx, stack[0].h)
		if err != nil {
			return err
		}
		_, err = io.WriteString(out, t.render(stack, fr, 0))
		return err
	}
	inFile, _ := in.(*os.File)
	restore := func() {}
	if inFile != nil && isTerminal(inFile) {
		if restore, err = rawMode(inFile); err != nil {
			return err
		}
	}
	defer restore()
	fmt.Fprint(out, "\x1b[?25l") // hide the cursor
	defer fmt.Fprint(out, "\x1b[?25h\x1b[2J\x1b[H")
	keys := make(chan byte, 16)
	go func() {
		b := make([]byte, 8)
		for {
			n, err := in.Read(b)
			for i := 0; i < n; i++ {
				keys <- b[i]
			}
			if err != nil {
				close(keys)
				return
			}
		}
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var fr *topFrame
	draw := func(refetch bool) error {
		v := stack[len(stack)-1]
		if refetch || fr == nil {
			nf, err := t.fetch(ctx, v.h)
			if err != nil {
				return err
			}
			fr = nf
		}
		if v.cursor >= len(fr.jobs) {
			v.cursor = max(len(fr.jobs)-1, 0)
		}
		rows := terminalRows(f)
		fmt.Fprint(out, "\x1b[H\x1b[2J"+strings.ReplaceAll(t.render(stack, fr, rows), "\n", "\r\n"))
		return nil
	}
	if err := draw(true); err != nil {
		return err
	}
	esc := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := draw(true); err != nil {
				return err
			}
		case k, ok := <-keys:
			if !ok {
				return nil
			}
			v := stack[len(stack)-1]
			// arrows arrive as ESC [ A/B/C/D
			if esc == 1 && k == '[' {
				esc = 2
				continue
			}
			if esc == 2 {
				esc = 0
				k = map[byte]byte{'A': 'k', 'B': 'j', 'C': 'l', 'D': 'h'}[k]
			}
			switch k {
			case 0x1b:
				esc = 1
				continue
			case 'q':
				if len(stack) == 1 {
					return nil
				}
				stack[len(stack)-1].h.Close()
				stack = stack[:len(stack)-1]
				fr = nil
			case 'j':
				v.cursor++
			case 'k':
				if v.cursor > 0 {
					v.cursor--
				}
			case 'd':
				t.details = !t.details
			case 'h', 'l':
				t.rotateQueue(fr, k == 'l')
				fr = nil
			case '\r', '\n':
				if fr != nil && v.cursor < len(fr.jobs) {
					if child := t.open(fr.jobs[v.cursor], v); child != nil {
						stack = append(stack, child)
						fr = nil
					}
				}
			case 0x0c: // ^L
			}
			esc = 0
			if err := draw(fr == nil); err != nil {
				return err
			}
		}
	}
}

// topState is what the keys change.
type topState struct {
	queue   string
	color   bool
	details bool
}

func (t *topState) rotateQueue(fr *topFrame, forward bool) {
	if fr == nil || len(fr.queues) == 0 {
		return
	}
	all := append([]string{""}, fr.queues...)
	i := 0
	for k, q := range all {
		if q == t.queue {
			i = k
		}
	}
	if forward {
		i = (i + 1) % len(all)
	} else {
		i = (i + len(all) - 1) % len(all)
	}
	t.queue = all[i]
}

// open connects to the job's instance if it is one of the user's.
func (t *topState) open(j *job.Info, parent *topView) *topView {
	if j.Userid != uint32(os.Getuid()) {
		return nil
	}
	uri := instanceURI(j)
	if uri == "" {
		return nil
	}
	local, err := localURI(uri)
	if err != nil {
		return nil
	}
	h, err := flux.Open(local)
	if err != nil {
		return nil
	}
	return &topView{h: h, path: parent.path + "/" + j.ID.String()}
}

// fetch asks the instance for one frame's worth.
func (t *topState) fetch(ctx context.Context, h *flux.Handle) (*topFrame, error) {
	fr := &topFrame{left: -1}
	if st, err := resource.GetSchedStatus(ctx, h); err == nil {
		count := func(r *rset.R) [3]int {
			if r == nil {
				return [3]int{}
			}
			return [3]int{r.NNodes(), r.NCores(), r.NGPUs()}
		}
		all, alloc, down := count(st.All), count(st.Allocated), count(st.Down)
		fr.nodes = [3]int{all[0], alloc[0], down[0]}
		fr.cores = [3]int{all[1], alloc[1], down[1]}
		fr.gpus = [3]int{all[2], alloc[2], down[2]}
	}
	st, err := getJobStats(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("job-list.job-stats: %w", err)
	}
	counts := &st.jobStats
	for _, q := range st.Queues {
		fr.queues = append(fr.queues, q.Name)
		if q.Name == t.queue {
			counts = &q.jobStats
		}
	}
	fr.pending, fr.running = counts.pending(), counts.running()
	fr.inactive, fr.ok, fr.failed = counts.JobStates["inactive"], counts.Successful, counts.failed()
	if s, err := h.Attr(ctx, "size"); err == nil {
		fr.size, _ = strconv.Atoi(s)
	}
	if s, err := h.Attr(ctx, "instance-level"); err == nil {
		fr.depth, _ = strconv.Atoi(s)
	}
	if s, err := h.Attr(ctx, "broker.starttime"); err == nil {
		if start, err := strconv.ParseFloat(s, 64); err == nil {
			fr.uptime = time.Since(time.Unix(0, int64(start*1e9))).Seconds()
		}
	}
	var R json.RawMessage
	if kvs.GetJSON(ctx, h, "", "resource.R", &R) == nil {
		if r, err := rset.Parse(R); err == nil && r.Expiration() > 0 {
			fr.left = max(r.Expiration()-float64(time.Now().UnixNano())/1e9, 0)
		}
	}
	req := job.ListRequest{Attrs: []string{"all"}, Constraint: map[string]any{"states": []string{"running"}}}
	if t.queue != "" {
		req.Constraint = map[string]any{"and": []any{req.Constraint, map[string]any{"queue": []string{t.queue}}}}
	}
	jobs, err := job.List(ctx, h, req)
	if err != nil {
		return nil, fmt.Errorf("job-list.list: %w", err)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].ID > jobs[b].ID })
	fr.jobs = jobs
	return fr, nil
}

// render draws a frame (rows: the terminal's height, 0 for no limit).
func (t *topState) render(stack []*topView, fr *topFrame, rows int) string {
	var b strings.Builder
	v := stack[len(stack)-1]
	title := "flux top"
	if v.path != "" {
		title += " " + v.path
	}
	if t.queue != "" {
		title += " [queue " + t.queue + "]"
	}
	left := "∞"
	if fr.left >= 0 {
		left = fsd.FormatPrecision(fr.left, 3)
	}
	fmt.Fprintf(&b, "%-60s ⌚ %s\n", paint(t.color, sgrBold, title), left)
	for _, r := range []struct {
		name string
		c    [3]int
	}{{"nodes", fr.nodes}, {"cores", fr.cores}, {"gpus", fr.gpus}} {
		fmt.Fprintf(&b, "%6s %s %d/%d", r.name, t.bar(r.c, 40), r.c[1], r.c[0])
		if r.c[2] > 0 {
			fmt.Fprintf(&b, " (%d down)", r.c[2])
		}
		b.WriteByte('\n')
	}
	inactive := fmt.Sprintf("%d inactive", fr.inactive)
	if t.details {
		inactive = fmt.Sprintf("%d complete, %d failed", fr.ok, fr.failed)
	}
	fmt.Fprintf(&b, "%6d pending %s running %s   size: %d   depth: %d   uptime: %s   %s\n\n",
		fr.pending, paint(t.color, sgrYellow, strconv.Itoa(fr.running)), inactive, fr.size, fr.depth,
		fsd.FormatPrecision(fr.uptime, 3), "fluxgo "+version.Version)
	fmt.Fprintf(&b, "%12s %-8s %2s %6s %6s %8s %s\n", "JOBID", "USER", "ST", "NTASKS", "NNODES", "RUNTIME", "NAME")
	now := float64(time.Now().UnixNano()) / 1e9
	for i, j := range fr.jobs {
		if rows > 0 && i >= rows-7 {
			break
		}
		runtime := 0.0
		if j.TRun > 0 {
			runtime = max(now-j.TRun, 0)
		}
		line := fmt.Sprintf("%12s %-8.8s %2s %6d %6d %8s %s", j.ID.String(), usernameOf(j.Userid),
			j.State.Abbrev(), j.Ntasks, j.Nnodes, fsd.FormatPrecision(runtime, 3), j.Name)
		switch {
		case i == v.cursor && rows > 0: // the cursor, on a terminal
			line = paint(t.color, sgrReverse, line)
		case instanceURI(j) != "":
			line = paint(t.color, sgrBlue, line) // an instance: enter opens it
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// bar draws used (from the left) and down (from the right) parts of c.
func (t *topState) bar(c [3]int, width int) string {
	if c[0] == 0 {
		return "[" + strings.Repeat(" ", width) + "]"
	}
	used := c[1] * width / c[0]
	down := c[2] * width / c[0]
	if used+down > width {
		down = width - used
	}
	u, d := strings.Repeat("█", used), strings.Repeat("█", down)
	if t.color {
		u, d = paint(true, sgrYellow, u), paint(true, sgrRed, d)
	} else {
		d = strings.Repeat("x", down)
	}
	return "[" + u + strings.Repeat(" ", width-used-down) + d + "]"
}

// resolveTopTarget reads a URI, or the ID of a job of the enclosing
// instance that is an instance.
func resolveTopTarget(arg string) (string, error) {
	if strings.Contains(arg, "://") {
		return localURI(arg)
	}
	id, err := parseJobIDArg(arg)
	if err != nil {
		return "", err
	}
	var uri string
	err = withHandle(func(ctx context.Context, h *flux.Handle) error {
		jobs, err := job.List(ctx, h, job.ListRequest{Attrs: []string{"all"}, Constraint: map[string]any{"states": []string{"running"}}})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if j.ID == id {
				uri = instanceURI(j)
			}
		}
		if uri == "" {
			return fmt.Errorf("job %s is not a running Flux instance", id.String())
		}
		uri, err = localURI(uri)
		return err
	})
	return uri, err
}

func terminalRows(f *os.File) int {
	if _, rows, ok := terminalSize(f); ok && rows > 0 {
		return rows
	}
	return 24
}

// rawMode puts a terminal in character-at-a-time mode without echo and
// returns how to put it back. It is cbreak, not x/term's MakeRaw, which
// would also turn off ^C and the output's newline translation.
func rawMode(f *os.File) (func(), error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Iflag &^= unix.ICRNL
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
