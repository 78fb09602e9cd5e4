package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// flux pool: hierarchical scheduling by pull (seed 002). Jobs go into a
// named pool of an instance; child instances running `flux pool pull`
// take them when they have room. See internal/modules/jobpool and
// docs/HIERARCHY.md.

const defaultPoolName = "default"

func newPoolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool COMMAND [OPTIONS]",
		Short: "Pools of jobs that child instances pull and run",
		Long: `A pool holds jobs for child instances to pull: flux pool submit puts jobs
in a pool of this instance (they are not scheduled here), and each child
instance started with flux pool pull as its initial program, e.g.

  flux pool submit -p work --cc=1-100 ./analyze {cc}
  flux pool close -p work
  flux batch -N2 --wrap flux pool pull -p work     # as many as you like

takes jobs whenever it has room for more, runs them as its own jobs and
reports each result back: flux pool list -p work shows which child ran
what and how it ended. Jobs a child had taken but not finished when it
went away return to the pool. Pools belong to the user who made them.`,
	}
	cmd.AddCommand(newPoolCreateCmd(), newPoolSubmitCmd(), newPoolAddCmd(), newPoolListCmd(),
		newPoolCloseCmd(), newPoolRemoveCmd(), newPoolPullCmd())
	return cmd
}

func poolFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "pool", "p", defaultPoolName, "the pool's `NAME`")
}

func newPoolCreateCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "create [-p NAME]",
		Short: "Make an empty pool (flux pool submit makes one as needed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return poolCall("job-pool.create", map[string]any{"pool": name}, nil)
		},
	}
	poolFlag(cmd, &name)
	return cmd
}

func newPoolCloseCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "close [-p NAME]",
		Short: "Take no more jobs: pullers stop once the pool is empty",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return poolCall("job-pool.close", map[string]any{"pool": name}, nil)
		},
	}
	poolFlag(cmd, &name)
	return cmd
}

func newPoolRemoveCmd() *cobra.Command {
	var name string
	var force bool
	cmd := &cobra.Command{
		Use:   "remove [-f] [-p NAME]",
		Short: "Forget a pool and its jobs' records",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return poolCall("job-pool.remove", map[string]any{"pool": name, "force": force}, nil)
		},
	}
	poolFlag(cmd, &name)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove it even with jobs out in child instances")
	return cmd
}

// poolCall makes one job-pool request of the enclosing instance.
func poolCall(topic string, req any, resp any) error {
	if name, _ := req.(map[string]any)["pool"].(string); name != "" {
		if err := wire.CheckPoolName(name); err != nil {
			return err
		}
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		return h.Call(ctx, topic, 0, req, resp)
	})
}

