package kvswatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Lookup flags (flux-core's FLUX_KVS_* values).
const (
	flagWatch       = 0x04
	flagWaitCreate  = 0x08
	flagTreeObj     = 0x10
	flagWatchFull   = 0x40
	flagWatchUniq   = 0x80
	flagWatchAppend = 0x100
	flagStream      = 0x200
)

const ownerUnknown = math.MaxUint32

// commit is a namespace root as the last setroot (or getroot, or
// created event) told it.
type commit struct {
	rootref string
	rootseq int
	event   []byte // the setroot payload (for its keys); nil: unknown
	keys    map[string]json.RawMessage
	parsed  bool
}

// names reports whether the commit wrote key. A root whose writes are
// unknown (from getroot or a created event) names no key. The keys are
// decoded once, when a watcher first asks.
func (c *commit) names(key string) bool {
	if c.event == nil {
		return false
	}
	if !c.parsed {
		c.parsed = true
		var ev struct {
			Keys map[string]json.RawMessage `json:"keys"`
		}
		if json.Unmarshal(c.event, &ev) == nil {
			c.keys = ev.Keys
		}
		c.event = c.event[:0:0]
	}
	_, ok := c.keys[key]
	return ok
}

// nsMonitor follows one namespace for its watchers.
type nsMonitor struct {
	w        *watchCtx
	name     string
	owner    uint32
	commit   *commit
	err      error // getroot failed (ENOTSUP: no such namespace yet)
	removed  bool
	watchers []*watcher
}

// monitor returns the monitor of namespace name, creating it and asking
// the kvs for the current root.
func (w *watchCtx) monitor(name string) *nsMonitor {
	if nsm := w.namespaces[name]; nsm != nil {
		return nsm
	}
	nsm := &nsMonitor{w: w, name: name, owner: ownerUnknown}
	w.namespaces[name] = nsm
	f, err := w.h.RPC("kvs.getroot", flux.NodeidAny, map[string]any{"namespace": name, "flags": 0}, 0)
	if err != nil {
		nsm.err = err
		return nsm
	}
	f.Then(func(m *flux.Message, err error) {
		var resp kvs.RootInfo
		if err == nil {
			err = m.UnmarshalPayload(&resp)
		}
		if w.namespaces[name] != nsm {
			return
		}
		if nsm.commit == nil {
			if err != nil {
				nsm.err = err
			} else {
				nsm.commit = &commit{rootref: resp.Rootref, rootseq: int(resp.Rootseq)}
				nsm.owner = uint32(resp.Owner)
			}
		}
		nsm.respondAll()
	})
	return nsm
}

func (nsm *nsMonitor) respondAll() {
	for _, wt := range append([]*watcher(nil), nsm.watchers...) {
		nsm.respond(wt)
	}
}

// remove drops a finished watcher, and the monitor with the last one.
func (nsm *nsMonitor) remove(wt *watcher) {
	for i, x := range nsm.watchers {
		if x == wt {
			nsm.watchers = append(nsm.watchers[:i], nsm.watchers[i+1:]...)
			break
		}
	}
	if len(nsm.watchers) == 0 && nsm.w.namespaces[nsm.name] == nsm {
		delete(nsm.w.namespaces, nsm.name)
	}
}

// watcher is one kvs-watch.lookup request.
type watcher struct {
	nsm     *nsMonitor
	r       *flux.Request
	key     string
	flags   int
	rootseq int // last root looked at (-1: none)

	lookups []*lookup // in root order

	initialSeq int  // root of the first answer (later ones must be newer)
	responded  bool // an answer (value) went out
	prev       []byte
	// WATCH_APPEND: what of the value went out (sent bytes, digest their
	// hash). An inline val grows in place, then may turn into a valref
	// whose first blob holds the val as it was then; a valref grows by
	// blobs (refsSent of them went out, the last lastRef). A value that
	// is none of these (rewritten whole: a job shell puts again the
	// output log the KVS may have lost in a crash) is taken if it begins
	// with what was sent.
	appendMode appendMode
	refsSent   int
	lastRef    string
	sent       int
	digest     maphash.Hash
	seeded     bool
	loading    bool // an answer waits for content loads

	canceled, mute, finished bool
}

// lookup is one kvs.lookup-plus in flight for a watcher.
type lookup struct {
	initial bool
	done    bool
	resp    lookupPlus
	err     error
}

// lookupPlus is the kvs.lookup-plus response: {val, rootseq, rootref} or
// {errno, rootseq, rootref}.
type lookupPlus struct {
	Val     *treeobj.Object `json:"val"`
	Errno   int             `json:"errno"`
	Rootseq int             `json:"rootseq"`
	Rootref string          `json:"rootref"`
}

func newWatcher(nsm *nsMonitor, r *flux.Request, key string, flags int) *watcher {
	return &watcher{nsm: nsm, r: r, key: treeobj.NormalizeKey(key), flags: flags, rootseq: -1, initialSeq: -1}
}

func (wt *watcher) watching() bool { return wt.flags&flagWatch != 0 }

// fail ends the watcher with err (ENODATA: a clean end of stream).
func (wt *watcher) fail(err error) {
	if wt.finished {
		return
	}
	if !wt.mute {
		wt.r.RespondError(err)
	}
	wt.finish()
}

func (wt *watcher) finish() {
	wt.finished = true
	wt.lookups = nil
	wt.nsm.remove(wt)
}

var errEnd = flux.NewError(syscall.ENODATA, "")

// respond moves one watcher forward after a change of its namespace.
func (nsm *nsMonitor) respond(wt *watcher) {
	switch {
	case wt.finished:
		return
	case wt.canceled:
		wt.fail(errEnd)
		return
	case nsm.removed:
		// The namespace is gone: the stream simply ends.
		wt.fail(errEnd)
		return
	case nsm.err != nil:
		if wt.flags&flagWaitCreate != 0 && errors.Is(nsm.err, syscall.ENOTSUP) && !wt.responded {
			return // wait for the namespace to be created
		}
		wt.fail(nsm.err)
		return
	case nsm.commit == nil || nsm.commit.rootseq <= wt.rootseq && wt.rootseq >= 0:
		return
	}
	if wt.r.Rolemask()&message.RoleOwner == 0 && (nsm.owner == ownerUnknown || wt.r.Userid() != nsm.owner) {
		wt.fail(fmt.Errorf("namespace %q belongs to uid %d: uid %d may not watch it: %w",
			nsm.name, nsm.owner, wt.r.Userid(), syscall.EPERM))
		return
	}
	c := nsm.commit
	if wt.rootseq >= 0 && wt.flags&flagWatchFull == 0 && !c.names(wt.key) {
		wt.rootseq = c.rootseq
		return
	}
	wt.sendLookup(c)
}

// sendLookup looks the key up in root c with the watcher's credentials
// (so the kvs checks them, e.g. across namespace symlinks).
func (wt *watcher) sendLookup(c *commit) {
	flags := wt.flags &^ (flagWatch | flagWaitCreate | flagWatchFull | flagWatchUniq | flagWatchAppend)
	if wt.flags&flagWatchAppend != 0 {
		flags |= flagTreeObj
	}
	req := map[string]any{"key": wt.key, "namespace": wt.nsm.name, "flags": flags}
	initial := wt.rootseq < 0
	if !initial {
		req["rootdir"] = treeobj.NewDirref(c.rootref)
		req["rootseq"] = c.rootseq
	}
	wt.rootseq = c.rootseq
	l := &lookup{initial: initial}
	wt.lookups = append(wt.lookups, l)
	b, _ := json.Marshal(req)
	m := message.NewRequest("kvs.lookup-plus", flux.NodeidAny, b)
	m.Userid, m.Rolemask = wt.r.Userid(), wt.r.Rolemask()
	f, err := wt.nsm.w.h.SendRequest(m, 0)
	if err != nil {
		l.done, l.err = true, err
		wt.drain()
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err == nil {
			err = m.UnmarshalPayload(&l.resp)
		}
		l.done, l.err = true, err
		wt.drain()
	})
}

