package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// job-info.lookup flags (flux-core's FLUX_JOB_LOOKUP_* values).
const (
	// LookupJSONDecode returns jobspec and R as JSON objects instead of
	// strings.
	LookupJSONDecode = 0x1
	// LookupCurrent applies the updates posted to the eventlog
	// (jobspec-update, resource-update) to jobspec and R.
	LookupCurrent = 0x2
)

// WatchWaitCreate makes an eventlog watch wait for the eventlog to be
// created instead of failing with ENOENT (FLUX_JOB_EVENT_WATCH_WAITCREATE).
const WatchWaitCreate = 0x1

// Lookup reads keys of a job's KVS directory through job-info.lookup.
// Values are JSON strings, or for jobspec and R with LookupJSONDecode,
// objects. Only the job's owner and the instance owner may read them.
func Lookup(ctx context.Context, h *flux.Handle, id jobid.ID, keys []string, flags int) (map[string]json.RawMessage, error) {
	req := map[string]any{"id": id, "keys": keys, "flags": flags}
	var resp map[string]json.RawMessage
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, req, &resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// LookupString reads one key of a job as a string (for example
// "eventlog", "jobspec", "R" or "guest.exec.eventlog").
func LookupString(ctx context.Context, h *flux.Handle, id jobid.ID, key string, flags int) (string, error) {
	vals, err := Lookup(ctx, h, id, []string{key}, flags&^LookupJSONDecode)
	if err != nil {
		return "", err
	}
	raw, ok := vals[key]
	if !ok {
		return "", fmt.Errorf("%w: job-info.lookup response has no %q", ErrInvalid, key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: job-info.lookup %q is not a string", ErrInvalid, key)
	}
	return s, nil
}

// EventlogPath expands the short eventlog names flux job commands accept:
// "exec" (guest.exec.eventlog), "output" (guest.output) and "input"
// (guest.input). Other names are returned unchanged.
func EventlogPath(name string) string {
	switch name {
	case "exec":
		return "guest.exec.eventlog"
	case "output":
		return "guest.output"
	case "input":
		return "guest.input"
	}
	return name
}

// EventWatch is a job-info.eventlog-watch stream.
type EventWatch struct {
	h        *flux.Handle
	f        *flux.Future
	canceled bool
}

// WatchEventlog starts watching a job's eventlog at path ("eventlog",
// "guest.exec.eventlog", "guest.output" ...): past events first, then new
// ones as they are appended. The stream ends (io.EOF) when the eventlog
// is complete or after Cancel.
func WatchEventlog(h *flux.Handle, id jobid.ID, path string, flags int) (*EventWatch, error) {
	req := map[string]any{"id": id, "path": path, "flags": flags}
	f, err := h.RPC("job-info.eventlog-watch", flux.NodeidAny, req, flux.Streaming)
	if err != nil {
		return nil, err
	}
	return &EventWatch{h: h, f: f}, nil
}

// Next returns the next event, or io.EOF at the end of the stream.
func (w *EventWatch) Next(ctx context.Context) (eventlog.Event, error) {
	m, err := w.f.Next(ctx)
	if err != nil {
		return eventlog.Event{}, err
	}
	var resp struct {
		Event string `json:"event"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		return eventlog.Event{}, fmt.Errorf("%w: eventlog-watch response: %v", ErrInvalid, err)
	}
	return eventlog.ParseEvent([]byte(resp.Event))
}

// NextRaw is Next returning the event line as sent (with its newline).
func (w *EventWatch) NextRaw(ctx context.Context) (string, error) {
	m, err := w.f.Next(ctx)
	if err != nil {
		return "", err
	}
	var resp struct {
		Event string `json:"event"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		return "", fmt.Errorf("%w: eventlog-watch response: %v", ErrInvalid, err)
	}
	return resp.Event, nil
}

// Cancel asks job-info to end the stream; Next then returns the events
// already sent and io.EOF.
func (w *EventWatch) Cancel() error {
	if w.canceled {
		return nil
	}
	w.canceled = true
	f, err := w.h.RPC("job-info.eventlog-watch-cancel", flux.NodeidAny,
		map[string]any{"matchtag": w.f.Matchtag()}, flux.NoResponse)
	if err != nil {
		return err
	}
	f.Close()
	return nil
}

// Close cancels the watch and drains it (bounded by ctx).
func (w *EventWatch) Close(ctx context.Context) {
	if err := w.Cancel(); err != nil {
		w.f.Close()
		return
	}
	for {
		if _, err := w.f.Next(ctx); err != nil {
			return
		}
	}
}

// ErrEventNotFound is returned by WaitEvent when the eventlog ended
// without the event.
var ErrEventNotFound = errors.New("event never received")

// WaitEvent watches a job's eventlog until match accepts an event and
// returns it. It fails with ErrEventNotFound if the eventlog ends first,
// or with ctx's error on timeout.
func WaitEvent(ctx context.Context, h *flux.Handle, id jobid.ID, path string, flags int, match func(eventlog.Event) bool) (eventlog.Event, error) {
	w, err := WatchEventlog(h, id, path, flags)
	if err != nil {
		return eventlog.Event{}, err
	}
	for {
		ev, err := w.Next(ctx)
		if err == io.EOF {
			return eventlog.Event{}, ErrEventNotFound
		}
		if err != nil {
			if ctx.Err() == nil {
				return eventlog.Event{}, err
			}
			w.Cancel()
			return eventlog.Event{}, err
		}
		if match(ev) {
			dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			w.Close(dctx)
			cancel()
			return ev, nil
		}
	}
}

// EventNamed returns a WaitEvent matcher for events called name.
func EventNamed(name string) func(eventlog.Event) bool {
	return func(e eventlog.Event) bool { return e.Name == name }
}

// JobResult summarizes how a job ended, as flux-core's flux_job_result()
// reports it (the JSON keys are the same).
type JobResult struct {
	ID                jobid.ID `json:"id"`
	Result            Result   `json:"result"`
	TSubmit           float64  `json:"t_submit"`
	TRun              float64  `json:"t_run,omitempty"`
	TCleanup          float64  `json:"t_cleanup,omitempty"`
	Waitstatus        *int     `json:"waitstatus,omitempty"`
	ExceptionOccurred bool     `json:"exception_occurred"`
	ExceptionSeverity *int     `json:"exception_severity,omitempty"`
	ExceptionType     string   `json:"exception_type,omitempty"`
	ExceptionNote     string   `json:"exception_note,omitempty"`
}

// Accumulate applies one main eventlog event to r. It reports true once
// the job is inactive ("clean").
func (r *JobResult) Accumulate(ev eventlog.Event) bool {
	switch ev.Name {
	case "submit":
		r.TSubmit = ev.Timestamp
	case "alloc":
		if r.TRun == 0 {
			r.TRun = ev.Timestamp
		}
	case "finish":
		var c struct {
			Status int `json:"status"`
		}
		if ev.DecodeContext(&c) == nil {
			st := c.Status
			r.Waitstatus = &st
		}
		if r.TCleanup == 0 {
			r.TCleanup = ev.Timestamp
		}
	case "exception":
		c, err := ExceptionOf(ev)
		if err != nil {
			break
		}
		if !r.ExceptionOccurred || c.Severity < *r.ExceptionSeverity {
			r.ExceptionOccurred = true
			sev := c.Severity
			r.ExceptionSeverity = &sev
			r.ExceptionType = c.Type
			r.ExceptionNote = c.Note
		}
		if c.Severity == 0 && r.TCleanup == 0 {
			r.TCleanup = ev.Timestamp
		}
	case "clean":
		r.Result = r.result()
		return true
	}
	return false
}

func (r *JobResult) result() Result {
	if r.Waitstatus != nil && *r.Waitstatus == 0 && !(r.ExceptionOccurred && *r.ExceptionSeverity == 0) {
		return ResultCompleted
	}
	if r.ExceptionOccurred && *r.ExceptionSeverity == 0 {
		switch r.ExceptionType {
		case "cancel":
			return ResultCanceled
		case "timeout":
			return ResultTimeout
		}
	}
	return ResultFailed
}

// ExitCode returns the job's exit code as flux job status computes it:
// the shell-style code of its wait status (128+signal if signaled), or
// exceptionCode if a fatal exception ended it and that is larger.
func (r *JobResult) ExitCode(exceptionCode int) int {
	code := 0
	if r.Waitstatus != nil {
		code = WaitstatusToExitCode(*r.Waitstatus)
	}
	if r.ExceptionOccurred && *r.ExceptionSeverity == 0 && exceptionCode > code {
		code = exceptionCode
	}
	return code
}

// WaitstatusToExitCode converts a wait(2) status to a shell exit code.
func WaitstatusToExitCode(status int) int {
	if status < 0 {
		return 0
	}
	ws := syscall.WaitStatus(status)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// WaitResult watches a job's eventlog until the job is inactive and
// returns its result.
func WaitResult(ctx context.Context, h *flux.Handle, id jobid.ID) (*JobResult, error) {
	w, err := WatchEventlog(h, id, "eventlog", 0)
	if err != nil {
		return nil, err
	}
	r := &JobResult{ID: id}
	for {
		ev, err := w.Next(ctx)
		if err == io.EOF {
			return nil, fmt.Errorf("job %s: eventlog ended before the job was inactive: %w", id, ErrEventNotFound)
		}
		if err != nil {
			if ctx.Err() != nil {
				w.Cancel()
			}
			return nil, err
		}
		if r.Accumulate(ev) {
			dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			w.Close(dctx)
			cancel()
			return r, nil
		}
	}
}