func newPoolSubmitCmd() *cobra.Command {
	o := &submitOptions{cmdName: "pool submit", proc: defaultProcessEnv()}
	var name string
	cmd := &cobra.Command{
		Use:   "submit [-p NAME] [OPTIONS...] COMMAND [ARGS...]",
		Short: "Put jobs in a pool (takes flux submit's job options)",
		Long: `Build a job as flux submit does (one per ID of --cc/--bcc) and put it in
a pool for child instances to pull, printing each job's pool item ID.
Urgency, submission flags and job dependencies do not carry over to the
instance that runs the job and are refused; --begin-time is kept.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPoolSubmit(o, name, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().SetInterspersed(false)
	poolFlag(cmd, &name)
	addSubmitFlags(cmd.Flags(), o, submitFlagSets{perTask: true})
	cmd.Flags().StringVar(&o.cc, "cc", "", "Replicate the job for each ID in `IDSET` (FLUX_JOB_CC=ID is set for each)")
	cmd.Flags().StringVar(&o.bcc, "bcc", "", "Like --cc, but FLUX_JOB_CC is not set (`IDSET`)")
	cmd.Flags().BoolVar(&o.quiet, "quiet", false, "Do not print the item IDs")
	return cmd
}

func runPoolSubmit(o *submitOptions, name string, args []string, out io.Writer) error {
	if o.urgency != "16" && o.urgency != "default" {
		return fmt.Errorf("--urgency=%s: a pooled job's urgency is not kept (the child instance submits it at the default)", o.urgency)
	}
	if len(o.flags) > 0 {
		return fmt.Errorf("--flags: submission flags do not apply to pooled jobs")
	}
	for _, d := range o.deps {
		if d.uri != "" {
			return fmt.Errorf("--dependency=%s: job IDs of this instance mean nothing where a pooled job runs", d.uri)
		}
	}
	if len(args) == 0 {
		return errors.New("job command and arguments are missing")
	}
	if o.dryRun {
		return eachPoolJobspec(o, args, func(b []byte) error {
			_, err := fmt.Fprintf(out, "%s\n", b)
			return err
		})
	}
	// sent a chunk at a time: a million jobs are never all in memory here
	var chunk []json.RawMessage
	size := 0
	send := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := poolAdd(name, chunk, o.quiet, out)
		chunk, size = chunk[:0], 0
		return err
	}
	err := eachPoolJobspec(o, args, func(b []byte) error {
		chunk = append(chunk, b)
		size += len(b)
		if len(chunk) >= poolAddChunk || size >= poolAddBytes {
			return send()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return send()
}

// poolAddChunk and poolAddBytes bound one job-pool.add request of flux
// pool submit: it sends its jobs in requests of at most this many (or
// this many bytes of jobspecs).
const (
	poolAddChunk = 10000
	poolAddBytes = 16 << 20
)

// eachPoolJobspec calls fn with the JSON of each jobspec the options
// describe (one, or one per ID of --cc/--bcc, as buildJobspecs makes
// them), one at a time. Identical jobspecs share one encoding, and once
// two IDs in a row have given the same jobspec (no {cc} in the command
// or options, no FLUX_JOB_CC), the rest are that one too.
func eachPoolJobspec(o *submitOptions, args []string, fn func([]byte) error) error {
	ids, err := o.ccIDs()
	if err != nil {
		return err
	}
	if ids == nil {
		js, err := o.buildOne(args)
		if err != nil {
			return err
		}
		b, err := js.MarshalJSON()
		if err != nil {
			return err
		}
		return fn(b)
	}
	var prev []byte
	same := 0 // IDs in a row that gave prev
	for _, id := range ids {
		if same < 2 {
			b, err := poolCCJobspec(o, args, id)
			if err != nil {
				return err
			}
			if bytes.Equal(b, prev) {
				same++
			} else {
				prev, same = b, 1
			}
		}
		if err := fn(prev); err != nil {
			return err
		}
	}
	return nil
}

// poolCCJobspec is the JSON of the jobspec of --cc/--bcc ID id.
func poolCCJobspec(o *submitOptions, args []string, id int) ([]byte, error) {
	js, err := o.buildCC(args, id)
	if err != nil {
		return nil, err
	}
	return js.MarshalJSON()
}

// poolAdd sends jobspecs to a pool and prints their item IDs.
func poolAdd(name string, raws []json.RawMessage, quiet bool, out io.Writer) error {
	var resp struct {
		IDs []int64 `json:"ids"`
	}
	if err := poolCall("job-pool.add", map[string]any{"pool": name, "jobspecs": raws}, &resp); err != nil {
		return err
	}
	if !quiet {
		w := bufio.NewWriter(out)
		for _, id := range resp.IDs {
			fmt.Fprintln(w, id)
		}
		return w.Flush()
	}
	return nil
}

func newPoolAddCmd() *cobra.Command {
	var name string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "add [-p NAME] FILE...",
		Short: "Put jobspecs from files in a pool (- for standard input)",
		Long: `Put the jobspecs in FILEs (JSON or YAML, one per file) in a pool. "-" reads
standard input: one JSON jobspec per line, as flux submit --dry-run writes
them, or a single YAML or JSON document.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raws []json.RawMessage
			for _, f := range args {
				got, err := readJobspecs(f, cmd.InOrStdin())
				if err != nil {
					return err
				}
				raws = append(raws, got...)
			}
			return poolAdd(name, raws, quiet, cmd.OutOrStdout())
		},
	}
	poolFlag(cmd, &name)
	cmd.Flags().BoolVar(&quiet, "quiet", false, "do not print the item IDs")
	return cmd
}

