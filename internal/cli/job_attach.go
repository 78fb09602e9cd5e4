package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// attachOptions control how a job's I/O is followed.
type attachOptions struct {
	labelIO    bool
	quiet      bool
	verbose    bool
	showEvents bool
	showExec   bool
	readOnly   bool
	stdinRanks string
	showStatus bool
	waitEvent  string
	tail       bool // show only the last tailLines of the output written before attach
	tailLines  int
	unbuffered bool
	queueCheck int // seconds between queue checks of the status line
}

func newJobAttachCmd() *cobra.Command {
	var o attachOptions
	cmd := &cobra.Command{
		Use:   "attach [OPTIONS] ID",
		Short: "Attach to a job: copy its output and input, exit with its status",
		Args:  cobra.ExactArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			id, err := jobid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("invalid jobid %q", args[0])
			}
			o.tail = cmd.Flags().Changed("tail")
			if o.tail && o.tailLines < 0 {
				return fmt.Errorf("invalid tail argument: %d (NUM is 0 or more)", o.tailLines)
			}
			if o.queueCheck <= 0 {
				return fmt.Errorf("--queue-check-interval=%d: must be 1 or more", o.queueCheck)
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			code, err := attachJob(h, id, o, os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.labelIO, "label-io", "l", false, "prefix output lines with the task rank")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "suppress warnings")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print job events as they happen")
	f.BoolVarP(&o.showEvents, "show-events", "E", false, "show job events on stderr")
	f.BoolVarP(&o.showExec, "show-exec", "X", false, "show exec events on stderr")
	f.BoolVarP(&o.readOnly, "read-only", "r", false, "do not forward stdin")
	f.StringVarP(&o.stdinRanks, "stdin-ranks", "i", "all", "send stdin only to these task `RANKS`")
	f.BoolVar(&o.showStatus, "show-status", false, "Show job status line while pending")
	f.StringVarP(&o.waitEvent, "wait-event", "w", "clean", "Wait for event `NAME` before detaching from eventlog")
	f.IntVar(&o.tailLines, "tail", 10, "Output only the last `NUM` lines of job output")
	f.Lookup("tail").NoOptDefVal = "10"
	f.BoolVarP(&o.unbuffered, "unbuffered", "u", false, "Disable buffering of stdin (attach sends what it reads at once either way)")
	f.IntVar(&o.queueCheck, "queue-check-interval", 60, "Set interval to check queue state for testing (`SECONDS`)")
	f.MarkHidden("queue-check-interval")
	return cmd
}

// attacher follows one job's eventlogs.
type attacher struct {
	h       *flux.Handle
	id      jobid.ID
	o       attachOptions
	stdin   io.Reader
	out     io.Writer
	errw    io.Writer
	mu      sync.Mutex
	outcome jobOutcome
	t0      float64
	partial map[string][]byte // unterminated output per stream/rank when labeling
	// progress counts the events of the exec and output logs taken, so
	// the end of an attach waits as long as they keep coming
	progress atomic.Int64
	writing  atomic.Bool   // copying an event out (a slow reader is no stall)
	status   *attachStatus // nil without a status line
	// runT0: the first exec event's timestamp (float64 bits) of the run
	// followed (job_attach_requeue.go)
	runT0 atomic.Uint64
	// writeMu: the output watches of two runs of a requeued job may
	// overlap for a moment (write, partial)
	writeMu sync.Mutex
}

// attachStall is how long the logs of an inactive job may bring nothing
// new before attach stops waiting for the rest and says so: long, since
// job-info reads a finished job's output in one KVS lookup, which a
// loaded machine may take many seconds to deliver for a large one.
const attachStall = 60 * time.Second

