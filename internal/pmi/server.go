package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
)

// KeyValue is one put.
type KeyValue struct {
	Key, Value string
}

// KVS is the process group's shared store and barrier as a Server uses
// it. The Server calls it from one goroutine per connection, so an
// implementation must be safe for concurrent use. Implementations: MemKVS
// (every process served by one Server); the job shell's, which spans
// nodes by exchanging puts through the Flux KVS.
type KVS interface {
	// Fence is one process's entry into the group barrier. puts are the
	// pairs that process put since its previous barrier, in order. Fence
	// returns once every process of the group has entered this barrier;
	// from then on every process's puts are visible to Get. An error
	// fails the barrier for this process.
	Fence(ctx context.Context, rank int, puts []KeyValue) error
	// Get returns the value stored under key, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, rank int, key string) (string, error)
}

// Aborter is implemented by a KVS that can abort the whole process group
// (for example, kill the job). The Server calls it when a process sends
// cmd=abort, then ends that connection; without it the abort is only
// logged and reported by ServeConn's error.
type Aborter interface {
	Abort(rank, exitcode int, msg string)
}

// Finalizer is implemented by a KVS that wants to know when a process
// has finalized (for example, to tell a clean exit from a crash).
type Finalizer interface {
	Finalize(rank int)
}

// Info describes the process group a Server serves.
type Info struct {
	Size         int    // number of processes (required)
	KVSName      string // the group's KVS name: a word (required)
	Appnum       int    // application number (MPI_APPNUM)
	UniverseSize int    // 0 means Size
	Maxes        Maxes  // zero fields take the Default* limits
}

// Validate reports an Info a server can't serve with.
func (i Info) Validate() error {
	if i.Size < 1 {
		return fmt.Errorf("pmi server: size %d: must be at least 1", i.Size)
	}
	if !validWord(i.KVSName) {
		return fmt.Errorf("pmi server: kvsname %q: must be visible characters without '='", i.KVSName)
	}
	return nil
}

func (i Info) maxes() Maxes {
	m := i.Maxes
	if m.KVSNameMax == 0 {
		m.KVSNameMax = DefaultKVSNameMax
	}
	if m.KeyMax == 0 {
		m.KeyMax = DefaultKeyMax
	}
	if m.ValueMax == 0 {
		m.ValueMax = DefaultValueMax
	}
	return m
}

// Server answers PMI-1 requests for the processes of one group. Run one
// ServeConn per process connection (PMI_FD), or Serve on a listener for
// PMI_PORT clients. A Server holds no per-connection state itself.
type Server struct {
	Info Info
	KVS  KVS
	// RankOf maps the pmiid a PMI_PORT client presents to its rank; nil
	// means the pmiid is the rank.
	RankOf func(pmiid int) (int, error)
	// Log receives protocol errors and aborts; nil discards them.
	Log *slog.Logger
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// ServeConn serves the process of the given rank on conn (the server
// end of its PMI_FD) until it finalizes, aborts, or disconnects, or ctx
// is done (which closes conn if it is an io.Closer). It returns nil
// after a finalize; an error wrapping ErrAborted after an abort; one
// wrapping io.ErrUnexpectedEOF if the process went away without
// finalizing; one wrapping ErrProtocol for a malformed request (the
// connection is then closed, as RFC 13 requires).
func (s *Server) ServeConn(ctx context.Context, conn io.ReadWriter, rank int) error {
	if err := s.Info.Validate(); err != nil {
		return err
	}
	if rank < 0 || rank >= s.Info.Size {
		return fmt.Errorf("pmi server: rank %d out of range for size %d", rank, s.Info.Size)
	}
	ss := s.newSession(conn, rank)
	return ss.run(ctx)
}

// ServePortConn serves one PMI_PORT connection: the client first
// identifies itself with cmd=initack pmiid=N.
func (s *Server) ServePortConn(ctx context.Context, conn io.ReadWriter) error {
	if err := s.Info.Validate(); err != nil {
		return err
	}
	ss := s.newSession(conn, -1)
	return ss.run(ctx)
}

// Serve accepts PMI_PORT connections on ln until ctx is done or ln is
// closed, serving each on its own goroutine, and returns once every
// connection has ended. Per-connection errors are logged.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if err := s.ServePortConn(ctx, c); err != nil {
				s.log().Warn("pmi connection", "remote", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

type session struct {
	s       *Server
	conn    io.ReadWriter
	r       *bufio.Reader
	rank    int // -1 until initack (PMI_PORT)
	maxes   Maxes
	pending []KeyValue
	putKeys map[string]bool
}

func (s *Server) newSession(conn io.ReadWriter, rank int) *session {
	return &session{s: s, conn: conn, r: bufio.NewReader(conn), rank: rank,
		maxes: s.Info.maxes(), putKeys: make(map[string]bool)}
}

func (ss *session) close() {
	if c, ok := ss.conn.(io.Closer); ok {
		c.Close()
	}
}

func (ss *session) protoErr(format string, args ...any) error {
	ss.close()
	err := fmt.Errorf("%w: rank %d: %s", ErrProtocol, ss.rank, fmt.Sprintf(format, args...))
	ss.s.log().Error(err.Error())
	return err
}

func (ss *session) send(m *Message) error {
	_, err := io.WriteString(ss.conn, m.String())
	return err
}

// respond sends cmd with rc=0 and the given key, value pairs.
func (ss *session) respond(cmd string, kv ...string) error {
	m := NewMessage(cmd).SetInt("rc", Success)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Set(kv[i], kv[i+1])
	}
	return ss.send(m)
}

// fail sends cmd with a nonzero rc and a message. Spaces in the message
// become '_' because common PMI client libraries split every line on
// spaces.
func (ss *session) fail(cmd string, rc int, msg string) error {
	return ss.send(NewMessage(cmd).SetInt("rc", rc).Set("msg", strings.Join(strings.Fields(msg), "_")))
}

func (ss *session) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, ss.close)
	defer stop()
	for {
		line, err := readLine(ss.r)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrProtocol) {
				return ss.protoErr("%v", err)
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("pmi: rank %d disconnected without finalize: %w", ss.rank, err)
		}
		m, err := ParseMessage(line)
		if err != nil {
			return ss.protoErr("%v", err)
		}
		if ss.rank < 0 && m.Cmd != "initack" {
			return ss.protoErr("PMI_PORT client sent cmd=%s before cmd=initack", m.Cmd)
		}
		done, err := ss.handle(ctx, m)
		if err != nil || done {
			return err
		}
	}
}