// drain answers completed lookups in root order.
func (wt *watcher) drain() {
	// while an answer waits for its blobs, later ones wait for it
	for !wt.finished && !wt.loading && len(wt.lookups) > 0 && wt.lookups[0].done {
		l := wt.lookups[0]
		wt.lookups = wt.lookups[1:]
		if !wt.handle(l) {
			return // waiting for content loads; handle resumes drain
		}
	}
}

// handle processes one lookup result. It returns false when it started
// content loads (WATCH_APPEND); the answer follows when they complete.
func (wt *watcher) handle(l *lookup) bool {
	waitcreate := wt.flags&flagWaitCreate != 0 && !wt.responded
	switch {
	case l.err != nil:
		wt.fail(l.err)
		return true
	case l.resp.Errno != 0:
		if l.resp.Errno == int(syscall.ENOENT) && waitcreate {
			if l.initial {
				wt.initialSeq = l.resp.Rootseq
			}
			return true
		}
		wt.fail(flux.NewError(syscall.Errno(l.resp.Errno), ""))
		return true
	case l.resp.Val == nil:
		wt.fail(fmt.Errorf("kvs.lookup-plus answered without a value: %w", syscall.EPROTO))
		return true
	case !l.initial && l.resp.Rootseq <= wt.initialSeq:
		return true // a root older than the first answer's
	}
	if l.initial {
		wt.initialSeq = l.resp.Rootseq
	}
	val := l.resp.Val
	switch {
	case wt.flags&flagWatchAppend != 0:
		return wt.handleAppend(val)
	case wt.flags&(flagWatchFull|flagWatchUniq) != 0:
		enc := val.Encode()
		if wt.responded && bytes.Equal(enc, wt.prev) {
			return true
		}
		wt.prev = enc
		wt.send(val)
	default:
		wt.send(val)
	}
	return true
}

