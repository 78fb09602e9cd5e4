package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// attachStatus is flux job attach's status line: while a job is pending
// it shows on stderr what the job waits for and for how long, redrawn
// every second ("flux-job: ƒ2Ab resolving dependencies   00:00:03"),
// noting a stopped queue, until the job starts or ends.
type attachStatus struct {
	h        *flux.Handle
	id       jobid.ID
	w        io.Writer
	interval int // seconds between queue checks (--queue-check-interval)

	mu       sync.Mutex
	shown    bool    // drawing
	done     bool    // the job started or ended: no more drawing
	fatal    bool    // a fatal exception: the line stays as it is
	msg      string  // the state, without decorations
	prologs  int     // prologs running
	t0       float64 // the job's first event
	queue    string  // the job's queue, once known ("default" for none)
	asked    bool    // the queue was asked for
	stopped  bool    // the job's queue is stopped
	lastPoll int     // seconds into the job of the last queue check
	stop     chan struct{}
}

// attachStatusMode says whether attach shows a status line and after how
// long: at once with --show-status, after 2 s when attach runs on a
// terminal (stdin, stdout and stderr) without --show-events, never when
// FLUX_ATTACH_NONINTERACTIVE is set.
func attachStatusMode(o attachOptions, stdin, out, errw any) (show bool, delay time.Duration) {
	if os.Getenv("FLUX_ATTACH_NONINTERACTIVE") != "" {
		return false, 0
	}
	if o.showStatus {
		return true, 0
	}
	if !o.showEvents && isTerminal(stdin) && isTerminal(out) && isTerminal(errw) {
		return true, 2 * time.Second
	}
	return false, 0
}