// readJobspecs reads the jobspecs of one add argument, checked and
// converted to JSON.
func readJobspecs(path string, stdin io.Reader) ([]json.RawMessage, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if path == "-" {
		path = "standard input"
	}
	var docs [][]byte
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 1 && strings.HasPrefix(strings.TrimSpace(lines[0]), "{") && json.Valid([]byte(lines[0])) {
		for _, l := range lines {
			if strings.TrimSpace(l) != "" {
				docs = append(docs, []byte(l))
			}
		}
	} else {
		docs = [][]byte{data}
	}
	out := make([]json.RawMessage, 0, len(docs))
	for i, d := range docs {
		js, err := jobspec.ParseV1(d)
		if err != nil {
			if len(docs) > 1 {
				return nil, fmt.Errorf("%s, line %d: %w", path, i+1, err)
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b, err := js.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func newPoolListCmd() *cobra.Command {
	var name, user string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "list [-A] [-u USER] [-p NAME] [--json]",
		Short: "List pools, or with -p the jobs of one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := map[string]any{"all": all}
			if cmd.Flags().Changed("pool") {
				if err := wire.CheckPoolName(name); err != nil {
					return err
				}
				req["pool"] = name
			}
			if user != "" {
				uid, err := lookupUserid(user)
				if err != nil || uid < 0 {
					return fmt.Errorf("--user=%s: give one user name or number", user)
				}
				req["userid"] = uid
			}
			var resp struct {
				Pools []wire.PoolInfo `json:"pools"`
				Pool  *wire.PoolInfo  `json:"pool"`
				Items []wire.PoolItem `json:"items"`
			}
			var raw json.RawMessage
			if err := poolCall("job-pool.list", req, &raw); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				_, err := fmt.Fprintf(out, "%s\n", raw)
				return err
			}
			if err := json.Unmarshal(raw, &resp); err != nil {
				return fmt.Errorf("job-pool.list: %w", err)
			}
			if resp.Pool != nil {
				return printPoolItems(out, resp.Pool, resp.Items)
			}
			return printPools(out, resp.Pools)
		},
	}
	poolFlag(cmd, &name)
	cmd.Flags().BoolVarP(&all, "all-users", "A", false, "every user's pools (instance owner only)")
	cmd.Flags().StringVarP(&user, "user", "u", "", "the pools of `USER` (instance owner only for another user)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the service's JSON answer")
	return cmd
}

func printPools(out io.Writer, pools []wire.PoolInfo) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "USER\tNAME\tSTATE\tPENDING\tRUNNING\tDONE\tPULLERS")
	for _, p := range pools {
		state := "open"
		if p.Closed {
			state = "closed"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", usernameOf(p.Userid), p.Name, state, p.Pending, p.Assigned, p.Done, p.Waiting)
	}
	return w.Flush()
}

func printPoolItems(out io.Writer, p *wire.PoolInfo, items []wire.PoolItem) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATE\tCHILD\tJOBID\tRESULT\tNOTE")
	for _, it := range items {
		jid, result, note := "-", "-", ""
		if it.Result != nil {
			if it.Result.Jobid != "" {
				jid = it.Result.Jobid
			}
			result, note = it.Result.Result, it.Result.Note
			if it.Result.Waitstatus != nil && *it.Result.Waitstatus != 0 {
				note = strings.TrimSpace(fmt.Sprintf("exit %d %s", job.WaitstatusToExitCode(*it.Result.Waitstatus), note))
			}
		}
		child := it.Child
		if child == "" {
			child = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", it.ID, it.State, child, jid, result, note)
	}
	return w.Flush()
}