// send answers with a value; a WAITCREATE-only watcher is then done.
func (wt *watcher) send(val *treeobj.Object) { wt.sendPiece(val, false) }

// sendPiece answers with a value, or with a piece of one that more
// answers complete ("more": true, a WATCH_APPEND value sent in pieces:
// a client reading it once reads until an answer without it).
func (wt *watcher) sendPiece(val *treeobj.Object, more bool) {
	if !wt.mute {
		b := append(append([]byte(`{"val":`), val.Encode()...), '}')
		if more {
			b = append(b[:len(b)-1], `,"more":true}`...)
		}
		wt.r.Respond(json.RawMessage(b))
	}
	wt.responded = true
	if !more && !wt.watching() {
		wt.finish()
	}
}

// appendMode is how a WATCH_APPEND watcher has seen its value so far.
type appendMode int

const (
	appendNone   appendMode = iota // nothing sent yet
	appendVal                      // an inline val
	appendValref                   // a valref
)

// handleAppend sends the whole value the first time, then only what was
// appended since.
func (wt *watcher) handleAppend(val *treeobj.Object) bool {
	switch val.Type {
	case treeobj.Val:
		data, err := val.Value()
		if err != nil {
			wt.fail(flux.NewError(syscall.EPROTO, err.Error()))
			return true
		}
		switch {
		case wt.appendMode == appendNone:
			wt.sendAppended(data, false)
		case len(data) >= wt.sent && wt.sentPrefix(data[:wt.sent]):
			// grown in place, or rewritten whole beginning with what
			// went out
			if len(data) > wt.sent {
				wt.sendAppended(data[wt.sent:], false)
			}
		default:
			wt.fail(flux.NewError(syscall.EINVAL, "value of key watched with WATCH_APPEND overwritten"))
			return true
		}
		wt.appendMode, wt.refsSent, wt.lastRef = appendVal, 0, ""
		return true
	case treeobj.Valref:
		n := len(val.Refs)
		if n == 0 {
			wt.fail(flux.NewError(syscall.EPROTO, "valref without blobs"))
			return true
		}
		grown := wt.appendMode == appendValref && n >= wt.refsSent && val.Refs[wt.refsSent-1] == wt.lastRef
		if grown && n == wt.refsSent {
			return true
		}
		start, verify := 0, 0
		switch {
		case wt.appendMode == appendNone:
		case grown:
			start = wt.refsSent
		default:
			// an inline val turned valref, or the value rewritten: read
			// it all, check it begins with what went out
			verify = wt.sent
		}
		wt.appendMode, wt.refsSent, wt.lastRef = appendValref, n, val.Refs[n-1]
		wt.loadRange(val.Refs[start:], verify)
		return false
	case treeobj.Dir, treeobj.Dirref:
		wt.fail(flux.NewError(syscall.EISDIR, fmt.Sprintf("%s cannot be watched with WATCH_APPEND", val.Type)))
	default:
		wt.fail(flux.NewError(syscall.EINVAL, fmt.Sprintf("%s cannot be watched with WATCH_APPEND", val.Type)))
	}
	return true
}

