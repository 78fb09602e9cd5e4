package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// waitLimit bounds every wait for a response during replay.
const waitLimit = 20 * time.Second

// replayer replays transcripts against one instance. Job ids in requests
// are rewritten to the ids of the jobs the replay itself submitted.
type replayer struct {
	uri    string
	bin    string // the flux binary, put first in submitted jobs' PATH
	cwd    string // working directory for submitted jobs
	h      *flux.Handle
	mu     sync.Mutex
	jobIDs map[uint64]uint64 // recorded job id -> replayed job id
	// recordedIDs are the ids flux-core gave the recorded submissions
	recordedIDs []uint64
}

// conn is one replayed client connection, read by its own goroutine.
type conn struct {
	c        net.Conn
	authByte int
	mu       sync.Mutex
	cond     *sync.Cond
	open     map[uint32][]*rpc // matchtag -> RPCs awaiting responses
	closed   bool
	other    []*message.Message // messages that answered nothing
}

func (rp *replayer) dial(t *testing.T) *conn {
	t.Helper()
	path, err := flux.SocketPath(rp.uri)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("connect to %s: %v", path, err)
	}
	var b [1]byte
	c.SetReadDeadline(time.Now().Add(waitLimit))
	if _, err := c.Read(b[:]); err != nil {
		t.Fatalf("reading the auth byte: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	cn := &conn{c: c, authByte: int(b[0]), open: map[uint32][]*rpc{}}
	cn.cond = sync.NewCond(&cn.mu)
	go cn.read(rp)
	return cn
}

func (cn *conn) read(rp *replayer) {
	r := message.NewReader(cn.c)
	for {
		m, err := r.Read()
		cn.mu.Lock()
		if err != nil {
			cn.closed = true
			cn.cond.Broadcast()
			cn.mu.Unlock()
			return
		}
		list := cn.open[m.Matchtag]
		if m.Type != message.Response || len(list) == 0 {
			cn.other = append(cn.other, m)
			cn.mu.Unlock()
			continue
		}
		c := list[0]
		c.got = append(c.got, m)
		if c.terminal(m) {
			c.gotDone = true
			cn.open[m.Matchtag] = list[1:]
		}
		rp.learnIDs(c, m)
		cn.cond.Broadcast()
		cn.mu.Unlock()
	}
}

// learnIDs maps the id flux-core assigned to a submitted job to the id
// fluxgo assigned to the same submission.
func (rp *replayer) learnIDs(c *rpc, m *message.Message) {
	if c.topic != "job-ingest.submit" || m.Errnum != 0 {
		return
	}
	i := len(c.got) - 1
	if i >= len(c.want) {
		return
	}
	var want, got struct {
		ID uint64 `json:"id"`
	}
	if json.Unmarshal(c.want[i].JSON(), &want) != nil || json.Unmarshal(m.JSON(), &got) != nil {
		return
	}
	if want.ID != 0 && got.ID != 0 {
		rp.mu.Lock()
		rp.jobIDs[want.ID] = got.ID
		rp.mu.Unlock()
	}
}

// waitFor blocks until c has n responses (or ended), or the limit passes.
func (cn *conn) waitFor(c *rpc, n int, deadline time.Time) bool {
	timer := time.AfterFunc(time.Until(deadline), func() {
		cn.mu.Lock()
		cn.cond.Broadcast()
		cn.mu.Unlock()
	})
	defer timer.Stop()
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for len(c.got) < n && !c.gotDone && !cn.closed {
		if time.Now().After(deadline) {
			return false
		}
		cn.cond.Wait()
	}
	return len(c.got) >= n || c.gotDone
}

// replay runs one transcript and returns its RPCs with fluxgo's
// responses filled in.
func (rp *replayer) replay(t *testing.T, tr *transcript) {
	conns := map[int]*conn{}
	defer func() {
		for _, cn := range conns {
			cn.c.Close()
		}
	}()
	get := func(n int) *conn {
		cn, ok := conns[n]
		if !ok {
			cn = rp.dial(t)
			conns[n] = cn
			if want, ok := tr.authBytes[n]; ok && want != cn.authByte {
				t.Errorf("conn %d: auth byte %d, want %d", n, cn.authByte, want)
			}
		}
		return cn
	}
	for _, st := range tr.steps {
		cn := get(st.rec.Conn)
		deadline := time.Now().Add(waitLimit)
		for c, n := range st.after {
			if !conns[c.conn].waitFor(c, n, deadline) {
				t.Errorf("conn %d: %s (matchtag %d): only %d of the %d responses flux-core had sent before the next request (%s)",
					c.conn, c.topic, c.matchtag, len(c.got), n, st.rec.msg.Topic)
			}
		}
		m, err := rp.rewrite(t, st.rec.msg)
		if err != nil {
			t.Fatalf("conn %d: %s: %v", st.rec.Conn, st.rec.msg.Topic, err)
		}
		if st.call != nil {
			st.call.sentTopic = m.Topic
			cn.mu.Lock()
			cn.open[m.Matchtag] = append(cn.open[m.Matchtag], st.call)
			cn.mu.Unlock()
		}
		if _, err := cn.c.Write(message.AppendFramed(nil, m)); err != nil {
			t.Fatalf("conn %d: sending %s: %v", st.rec.Conn, m.Topic, err)
		}
	}
	deadline := time.Now().Add(waitLimit)
	for _, c := range tr.rpcs {
		n := len(c.want)
		if c.streaming && lastError(c.want) != nil {
			// a stream flux-core ended: wait for the end, however many
			// responses come first (the job may be further along here)
			n = math.MaxInt
		}
		if !conns[c.conn].waitFor(c, n, deadline) && n != math.MaxInt {
			t.Errorf("conn %d: %s (matchtag %d): %d responses, flux-core sent %d",
				c.conn, c.topic, c.matchtag, len(c.got), len(c.want))
		}
	}
	for n, cn := range conns {
		cn.mu.Lock()
		for _, m := range cn.other {
			t.Errorf("conn %d: unexpected %s %s (matchtag %d, errnum %d)", n, m.Type, m.Topic, m.Matchtag, m.Errnum)
		}
		cn.mu.Unlock()
	}
}

// rewrite returns the message to send for a recorded one: job ids are
// mapped to the replay's jobs, and a submitted jobspec runs here (its
// working directory, PATH and alloc-bypass R are this instance's).
func (rp *replayer) rewrite(t *testing.T, orig *message.Message) (*message.Message, error) {
	m := *orig
	m.Payload = append([]byte(nil), orig.Payload...)
	rp.mu.Lock()
	ids := make(map[uint64]uint64, len(rp.jobIDs))
	for k, v := range rp.jobIDs {
		ids[k] = v
	}
	rp.mu.Unlock()
	for from, to := range ids {
		fromID, toID := jobid.ID(from), jobid.ID(to)
		pairs := [][2]string{{strconv.FormatUint(from, 10), strconv.FormatUint(to, 10)}}
		for _, enc := range []string{"f58", "f58plain"} {
			a, _ := fromID.Encode(enc)
			b, _ := toID.Encode(enc)
			pairs = append(pairs, [2]string{a, b})
		}
		for _, p := range pairs {
			m.Topic = strings.ReplaceAll(m.Topic, p[0], p[1])
			m.Payload = bytes.ReplaceAll(m.Payload, []byte(p[0]), []byte(p[1]))
		}
	}
	for _, id := range rp.recordedIDs {
		if _, ok := ids[id]; ok {
			continue
		}
		f58, _ := jobid.ID(id).Encode("f58plain")
		if bytes.Contains(m.Payload, []byte(strconv.FormatUint(id, 10))) || strings.Contains(m.Topic, f58) {
			t.Skipf("%s refers to job %d, which an earlier transcript submits: run the whole test", m.Topic, id)
		}
	}
	if m.Topic == "job-ingest.submit" {
		if err := rp.rewriteSubmit(t, &m); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

func (rp *replayer) rewriteSubmit(t *testing.T, m *message.Message) error {
	var req struct {
		J string `json:"J"`
	}
	if err := json.Unmarshal(m.JSON(), &req); err != nil {
		return err
	}
	env, err := sign.Unwrap(req.J)
	if err != nil {
		return err
	}
	var js map[string]any
	if err := json.Unmarshal(env.Payload, &js); err != nil {
		return err
	}
	attrs, _ := js["attributes"].(map[string]any)
	sys, _ := attrs["system"].(map[string]any)
	if sys == nil {
		return fmt.Errorf("jobspec without attributes.system")
	}
	sys["cwd"] = rp.cwd
	if environ, ok := sys["environment"].(map[string]any); ok {
		environ["PATH"] = filepath.Dir(rp.bin) + ":" + os.Getenv("PATH")
		environ["HOME"] = rp.cwd
	}
	if ab, ok := sys["alloc-bypass"].(map[string]any); ok {
		// The recorded command used $(flux job info ID R) of an earlier
		// job: use the R of the replay's equivalent job.
		ab["R"], err = rp.equivalentR(t)
		if err != nil {
			return err
		}
	}
	payload, err := json.Marshal(js)
	if err != nil {
		return err
	}
	newJ := sign.Wrap(payload, uint32(os.Getuid()))
	oldQ, _ := json.Marshal(req.J)
	newQ, _ := json.Marshal(newJ)
	p := bytes.Replace(m.JSON(), oldQ, newQ, 1)
	m.SetJSON(p)
	return nil
}

// equivalentR returns the R of the first job the replay submitted.
func (rp *replayer) equivalentR(t *testing.T) (any, error) {
	rp.mu.Lock()
	var first uint64
	for _, id := range rp.jobIDs {
		if first == 0 || id < first {
			first = id
		}
	}
	rp.mu.Unlock()
	if first == 0 {
		return nil, fmt.Errorf("alloc-bypass: no earlier job to take R from")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var resp struct {
		R string `json:"R"`
	}
	if err := rp.h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": first, "keys": []string{"R"}, "flags": 0}, &resp); err != nil {
		return nil, fmt.Errorf("R of job %d: %w", first, err)
	}
	var R any
	if err := json.Unmarshal([]byte(resp.R), &R); err != nil {
		return nil, err
	}
	return R, nil
}