// attachJob copies a job's output to out/errw (and stdin to it) until the
// job is done, and returns the exit code flux-core's attach would.
func attachJob(h *flux.Handle, id jobid.ID, o attachOptions, stdin io.Reader, out, errw io.Writer) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &attacher{h: h, id: id, o: o, stdin: stdin, out: out, errw: errw, outcome: jobOutcome{status: -1}, partial: map[string][]byte{}}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sigintHandled.Store(true)
	defer sigintHandled.Store(false)
	go a.interrupts(ctx, sigs)
	if show, delay := attachStatusMode(o, stdin, out, errw); show {
		a.status = &attachStatus{h: h, id: id, w: errw, interval: o.queueCheck, stop: make(chan struct{})}
		go a.status.run(ctx, delay)
	}

	// The exec and output eventlogs are watched from the start, beside
	// the main one (job-info waits for them to appear while the job is
	// active and ends the watches when it is done): nothing waits for
	// one log's event to begin watching the next.
	fw := a.startFollows(ctx, o.tail)
	err := watchEventlogPath(ctx, h, id, "eventlog", func(ev eventlog.Event) bool {
		a.mu.Lock()
		if a.t0 == 0 {
			a.t0 = ev.Timestamp
		}
		a.mu.Unlock()
		if (o.showEvents || o.verbose) && ev.Name != "exception" {
			fmt.Fprintf(errw, "%.3fs: job.%s %s\n", ev.Timestamp-a.t0, ev.Name, ev.Context)
		}
		switch ev.Name {
		case "exception":
			c, _ := job.ExceptionOf(ev)
			if c.Fatal() && a.outcome.exception == "" {
				a.outcome.exception, a.outcome.note = c.Type, c.Note
			}
			if a.status != nil {
				a.status.exception(c.Fatal())
			}
			if !o.quiet {
				note := ""
				if c.Note != "" {
					note = " " + c.Note
				}
				fmt.Fprintf(errw, "%.3fs: job.exception %s type=%s severity=%d%s\n", ev.Timestamp-a.t0, id.String(), c.Type, c.Severity, note)
			}
		case "requeue":
			fw = a.requeued(ctx, fw, ev.Timestamp) // job_attach_requeue.go
		case "finish":
			var c struct {
				Status int `json:"status"`
			}
			json.Unmarshal(ev.Context, &c)
			a.mu.Lock()
			a.outcome.status = c.Status
			a.mu.Unlock()
		}
		if a.status != nil {
			a.status.event(ctx, ev)
		}
		return ev.Name == o.waitEvent || ev.Name == "clean"
	})
	if err != nil {
		return 1, err
	}
	// The job is inactive: its logs are complete or about to be. Their
	// rest (a large output takes a while through a slow reader) is
	// waited for while it comes; an error or a stall is reported, with a
	// non-zero exit: the output printed is then not all there is.
	incomplete := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for _, c := range []struct {
		what string
		done chan error
	}{{"exec eventlog", fw.exec}, {"output", fw.out}} {
		last, seen := a.progress.Load(), time.Now()
	wait:
		for {
			select {
			case err := <-c.done:
				if err != nil {
					fmt.Fprintf(errw, "flux-job: %v: the job's %s is incomplete\n", err, c.what)
					incomplete = true
				}
				break wait
			case <-tick.C:
				if n := a.progress.Load(); n != last || a.writing.Load() {
					last, seen = n, time.Now()
				} else if time.Since(seen) > attachStall {
					fmt.Fprintf(errw, "flux-job: job %s: nothing more of its %s arrived in %v: it is incomplete\n", id.String(), c.what, attachStall)
					incomplete = true
					break wait
				}
			}
		}
	}
	a.flushPartial()
	code := a.outcome.exitCode()
	if incomplete && code == 0 {
		code = 1
	}
	if a.outcome.status > 0 && !o.quiet {
		// "task(s) Terminated" for tasks killed by a signal, as flux-core
		if _, text := job.ExitCode(a.outcome.status); text != "" {
			fmt.Fprintf(errw, "flux-job: %s\n", text)
		}
	}
	return code, nil
}

// start is the timestamp of the job's first event (0 until known).
// awaitReply waits (up to 10 s) for the answer of a request sent as f
// and returns its error.
func awaitReply(f *flux.Future, err error) error {
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.Decode(ctx, nil)
}