// sendAppended sends data as appended to what went out (a piece of it
// if more follows), and counts it.
func (wt *watcher) sendAppended(data []byte, more bool) {
	if !wt.seeded {
		wt.digest.SetSeed(appendSeed)
		wt.seeded = true
	}
	wt.digest.Write(data)
	wt.sent += len(data)
	wt.sendPiece(treeobj.NewVal(data), more)
}

// appendSeed seeds the hashes of what WATCH_APPEND watchers sent (one
// per process: a prefix is compared with a hash made the same way).
var appendSeed = maphash.MakeSeed()

// sentPrefix reports whether data is what went out.
func (wt *watcher) sentPrefix(data []byte) bool {
	return len(data) == wt.sent && maphash.Bytes(appendSeed, data) == wt.digest.Sum64()
}

// loadWindow is how many blobs of an appended range are loaded at once
// and sent as one response: a long log (a job's output eventlog holds
// one blob per write) goes out in bounded pieces, never as one value of
// its whole size.
const loadWindow = 32

// loadRange loads blobs from the content service, loadWindow at a time,
// and sends each window's data as one val, then resumes drain. The first
// verify bytes of the range must be what went out already (checked
// against its hash, not sent again): a value rewritten whole is taken
// only if it begins so.
func (wt *watcher) loadRange(refs []string, verify int) {
	var check maphash.Hash
	check.SetSeed(appendSeed)
	want := wt.digest.Sum64()
	wt.loadFrom(refs, verify, &check, want, false)
}

// loadFrom is loadRange's loop: verify bytes remain to check into check
// (then compared with want), and pieced says a piece of the range was
// sent with more to follow (so the last is sent, even empty, to say so).
func (wt *watcher) loadFrom(refs []string, verify int, check *maphash.Hash, want uint64, pieced bool) {
	wt.loading = true
	n := min(len(refs), loadWindow)
	wt.loadBlobs(refs[:n], func(data []byte, err error) {
		if wt.finished {
			wt.loading = false
			return
		}
		if err != nil {
			wt.loading = false
			wt.fail(fmt.Errorf("loading appended data: %w", err))
			return
		}
		if verify > 0 {
			cut := min(verify, len(data))
			check.Write(data[:cut])
			data, verify = data[cut:], verify-cut
			if verify == 0 && check.Sum64() != want {
				wt.loading = false
				wt.fail(flux.NewError(syscall.EINVAL, "value of key watched with WATCH_APPEND overwritten"))
				return
			}
		}
		more := n < len(refs)
		if len(data) > 0 || pieced && !more {
			wt.sendAppended(data, more)
			pieced = pieced || more
		}
		if more {
			wt.loadFrom(refs[n:], verify, check, want, pieced)
			return
		}
		wt.loading = false
		if verify > 0 {
			wt.fail(flux.NewError(syscall.EINVAL, "key watched with WATCH_APPEND shortened"))
			return
		}
		wt.drain()
	})
}

// loadBlobs loads refs (all requests at once) and gives done their
// concatenation.
func (wt *watcher) loadBlobs(refs []string, done func([]byte, error)) {
	parts := make([][]byte, len(refs))
	pending := len(refs)
	var first error
	finish := func() {
		if first != nil {
			done(nil, first)
			return
		}
		done(bytes.Join(parts, nil), nil)
	}
	for i, ref := range refs {
		_, digest, err := content.Parse(ref)
		var f *flux.Future
		if err == nil {
			f, err = content.SendLoad(wt.nsm.w.h, digest, 0)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			if pending--; pending == 0 {
				wt.nsm.w.h.Post(finish)
			}
			continue
		}
		f.Then(func(m *flux.Message, err error) {
			data, err := content.LoadResult(m, err)
			if err != nil && first == nil {
				first = err
			}
			parts[i] = data
			if pending--; pending == 0 {
				finish()
			}
		})
	}
}