// handle answers one request; done is set when the session is over.
// Requests before cmd=init are answered too: PMI-1 clients older than
// 1.1 never send it (RFC 13, Back Compatibility).
func (ss *session) handle(ctx context.Context, m *Message) (done bool, err error) {
	info := ss.s.Info
	if m.Multi {
		return false, ss.multi(m)
	}
	switch m.Cmd {
	case "initack":
		return false, ss.initack(m)
	case "init":
		return false, ss.init(m)
	case "get_maxes":
		return false, ss.respond("maxes",
			"kvsname_max", strconv.Itoa(ss.maxes.KVSNameMax),
			"keylen_max", strconv.Itoa(ss.maxes.KeyMax),
			"vallen_max", strconv.Itoa(ss.maxes.ValueMax))
	case "get_universe_size":
		n := info.UniverseSize
		if n == 0 {
			n = info.Size
		}
		return false, ss.respond("universe_size", "size", strconv.Itoa(n))
	case "get_appnum":
		return false, ss.respond("appnum", "appnum", strconv.Itoa(info.Appnum))
	case "get_my_kvsname":
		return false, ss.respond("my_kvsname", "kvsname", info.KVSName)
	case "put":
		return false, ss.put(m)
	case "get":
		return false, ss.get(ctx, m)
	case "barrier_in":
		return false, ss.barrier(ctx)
	case "finalize":
		if f, ok := ss.s.KVS.(Finalizer); ok {
			f.Finalize(ss.rank)
		}
		return true, ss.respond("finalize_ack")
	case "abort":
		return true, ss.abort(m)
	case "publish_name":
		return false, ss.fail("publish_result", Fail, "name publishing is not supported")
	case "unpublish_name":
		return false, ss.fail("unpublish_result", Fail, "name publishing is not supported")
	case "lookup_name":
		return false, ss.fail("lookup_result", Fail, "name publishing is not supported")
	}
	return true, ss.protoErr("unknown command %q", m.Cmd)
}

func (ss *session) initack(m *Message) error {
	if ss.rank >= 0 {
		return ss.protoErr("cmd=initack on an identified connection")
	}
	id, err := m.Int("pmiid")
	if err != nil {
		return ss.protoErr("%v", err)
	}
	rank := id
	if ss.s.RankOf != nil {
		if rank, err = ss.s.RankOf(id); err != nil {
			ss.fail("initack", Fail, err.Error())
			ss.close()
			return fmt.Errorf("pmi: initack pmiid=%d: %w", id, err)
		}
	}
	if rank < 0 || rank >= ss.s.Info.Size {
		ss.fail("initack", ErrInvalidArg, "pmiid out of range")
		ss.close()
		return fmt.Errorf("pmi: initack pmiid=%d: rank %d out of range for size %d", id, rank, ss.s.Info.Size)
	}
	ss.rank = rank
	for _, msg := range []*Message{
		NewMessage("initack").SetInt("rc", Success),
		NewMessage("set").SetInt("size", ss.s.Info.Size),
		NewMessage("set").SetInt("rank", rank),
		NewMessage("set").SetInt("debug", 0),
	} {
		if err := ss.send(msg); err != nil {
			return err
		}
	}
	return nil
}