func (a *attacher) start() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.t0
}

// followExec watches the exec eventlog; at shell.init it starts
// forwarding stdin to the job's shell service.
func (a *attacher) followExec(ctx context.Context) error {
	err := watchEventlogPath(ctx, a.h, a.id, "guest.exec.eventlog", func(ev eventlog.Event) bool {
		a.progress.Add(1)
		a.runStarted(ev.Timestamp)
		if a.o.showExec {
			fmt.Fprintf(a.errw, "%.3fs: exec.%s %s\n", ev.Timestamp-a.start(), ev.Name, ev.Context)
		}
		switch ev.Name {
		case "shell.init":
			var c struct {
				Service    string `json:"service"`
				LeaderRank uint32 `json:"leader-rank"`
			}
			json.Unmarshal(ev.Context, &c)
			if c.Service != "" && !a.o.readOnly {
				go a.forwardStdin(ctx, c.Service, c.LeaderRank)
			}
		case "done":
			return true
		}
		return false
	})
	if errors.Is(err, syscall.ENOENT) {
		return nil // the job never ran
	}
	return err
}

// followOutput copies the output eventlog to our stdout/stderr (with
// --tail, only the last lines of what was written before attach).
func (a *attacher) followOutput(ctx context.Context, withTail bool) error {
	var tail *outputTail
	if withTail {
		n, err := outputEntries(ctx, a.h, a.id)
		if err != nil {
			return err
		}
		tail = &outputTail{keep: a.o.tailLines, before: n}
	}
	err := watchEventlogPath(ctx, a.h, a.id, "guest.output", func(ev eventlog.Event) bool {
		a.progress.Add(1)
		a.writing.Store(true)
		defer a.writing.Store(false)
		if tail != nil && tail.seen < tail.before {
			tail.seen++
			if ev.Name == "data" {
				if o, err := job.DecodeOutput(ev.Context); err == nil {
					if data, err := o.Bytes(); err == nil {
						tail.add(o.Stream, o.Rank, string(data))
					}
				}
			}
			if tail.seen == tail.before {
				for _, l := range tail.lines {
					w := a.out
					if l.stream == "stderr" {
						w = a.errw
					}
					a.write(w, l.stream, l.rank, l.text)
				}
			}
			return false
		}
		if ev.Name != "data" {
			return false
		}
		o, err := job.DecodeOutput(ev.Context)
		var data []byte
		if err == nil {
			data, err = o.Bytes()
		}
		if err != nil {
			// said, not dropped: the reader knows the output has a hole
			fmt.Fprintf(a.errw, "flux-job: %s: output of rank %s: %v\n", a.id.String(), o.Rank, err)
			return false
		}
		if len(data) == 0 {
			return false
		}
		w := a.out
		if o.Stream == "stderr" {
			w = a.errw
		}
		a.write(w, o.Stream, o.Rank, string(data))
		return false
	})
	if errors.Is(err, syscall.ENOENT) {
		return nil // the job never ran
	}
	return err
}

// write prints output, with "RANK: " before each line when labeling.
func (a *attacher) write(w io.Writer, stream, rank, data string) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if !a.o.labelIO {
		io.WriteString(w, data)
		return
	}
	key := stream + ":" + rank
	buf := append(a.partial[key], data...)
	for {
		i := strings.IndexByte(string(buf), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(w, "%s: %s", rank, buf[:i+1])
		buf = buf[i+1:]
	}
	a.partial[key] = buf
}

func (a *attacher) flushPartial() {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	for key, buf := range a.partial {
		if len(buf) == 0 {
			continue
		}
		stream, rank, _ := strings.Cut(key, ":")
		w := a.out
		if stream == "stderr" {
			w = a.errw
		}
		fmt.Fprintf(w, "%s: %s\n", rank, buf)
	}
}