// run redraws the line every second from delay on, until the job
// starts or ends.
func (s *attachStatus) run(ctx context.Context, delay time.Duration) {
	select {
	case <-time.After(delay):
	case <-s.stop:
		return
	case <-ctx.Done():
		return
	}
	s.mu.Lock()
	if !s.done {
		s.shown = true
		s.draw(ctx, float64(time.Now().UnixNano())/1e9)
	}
	s.mu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.mu.Lock()
			s.draw(ctx, float64(time.Now().UnixNano())/1e9)
			s.mu.Unlock()
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// baseMessage is the state a job event puts the job in, "" for an event
// that changes nothing.
func (s *attachStatus) baseMessage(ev eventlog.Event) string {
	switch ev.Name {
	case "submit":
		return "submitted"
	case "validate":
		return "resolving dependencies"
	case "depend":
		return "waiting for priority assignment"
	case "priority":
		return "waiting for resources"
	case "alloc":
		return "starting"
	case "prolog-start":
		s.prologs++
		return "waiting for prolog"
	case "prolog-finish":
		if s.prologs--; s.prologs > 0 {
			return "waiting for prolog"
		}
		return "starting"
	case "exception":
		if c, err := job.ExceptionOf(ev); err == nil && c.Fatal() {
			return "canceling due to exception"
		}
	case "start":
		return "started"
	case "jobspec-update":
		// the queue may have changed: ask again
		s.queue, s.asked, s.stopped = "", false, false
	}
	return ""
}

// event takes a job event; the line is drawn with it when shown.
func (s *attachStatus) event(ctx context.Context, ev eventlog.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t0 == 0 {
		s.t0 = ev.Timestamp
	}
	if !s.fatal && !s.done {
		if m := s.baseMessage(ev); m != "" {
			s.msg = m
		}
		s.draw(ctx, ev.Timestamp)
	}
	if ev.Name == "start" || ev.Name == "clean" {
		if s.shown {
			fmt.Fprint(s.w, "\n")
			s.shown = false
		}
		if !s.done {
			s.done = true
			close(s.stop)
		}
	}
}

// exception is called before attach prints an exception: the line is
// cleared first; after a fatal one it is not drawn again.
func (s *attachStatus) exception(fatal bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shown {
		fmt.Fprint(s.w, "\r\033[K")
	}
	if fatal {
		s.fatal = true
	}
}

// draw shows the line at time now (s.mu held), checking the queue when
// the job waits for resources.
func (s *attachStatus) draw(ctx context.Context, now float64) {
	if s.msg == "" || s.t0 == 0 {
		return
	}
	dt := int(now - s.t0)
	if dt < 0 {
		dt = 0
	}
	waiting := strings.HasPrefix(s.msg, "waiting for resources")
	if waiting {
		switch {
		case !s.asked:
			s.asked = true
			go s.fetchQueue(ctx)
		case s.queue != "" && (s.lastPoll <= 0 || dt-s.lastPoll >= s.interval):
			s.lastPoll = dt
			go s.fetchQueueStatus(ctx, s.queue)
		}
	}
	if !s.shown {
		return
	}
	msg := s.msg
	if waiting && s.stopped && s.queue != "" {
		msg = fmt.Sprintf("%s (%s queue stopped)", msg, s.queue)
	}
	width := 80
	if cols, _, ok := terminalSize(s.w); ok {
		width = cols
	}
	width -= 10 + len(s.id.String()) + 10
	if width < 0 {
		width = 0
	}
	fmt.Fprintf(s.w, "\rflux-job: %s %-*s %02d:%02d:%02d\r", s.id.String(), width, msg, dt/3600, (dt/60)%60, dt%60)
}

// fetchQueue learns the job's queue from job-list.
func (s *attachStatus) fetchQueue(ctx context.Context) {
	var resp struct {
		Job struct {
			Queue string `json:"queue"`
		} `json:"job"`
	}
	err := s.h.Call(ctx, "job-list.list-id", flux.NodeidAny, map[string]any{"id": s.id, "attrs": []string{"queue"}}, &resp)
	if err != nil {
		return
	}
	q := resp.Job.Queue
	if q == "" {
		q = "default"
	}
	s.mu.Lock()
	s.queue = q
	s.mu.Unlock()
	s.fetchQueueStatus(ctx, q)
}

// fetchQueueStatus learns whether queue is stopped.
func (s *attachStatus) fetchQueueStatus(ctx context.Context, queue string) {
	name := queue
	if name == "default" {
		name = ""
	}
	var st job.QueueStatus
	if err := s.h.Call(ctx, "job-manager.queue-status", flux.NodeidAny, job.QueueStatusRequest{Name: name}, &st); err != nil {
		return
	}
	s.mu.Lock()
	if s.queue == queue {
		s.stopped = !st.Start
	}
	s.mu.Unlock()
}

// outputTail keeps the last lines of the output a job wrote before
// attach (flux job attach --tail).
type outputTail struct {
	keep   int // lines to show
	before int // entries of the output eventlog when attach began
	seen   int // of those, taken
	lines  []tailLine
}

type tailLine struct{ stream, rank, text string }

// add takes the data of one output entry, line by line; an unterminated
// line continues the stream's last one.
func (t *outputTail) add(stream, rank, data string) {
	for data != "" {
		line, rest, nl := strings.Cut(data, "\n")
		if nl {
			line += "\n"
		}
		data = rest
		if n := len(t.lines); n > 0 {
			last := &t.lines[n-1]
			if last.stream == stream && last.rank == rank && !strings.HasSuffix(last.text, "\n") {
				last.text += line
				continue
			}
		}
		t.lines = append(t.lines, tailLine{stream, rank, line})
		if len(t.lines) > t.keep {
			t.lines = t.lines[len(t.lines)-t.keep:]
		}
	}
}

// outputEntries counts the entries of a job's output eventlog now (0
// when it has none yet).
func outputEntries(ctx context.Context, h *flux.Handle, id jobid.ID) (int, error) {
	var resp map[string]any
	err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"guest.output"}, "flags": 0}, &resp)
	if flux.ErrnoOf(err) == syscall.ENOENT {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("guest.output: %w", err)
	}
	log, _ := resp["guest.output"].(string)
	return strings.Count(log, "\n"), nil
}