func newPoolPullCmd() *cobra.Command {
	var o pullOptions
	cmd := &cobra.Command{
		Use:   "pull [-p NAME] [--window=N] [--parent=URI] [-v]",
		Short: "Run jobs pulled from a pool of the enclosing instance (a child's initial program)",
		Long: `Run in a child instance (e.g. flux batch --wrap flux pool pull -p NAME):
take jobs from the pool NAME of the instance this one runs in, run them
here, report each one's result back, and take more as they finish, until
the pool is closed and empty and every job taken has ended. At most
--window jobs are unfinished here at a time; more are asked for once a
quarter of that is free. Without --window it starts at 4 per core of
this instance (at least 8) and follows how fast jobs end here: about as
many as ended in the last second (up to 1024), so short jobs come in
large batches and long ones are not held here while another child could
run them. Results go back in batches (at most 0.1 s late).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wire.CheckPoolName(o.pool); err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return pullJobs(ctx, h, o, cmd.ErrOrStderr())
			})
		},
	}
	poolFlag(cmd, &o.pool)
	cmd.Flags().IntVar(&o.window, "window", 0, "at most `N` pulled jobs unfinished at a time (default: 4 per core at first, then about a second's worth)")
	cmd.Flags().StringVar(&o.parent, "parent", "", "pull from the instance at `URI` (default: the enclosing instance, attribute parent-uri)")
	cmd.Flags().CountVarP(&o.verbose, "verbose", "v", "print each job taken and its result on stderr")
	return cmd
}

type pullOptions struct {
	pool    string
	window  int
	parent  string
	verbose int
}

// pulled is a job taken from the pool.
type pulled struct {
	ID      int64           `json:"id"`
	Jobspec json.RawMessage `json:"jobspec"`
}

// pullEvent is what the pull loop waits for.
type pullEvent struct {
	items    []pulled // a pull answered
	err      error    // ... or failed (ENODATA: closed and empty)
	done     *pullDone
	isPull   bool
	isReport bool // a job-pool.done answered (err: refused)
}

// reportBatch and reportDelay are when flux pool pull reports results:
// once it has reportBatch, or the first has waited reportDelay.
const (
	reportBatch = 256
	reportDelay = 100 * time.Millisecond
)

type pullDone struct {
	item   int64
	result wire.PoolResult
}

// pullJobs is flux pool pull: one pull request out at a time, asking
// for as many jobs as there is room for.
func pullJobs(ctx context.Context, h *flux.Handle, o pullOptions, errw io.Writer) error {
	parentURI := o.parent
	if parentURI == "" {
		var err error
		if parentURI, err = h.Attr(ctx, "parent-uri"); err != nil {
			return fmt.Errorf("this instance has no parent-uri attribute (it is not a job of another instance): give --parent=URI")
		}
	}
	ph, err := flux.Open(parentURI)
	if err != nil {
		return fmt.Errorf("enclosing instance %s: %w", parentURI, err)
	}
	defer ph.Close()
	window := o.window
	if window < 0 {
		return fmt.Errorf("--window=%d: want a positive count", window)
	}
	adaptive := window == 0
	minWindow := window
	if adaptive {
		cores, err := instanceCores(ctx, h)
		if err != nil {
			return fmt.Errorf("--window not given and this instance's size is unknown: %w", err)
		}
		window = defaultWindow(cores)
		minWindow = window
	}
	refill := max(1, window/4)
	// the default window grows to about a second of work (the jobs that
	// ended here in the last second, up to maxWindow): short jobs then
	// come and go in batches (each job the child's job manager commits
	// with others is cheaper), long ones keep few queued here that
	// another child could run
	periodStart, periodDone := time.Now(), 0
	adapt := func() {
		el := time.Since(periodStart)
		if !adaptive || el < time.Second {
			return
		}
		window = min(maxWindow, max(minWindow, int(float64(periodDone)/el.Seconds())))
		refill = max(1, window/4)
		periodStart, periodDone = time.Now(), 0
	}
	child := "pid " + fmt.Sprint(os.Getpid())
	if id, err := h.Attr(ctx, "jobid"); err == nil {
		child = "job " + id
	} else if host, err := os.Hostname(); err == nil {
		child = host + " " + child
	}
	events := make(chan pullEvent, 16)
	pullOut, closed := false, false
	inflight, taken, reported := 0, 0, 0
	var failed error
	pull := func() {
		pullOut = true
		req := map[string]any{"pool": o.pool, "max": window - inflight, "child": child}
		f, err := ph.RPC("job-pool.pull", 0, req, 0)
		if err != nil {
			events <- pullEvent{isPull: true, err: err}
			return
		}
		go func() {
			var resp struct {
				Items []pulled `json:"items"`
			}
			err := f.Decode(ctx, &resp)
			events <- pullEvent{isPull: true, items: resp.Items, err: err}
		}()
	}
	// Results go back in batches, one job-pool.done in flight at a time
	// and never in the way of the loop: what ends while one is out goes
	// in the next. A batch goes once it holds reportBatch results, or
	// its first waited reportDelay, or nothing is left running here:
	// each batch costs the parent a KVS commit and a checkpoint, and
	// batches of one or two results (what the jobs' ends one by one gave)
	// made those commits most of the parent's work.
	var unreported, reporting []wire.PoolReport
	var reportTimer <-chan time.Time // the first unreported result's delay
	reportDue := false               // ... is over
	report := func() {
		n := min(len(unreported), wire.MaxPoolReports)
		reporting = unreported[:n:n]
		unreported = append([]wire.PoolReport(nil), unreported[n:]...)
		reportTimer, reportDue = nil, false
		req := map[string]any{"pool": o.pool, "results": reporting}
		f, err := ph.RPC("job-pool.done", 0, req, 0)
		if err != nil {
			events <- pullEvent{isReport: true, err: err}
			return
		}
		go func() { events <- pullEvent{isReport: true, err: f.Decode(ctx, nil)} }()
	}
	uid := uint32(os.Getuid())
	var payloads submitCache
	// how the jobs end: from the job manager's journal (one stream for
	// every job), or for a user not the instance owner each job's
	// eventlog
	pj, err := startPullJournal(ctx, h)
	switch {
	case errors.Is(err, errJournalRefused):
		pj = nil
	case err != nil:
		return err
	default:
		defer pj.close()
	}
	pull()
	for pullOut || inflight > 0 || reporting != nil || len(unreported) > 0 {
		var ev pullEvent
		select {
		case ev = <-events:
		case <-reportTimer:
			reportDue = true
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case ev.isPull:
			pullOut = false
			if ev.err != nil {
				if !errors.Is(ev.err, syscall.ENODATA) {
					return fmt.Errorf("pulling from pool %s: %s", o.pool, flux.ErrorText(ev.err))
				}
				closed = true
			}
			for _, it := range ev.items {
				taken++
				inflight++
				go runPulled(ctx, h, pj, &payloads, it, uid, events, o.verbose, errw)
			}
		case ev.isReport:
			if ev.err != nil {
				failed = fmt.Errorf("reporting %d pool results: %s", len(reporting), flux.ErrorText(ev.err))
				fmt.Fprintf(errw, "flux-pool: %v\n", failed)
			} else {
				reported += len(reporting)
			}
			reporting = nil
		case ev.done != nil:
			inflight--
			periodDone++
			unreported = append(unreported, wire.PoolReport{ID: ev.done.item, Result: &ev.done.result})
			if o.verbose > 0 {
				r := ev.done.result
				fmt.Fprintf(errw, "flux-pool: item %d: %s %s %s\n", ev.done.item, orDash(r.Jobid), r.Result, r.Note)
			}
		}
		adapt()
		if len(unreported) > 0 && reportTimer == nil && !reportDue {
			reportTimer = time.After(reportDelay)
		}
		if reporting == nil && len(unreported) > 0 && (reportDue || len(unreported) >= reportBatch || inflight == 0) {
			report()
		}
		// ask for more in batches: once a quarter of the window is free
		// (each pull is a request to the parent's rank 0 and an answer
		// carrying the jobspecs)
		if pullOut || window-inflight < refill && !(closed && inflight == 0) {
			continue
		}
		// room for more: ask, unless the pool said it is closed and empty
		// (then once more when everything here has ended, for the jobs
		// other children gave back meanwhile)
		if !closed || inflight == 0 && ev.done != nil {
			pull()
		}
	}
	if o.verbose > 0 {
		fmt.Fprintf(errw, "flux-pool: pool %s: ran %d jobs, reported %d\n", o.pool, taken, reported)
	}
	return failed
}

// runPulled submits one pulled jobspec here and reports how it ended,
// learnt from pj (nil: by watching the job's eventlog).
func runPulled(ctx context.Context, h *flux.Handle, pj *pullJournal, payloads *submitCache, it pulled, uid uint32, events chan<- pullEvent, verbose int, errw io.Writer) {
	d := &pullDone{item: it.ID}
	payload, err := payloads.get(it.Jobspec, uid)
	if err != nil {
		d.result = wire.PoolResult{Result: "REFUSED", Note: err.Error()}
		events <- pullEvent{done: d}
		return
	}
	if pj != nil {
		pj.submit()
	}
	f, err := h.RPC("job-ingest.submit", flux.NodeidAny, json.RawMessage(payload), 0)
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	if err == nil {
		err = f.Decode(ctx, &resp)
	}
	if err != nil {
		if pj != nil {
			pj.submitted(0, nil)
		}
		d.result = wire.PoolResult{Result: "REFUSED", Note: flux.ErrorText(err)}
		events <- pullEvent{done: d}
		return
	}
	if verbose > 1 {
		fmt.Fprintf(errw, "flux-pool: item %d: submitted as %s\n", it.ID, resp.ID.String())
	}
	ended := func(r *job.JobResult, err error) {
		d.result = pulledResult(resp.ID, r, err)
		events <- pullEvent{done: d}
	}
	if pj != nil {
		pj.submitted(resp.ID, ended)
		return
	}
	ended(job.WaitResult(ctx, h, resp.ID))
}

// submitCache makes the job-ingest.submit request of a pulled jobspec,
// keeping the last one made: a pool of identical jobs (a --bcc stream)
// parses and encodes its jobspec once.
type submitCache struct {
	mu      sync.Mutex
	raw     string
	payload []byte
}

func (c *submitCache) get(raw json.RawMessage, uid uint32) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.payload != nil && string(raw) == c.raw {
		return c.payload, nil
	}
	js, err := jobspec.Parse(raw)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("jobspec: %w", err)
	}
	req := struct {
		J       string `json:"J"`
		Urgency int    `json:"urgency"`
		Flags   int    `json:"flags"`
	}{sign.Wrap(b, uid), job.UrgencyDefault, 0}
	p, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.raw, c.payload = string(raw), p
	return p, nil
}

// pulledResult is what a pool is told of a pulled job that ran here as
// id: its result r, or err if the puller lost track of it.
func pulledResult(id jobid.ID, r *job.JobResult, err error) wire.PoolResult {
	if err != nil {
		return wire.PoolResult{Jobid: id.String(), Result: "FAILED", Note: "lost track of the job: " + flux.ErrorText(err)}
	}
	res := wire.PoolResult{Jobid: id.String(), Result: r.Result.String(), Waitstatus: r.Waitstatus}
	if r.ExceptionOccurred && *r.ExceptionSeverity == 0 {
		res.Note = r.ExceptionType
		if r.ExceptionNote != "" {
			res.Note += ": " + r.ExceptionNote
		}
	}
	return res
}

// defaultWindow is how many pulled jobs a child keeps unfinished by
// default: enough to have the next job queued here for each core when
// one ends (a window of one per core leaves every core idle for a pull
// and a submission between jobs), and not so many that one child holds
// work another could run: four per core, 8 at least, and no more than
// maxWindow (a child of 16,384 cores asked for 65,536 jobs in its first
// pull and took a 100,000-job pool's first 65,536 while the other
// children got none).
func defaultWindow(cores int) int { return min(maxWindow, max(8, 4*cores)) }

// maxWindow bounds the window flux pool pull grows to by itself.
const maxWindow = 1024

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// instanceCores is the number of cores of the instance's resources.
func instanceCores(ctx context.Context, h *flux.Handle) (int, error) {
	// an instance that just started may not have written it yet
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := kvs.WaitCreate(wctx, h, "", "resource.R")
	if err != nil {
		return 0, fmt.Errorf("resource.R: %s", flux.ErrorText(err))
	}
	R, err := rset.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("resource.R: %w", err)
	}
	if n := R.NCores(); n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("resource.R has no cores")
}