// forwardStdin sends our stdin to the job's shell service.
func (a *attacher) forwardStdin(ctx context.Context, service string, leader uint32) {
	topic := service + ".stdin"
	send := func(ranks string, data []byte, eof bool) error {
		req := map[string]any{"stream": "stdin", "rank": ranks}
		switch {
		case len(data) == 0:
		case utf8.Valid(data):
			req["data"] = string(data)
		default:
			req["data"] = base64.StdEncoding.EncodeToString(data)
			req["encoding"] = "base64"
		}
		if eof {
			req["eof"] = true
		}
		return a.h.Call(ctx, topic, leader, req, nil)
	}
	end := func() {
		send(a.o.stdinRanks, nil, true)
		if a.o.stdinRanks != "all" {
			send("all", nil, true) // the other tasks' stdin ends too
		}
	}
	if a.stdin == nil {
		end()
		return
	}
	r := bufio.NewReaderSize(a.stdin, 32*1024)
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if send(a.o.stdinRanks, buf[:n], false) != nil {
				return
			}
		}
		if err != nil {
			end()
			return
		}
	}
}

// interrupts implements flux-core's Ctrl-C handling: the first SIGINT
// signals the job, a second within 2 s cancels it.
func (a *attacher) interrupts(ctx context.Context, sigs <-chan os.Signal) {
	var last time.Time
	terms := 0
	for {
		var sig os.Signal
		select {
		case <-ctx.Done():
			return
		case sig = <-sigs:
		}
		if sig == syscall.SIGTERM {
			// As srun does: the first SIGTERM goes to the job's tasks and
			// attach goes on (their output and exit status still come);
			// the second cancels the job; the third ends attach at once
			// (the job is cancelled by then).
			terms++
			switch terms {
			case 1:
				fmt.Fprintf(a.errw, "flux-job: forwarding SIGTERM to %s\n", a.id.String())
				awaitReply(job.Kill(a.h, a.id, int(syscall.SIGTERM))) // the eventlog says what came of it
			case 2:
				fmt.Fprintf(a.errw, "flux-job: Canceling %s\n", a.id.String())
				awaitReply(job.Raise(a.h, a.id, "cancel", 0, "flux job attach terminated")) // the eventlog says what came of it
			default:
				os.Exit(128 + int(syscall.SIGTERM))
			}
			continue
		}
		if time.Since(last) < 2*time.Second {
			fmt.Fprintf(a.errw, "\nflux-job: Canceling %s\n", a.id.String())
			awaitReply(job.Raise(a.h, a.id, "cancel", 0, "interrupted by user")) // the eventlog says what came of it
			continue
		}
		last = time.Now()
		fmt.Fprintf(a.errw, "\nflux-job: one more ctrl-C within 2s to cancel or ctrl-Z to detach\n")
		awaitReply(job.Kill(a.h, a.id, int(syscall.SIGINT))) // the eventlog says what came of it
	}
}

// watchEventlogPath streams one of a job's eventlogs (path relative to
// the job directory) until fn returns true or the log ends.
func watchEventlogPath(ctx context.Context, h *flux.Handle, id jobid.ID, path string, fn func(eventlog.Event) bool) error {
	f, err := h.RPC("job-info.eventlog-watch", flux.NodeidAny, map[string]any{"id": id, "path": path, "flags": 0}, flux.Streaming)
	if err != nil {
		return err
	}
	cancelWatch := func() {
		h.RPC("job-info.eventlog-watch-cancel", flux.NodeidAny, map[string]any{"matchtag": f.Matchtag()}, flux.NoResponse)
	}
	for {
		m, err := f.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				cancelWatch()
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		var resp struct {
			Event string `json:"event"`
		}
		if err := m.UnmarshalPayload(&resp); err != nil {
			return err
		}
		ev, err := eventlog.ParseEvent([]byte(resp.Event))
		if err != nil {
			return fmt.Errorf("job %s %s: %w", id.String(), path, err)
		}
		if fn(ev) {
			cancelWatch()
			return nil
		}
	}
}
