package broker

import (
	"bytes"
	"encoding/json"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Overlay tracing (flux overlay trace): overlay.trace is a streaming
// request of the instance owner; while one is open, every message this
// broker sends to or receives from an overlay peer (its parent or a
// child) is summarized to it: direction, peer rank, type, topic, and on
// request the JSON payload. With nobody tracing, the cost is one atomic
// load per overlay message. A tracer too slow to keep up loses entries
// (its stream says how many) rather than slowing the overlay.

// traceEntry is one message summary (the overlay.trace response).
type traceEntry = flux.OverlayTraceEntry

// traceFilter is what a tracer asked for.
type traceFilter struct {
	types int // mask of 1<<message.Type (0: all)
	rank  int // peer rank, -1 for any
	glob  string
	full  bool
}

type traceSub struct {
	f       traceFilter
	ch      chan traceEntry
	stop    chan struct{}
	dropped atomic.Int64
}

type tracer struct {
	n    atomic.Int32
	mu   sync.Mutex
	subs map[string]*traceSub // by requestor route
}

var typeNames = map[message.Type]string{message.Request: "request", message.Response: "response", message.Event: "event", message.Control: "control"}

// trace offers m, sent (tx) to or received (rx) from peer rank, to the
// tracers.
func (t *tracer) trace(prefix string, rank uint32, m *message.Message) {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.subs {
		f := s.f
		if f.types != 0 && f.types&(1<<m.Type) == 0 || f.rank >= 0 && uint32(f.rank) != rank {
			continue
		}
		if f.glob != "" {
			if ok, _ := path.Match(f.glob, m.Topic); !ok {
				continue
			}
		}
		e := traceEntry{Timestamp: float64(time.Now().UnixNano()) / 1e9, Prefix: prefix, Rank: rank,
			Type: typeNames[m.Type], Topic: m.Topic, Size: len(m.Payload), Errnum: int(m.Errnum)}
		switch m.Type {
		case message.Request:
			nodeid, tag := m.Nodeid, m.Matchtag
			e.Nodeid, e.Matchtag = &nodeid, &tag
		case message.Response:
			tag := m.Matchtag
			e.Matchtag = &tag
		case message.Control:
			ct := uint32(m.CtlType)
			e.Control = &ct
		}
		if p := bytes.TrimSuffix(m.Payload, []byte{0}); f.full && len(p) > 0 && json.Valid(p) {
			e.Payload = append(json.RawMessage(nil), p...)
		}
		select {
		case s.ch <- e:
		default:
			s.dropped.Add(1)
		}
	}
}

// overlayTrace serves overlay.trace {typemask, rank, topic_glob, full}.
func (s *builtins) overlayTrace(r *flux.Request) {
	var req struct {
		Typemask int    `json:"typemask"`
		Rank     *int   `json:"rank"`
		Glob     string `json:"topic_glob"`
		Full     bool   `json:"full"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "overlay.trace: request must be streaming")
		return
	}
	if _, err := path.Match(req.Glob, ""); err != nil {
		r.Errorf(syscall.EINVAL, "topic glob %q: %v", req.Glob, err)
		return
	}
	f := traceFilter{types: req.Typemask, rank: -1, glob: req.Glob, full: req.Full}
	if req.Rank != nil {
		f.rank = *req.Rank
	}
	t := &s.b.tracer
	sub := &traceSub{f: f, ch: make(chan traceEntry, 4096), stop: make(chan struct{})}
	key := r.Msg.RouteString()
	t.mu.Lock()
	if t.subs == nil {
		t.subs = map[string]*traceSub{}
	}
	if old := t.subs[key]; old != nil {
		close(old.stop)
	} else {
		t.n.Add(1)
	}
	t.subs[key] = sub
	t.mu.Unlock()
	go func() {
		for {
			select {
			case e := <-sub.ch:
				e.Dropped = int(sub.dropped.Swap(0))
				r.Respond(e)
			case <-sub.stop:
				r.EndStream()
				return
			case <-s.followEnd:
				r.EndStream()
				return
			}
		}
	}()
}

// overlayDisconnect ends the traces of a client that went away.
func (s *builtins) overlayDisconnect(r *flux.Request) {
	t := &s.b.tracer
	key := r.Msg.RouteString()
	t.mu.Lock()
	if sub := t.subs[key]; sub != nil {
		delete(t.subs, key)
		t.n.Add(-1)
		close(sub.stop)
	}
	t.mu.Unlock()
}