// init negotiates the version: this server speaks 1.1, and answers a
// 1.0 client with 1.0 and any newer client with 1.1.
func (ss *session) init(m *Message) error {
	v, err := m.Int("pmi_version")
	if err != nil {
		return ss.protoErr("%v", err)
	}
	sub, err := m.Int("pmi_subversion")
	if err != nil {
		return ss.protoErr("%v", err)
	}
	if v < 1 {
		return ss.fail("response_to_init", Fail, fmt.Sprintf("PMI version %d.%d is not supported; this server speaks 1.1", v, sub))
	}
	if v > 1 || sub > 1 {
		sub = 1
	}
	return ss.respond("response_to_init", "pmi_version", "1", "pmi_subversion", strconv.Itoa(sub))
}

// kvsArgs checks a put or get request's kvsname and key.
func (ss *session) kvsArgs(result string, m *Message) (key string, ok bool, err error) {
	name, _ := m.Get("kvsname")
	if name != ss.s.Info.KVSName {
		return "", false, ss.fail(result, ErrInvalidArg, fmt.Sprintf("unknown kvsname %q", name))
	}
	key, _ = m.Get("key")
	if !validWord(key) {
		return "", false, ss.fail(result, ErrInvalidKey, "invalid key")
	}
	if len(key) >= ss.maxes.KeyMax {
		return "", false, ss.fail(result, ErrInvalidKeyLen, fmt.Sprintf("key longer than %d", ss.maxes.KeyMax-1))
	}
	return key, true, nil
}

func (ss *session) put(m *Message) error {
	key, ok, err := ss.kvsArgs("put_result", m)
	if !ok {
		return err
	}
	value, present := m.Get("value")
	switch {
	case !present || !validValue(value):
		return ss.fail("put_result", ErrInvalidVal, "invalid value")
	case len(value) >= ss.maxes.ValueMax:
		return ss.fail("put_result", ErrInvalidValLen, fmt.Sprintf("value longer than %d", ss.maxes.ValueMax-1))
	case strings.HasPrefix(key, "PMI_"):
		return ss.fail("put_result", ErrInvalidKey, "keys beginning with PMI_ are reserved")
	case ss.putKeys[key]:
		return ss.fail("put_result", ErrInvalidKey, fmt.Sprintf("key %s was already put", key))
	}
	ss.putKeys[key] = true
	ss.pending = append(ss.pending, KeyValue{Key: key, Value: value})
	return ss.respond("put_result")
}

func (ss *session) get(ctx context.Context, m *Message) error {
	key, ok, err := ss.kvsArgs("get_result", m)
	if !ok {
		return err
	}
	// This process's own puts are visible to it before the barrier.
	for i := len(ss.pending) - 1; i >= 0; i-- {
		if ss.pending[i].Key == key {
			return ss.respond("get_result", "value", ss.pending[i].Value)
		}
	}
	v, err := ss.s.KVS.Get(ctx, ss.rank, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return ss.fail("get_result", Fail, "key "+key+" not found")
		}
		return ss.fail("get_result", Fail, err.Error())
	}
	return ss.respond("get_result", "value", v)
}

func (ss *session) barrier(ctx context.Context) error {
	puts := ss.pending
	ss.pending = nil
	if err := ss.s.KVS.Fence(ctx, ss.rank, puts); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ss.fail("barrier_out", Fail, err.Error())
	}
	return ss.respond("barrier_out")
}

// abort: RFC 13 answers cmd=abort with a bare newline; the process is
// expected to exit right after.
func (ss *session) abort(m *Message) error {
	code := 1
	if _, ok := m.Get("exitcode"); ok {
		if n, err := m.Int("exitcode"); err == nil {
			code = n
		}
	}
	msg, _ := m.Get("msg")
	if msg == "" {
		msg, _ = m.Get("error_msg")
	}
	ss.s.log().Error("pmi: process aborted the group", "rank", ss.rank, "exitcode", code, "msg", msg)
	if a, ok := ss.s.KVS.(Aborter); ok {
		a.Abort(ss.rank, code, msg)
	}
	io.WriteString(ss.conn, "\n")
	ss.close()
	return fmt.Errorf("pmi: rank %d: %w with exit code %d", ss.rank, ErrAborted, code)
}

// multi consumes a multi-line request (mcmd=spawn ... endcmd) and
// refuses it: dynamic process management is not offered.
func (ss *session) multi(m *Message) error {
	if m.Cmd != "spawn" {
		return ss.protoErr("unknown multi-line command %q", m.Cmd)
	}
	for {
		line, err := readLine(ss.r)
		if err != nil {
			return ss.protoErr("spawn request: %v", err)
		}
		if strings.TrimSpace(line) == "endcmd" {
			break
		}
	}
	return ss.fail("spawn_result", Fail, "spawn is not supported")
}
