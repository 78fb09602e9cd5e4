package jobinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// watchKey identifies a watch for eventlog-watch-cancel: the requestor's
// route and the request's matchtag.
type watchKey struct {
	route    string
	matchtag uint32
}

// watch is one job-info.eventlog-watch stream.
type watch struct {
	s    *service
	r    *flux.Request
	key  watchKey
	id   jobid.ID
	path string

	f       *flux.Future // kvs-watch of the eventlog at path
	main    *flux.Future // kvs-watch of the main eventlog (guest paths)
	partial []byte       // an incomplete last line
	sent    int          // bytes of complete lines sent
	done    bool
	// once: a guest log of an inactive job, whole as it is now (nothing
	// more is written to it): the stream ends after it
	once bool

	// guest.output completion: eof count expected / seen per stream
	outCount map[string]int
	outEOF   map[string]int
}

// handleWatch answers job-info.eventlog-watch {id, path, flags}: every
// event of the eventlog, then new ones as they are appended, one
// {"event": "<line>\n"} response each. The stream ends with ENODATA when
// the log is complete: the main eventlog after "clean", the exec eventlog
// after "done", the output eventlog once every stream reached EOF (or,
// for guest logs, when the job is inactive).
func (s *service) handleWatch(r *flux.Request) {
	var q struct {
		ID    *jobid.ID `json:"id"`
		Path  string    `json:"path"`
		Flags int       `json:"flags"`
	}
	if r.Decode(&q) != nil {
		return
	}
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "eventlog-watch request rejected without streaming RPC flag")
		return
	}
	if q.ID == nil {
		r.Errorf(syscall.EPROTO, "invalid payload: id is required")
		return
	}
	if q.Flags&^job.WatchWaitCreate != 0 {
		r.Errorf(syscall.EPROTO, "eventlog-watch request rejected with invalid flag 0x%x", q.Flags)
		return
	}
	if q.Path == "" {
		q.Path = "eventlog"
	}
	w := &watch{s: s, r: r, id: *q.ID, path: q.Path,
		key: watchKey{route: r.Msg.RouteString(), matchtag: r.Msg.Matchtag}}
	s.watches[w.key] = w
	// Read the main eventlog once: it says whether the job exists,
	// whether the requestor may see it, and whether it is still active.
	s.fetch(w.id, []string{"eventlog"}, func(vals map[string][]byte, err error) {
		if w.done {
			return
		}
		if err != nil {
			if flux.ErrnoOf(err) == syscall.ENOENT && q.Path == "eventlog" && q.Flags&job.WatchWaitCreate != 0 {
				w.start(kvsWatch|kvsWatchAppend|kvsWaitCreate, false)
				return
			}
			w.fail(err)
			return
		}
		if err := allow(r, w.id, vals["eventlog"]); err != nil {
			w.fail(err)
			return
		}
		// a guest log ends with the job; any other path (one a user
		// appended to the job's directory) is watched as the KVS key it is
		inactive := hasEvent(vals["eventlog"], "clean")
		guest := strings.HasPrefix(w.path, "guest.")
		flags := kvsWatch | kvsWatchAppend
		if guest && !inactive {
			flags |= kvsWaitCreate
		}
		if q.Flags&job.WatchWaitCreate != 0 {
			flags |= kvsWaitCreate
		}
		w.once = guest && inactive && q.Flags&job.WatchWaitCreate == 0
		w.start(flags, guest && !inactive)
	})
}

// start begins the kvs-watch of the eventlog (and for a guest log of an
// active job, of the main eventlog to notice the job's end).
func (w *watch) start(flags int, watchMain bool) {
	f, err := w.s.h.RPC("kvs-watch.lookup", flux.NodeidAny, map[string]any{
		"key": job.KVSKey(w.id, w.path), "namespace": "primary", "flags": flags}, flux.Streaming)
	if err != nil {
		w.fail(err)
		return
	}
	w.f = f
	f.Then(func(m *flux.Message, err error) {
		if w.done {
			return
		}
		if err != nil {
			w.upstreamEnded(err)
			return
		}
		data, more, err := valPiece(m)
		if err != nil {
			w.fail(err)
			return
		}
		w.feed(data)
		if w.once && !more {
			w.stop(true) // a redirected stream never says eof here
		}
	})
	if !watchMain {
		return
	}
	mf, err := w.s.h.RPC("kvs-watch.lookup", flux.NodeidAny, map[string]any{
		"key": job.KVSKey(w.id, "eventlog"), "namespace": "primary", "flags": kvsWatch | kvsWatchAppend}, flux.Streaming)
	if err != nil {
		return
	}
	w.main = mf
	mf.Then(func(m *flux.Message, err error) {
		if w.done || err != nil {
			return
		}
		if data, err := valData(m); err == nil && hasEvent(data, "clean") {
			w.jobEnded()
		}
	})
}

