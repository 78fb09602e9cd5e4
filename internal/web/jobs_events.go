package web

import (
	"bytes"
	"fmt"
	"net/http"
	"time"
)

const (
	// jobsStreamInterval is the shortest time between two writes of a
	// jobs stream: the changes of a burst are gathered (a job that
	// changed three times is sent once), so a browser watching a busy
	// instance parses one message a second, as often as the jobs page
	// redraws, not one per event.
	jobsStreamInterval = time.Second
	// jobsPerMessage bounds one "jobs" message's records.
	jobsPerMessage = 1000
	// streamKeepalive is how often an idle stream sends a comment, so
	// proxies and browsers keep it open.
	streamKeepalive = 25 * time.Second
)

// jobsEvents is GET /v1/jobs/events: the changes of every job the
// caller may see, as server-sent events. First "ready" (every change
// from then on will come: list the jobs now), then "jobs" messages,
// each a JSON array of job records (RFC 43 attributes, as GET /v1/jobs
// lists them: the job's whole known state, newer replacing older),
// "reset" if the caller fell too far behind (reload the list), and
// "error" before the server ends the stream.
func (s *Server) jobsEvents(w http.ResponseWriter, r *http.Request, as Caller) {
	if s.hub == nil {
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this instance cannot stream job changes"})
		return
	}
	if s.o.Self != s.o.Owner {
		writeJSON(w, http.StatusServiceUnavailable, reply{Message: "the job manager's journal is only for the instance owner: run flux web as the owner to stream job changes"})
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, reply{Message: "the connection cannot stream"})
		return
	}
	if !s.streams.acquire(as.Userid) {
		writeJSON(w, http.StatusTooManyRequests, reply{Message: fmt.Sprintf("at most %d event streams per user are open at once", maxStreamsPerUser)})
		return
	}
	defer s.streams.release(as.Userid)
	ctx, cancel := s.streamContext(r)
	defer cancel()
	wt := s.hub.add(as)
	defer s.hub.remove(wt)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n\n")
	fl.Flush()
	keep := time.NewTicker(streamKeepalive)
	defer keep.Stop()
	pace := time.NewTimer(0)
	defer pace.Stop()
	sentReady := false
	var buf bytes.Buffer
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keepalive\n\n")
			fl.Flush()
			continue
		case <-wt.notify:
		}
		ready, reset, recs, fail := wt.take()
		buf.Reset()
		if ready && !sentReady {
			buf.WriteString("event: ready\ndata: {}\n\n")
			sentReady = true
		}
		if reset {
			buf.WriteString("event: reset\ndata: {\"reason\":\"too many changes were waiting for this stream: list the jobs again\"}\n\n")
		}
		for len(recs) > 0 {
			n := min(len(recs), jobsPerMessage)
			buf.WriteString("event: jobs\ndata: [")
			for i, rec := range recs[:n] {
				if i > 0 {
					buf.WriteByte(',')
				}
				buf.Write(rec)
			}
			buf.WriteString("]\n\n")
			recs = recs[n:]
		}
		if fail != nil {
			fmt.Fprintf(&buf, "event: error\ndata: %q\n\n", fail.Error())
		}
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			fl.Flush()
		}
		if fail != nil {
			return
		}
		// gather the changes of the next interval
		pace.Reset(jobsStreamInterval)
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
	}
}