// jobEnded finishes a guest log watch once the job is inactive: a last
// read sends anything the watch has not delivered yet, then ENODATA. The
// log is read in kvs-watch's bounded pieces (a one-shot WAITCREATE
// WATCH_APPEND), what was delivered already skipped, never as one value
// of its size. A read that fails is an error to the reader, not an end.
func (w *watch) jobEnded() {
	// is there a log at all (a job that failed before its shells wrote
	// one has none)? its tree object says, without its content
	f, err := w.s.h.RPC("kvs.lookup", flux.NodeidAny, map[string]any{
		"key": job.KVSKey(w.id, w.path), "namespace": "primary", "flags": kvs.FlagTreeObj}, 0)
	if err != nil {
		w.fail(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		switch {
		case w.done:
		case flux.ErrnoOf(err) == syscall.ENOENT:
			w.stop(true) // no log: nothing more to send
		case err != nil:
			w.fail(fmt.Errorf("reading the rest of the log at the job's end: %w", err))
		default:
			w.readRest()
		}
	})
}

// readRest sends what of the log the watch has not delivered yet, then
// ends it.
func (w *watch) readRest() {
	f, err := w.s.h.RPC("kvs-watch.lookup", flux.NodeidAny, map[string]any{
		"key": job.KVSKey(w.id, w.path), "namespace": "primary", "flags": kvsWaitCreate | kvsWatchAppend}, flux.Streaming)
	if err != nil {
		w.fail(err)
		return
	}
	skip := w.sent + len(w.partial) // bytes of the log already taken
	f.Then(func(m *flux.Message, err error) {
		if w.done {
			return
		}
		if err != nil {
			// the log may be incomplete: the reader is told so
			w.fail(fmt.Errorf("reading the rest of the log at the job's end: %w", err))
			return
		}
		data, more, err := valPiece(m)
		if err != nil {
			w.fail(err)
			return
		}
		cut := min(skip, len(data))
		skip -= cut
		if len(data) > cut {
			w.feed(data[cut:])
		}
		if !more && !w.done {
			w.stop(true)
		}
	})
}

func (w *watch) upstreamEnded(err error) {
	switch flux.ErrnoOf(err) {
	case syscall.ENODATA:
		w.stop(true)
	case syscall.ENOENT:
		if w.path == "eventlog" {
			w.fail(flux.NewError(syscall.ENOENT, fmt.Sprintf("job %s not found", w.id.String())))
		} else {
			w.fail(flux.NewError(syscall.ENOENT, fmt.Sprintf("job %s: eventlog path %s not found", w.id.String(), w.path)))
		}
	default:
		w.fail(err)
	}
}

// feed splits appended data into lines, sends complete ones, and ends
// the stream when the log is complete.
func (w *watch) feed(data []byte) {
	buf := append(w.partial, data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		line := buf[:i+1]
		buf = buf[i+1:]
		w.sent += len(line)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		sb, _ := marshalString(line)
		w.r.Respond(json.RawMessage(append(append([]byte(`{"event":`), sb...), '}')))
		if w.complete(line) {
			w.stop(true)
			return
		}
	}
	w.partial = append([]byte(nil), buf...)
}

// complete reports whether line is the last event of the log.
func (w *watch) complete(line []byte) bool {
	var ev struct {
		Name    string `json:"name"`
		Context struct {
			Stream string         `json:"stream"`
			EOF    bool           `json:"eof"`
			Count  map[string]int `json:"count"`
		} `json:"context"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	switch w.path {
	case "eventlog":
		return ev.Name == "clean"
	case "guest.exec.eventlog":
		return ev.Name == "done"
	case "guest.output":
		switch {
		case ev.Name == "header":
			w.outCount = ev.Context.Count
			w.outEOF = map[string]int{}
		case ev.Name == "data" && ev.Context.EOF && w.outEOF != nil:
			w.outEOF[ev.Context.Stream]++
			for stream, n := range w.outCount {
				if w.outEOF[stream] < n {
					return false
				}
			}
			return true
		}
	}
	return false
}

func (w *watch) fail(err error) {
	if w.done {
		return
	}
	w.r.RespondError(err)
	w.stop(false)
}

// stop ends the watch: the upstream watches are canceled and, if end is
// set, the client gets ENODATA.
func (w *watch) stop(end bool) {
	if w.done {
		return
	}
	w.done = true
	w.cancelUpstream()
	delete(w.s.watches, w.key)
	if end {
		w.r.EndStream()
	}
}

// cancelUpstream cancels the kvs-watch streams. Their futures stay
// registered until kvs-watch ends them, so a matchtag is never reused
// while a response may still arrive.
func (w *watch) cancelUpstream() {
	for _, f := range []*flux.Future{w.f, w.main} {
		if f == nil {
			continue
		}
		if cf, err := w.s.h.RPC("kvs-watch.cancel", flux.NodeidAny,
			map[string]any{"matchtag": f.Matchtag()}, flux.NoResponse); err == nil {
			cf.Close()
		}
	}
}

// handleWatchCancel answers job-info.eventlog-watch-cancel {matchtag}
// (no response): the matching watch of the same client ends with ENODATA.
func (s *service) handleWatchCancel(r *flux.Request) {
	var q struct {
		Matchtag uint32 `json:"matchtag"`
	}
	if r.Decode(&q) != nil {
		return
	}
	if w, ok := s.watches[watchKey{route: r.Msg.RouteString(), matchtag: q.Matchtag}]; ok {
		w.stop(true)
	}
}

// hasEvent reports whether eventlog text (whole lines) holds an event
// called name.
func hasEvent(data []byte, name string) bool {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		var ev struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.Name == name {
			return true
		}
	}
	return false
}
