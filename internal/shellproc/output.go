package shellproc

// Task output. Every shell's task output goes to the job's leader shell,
// which is the one writer of the output eventlog (RFC 24) and of output
// files, as in flux-core: a shell on another node forwards its tasks'
// output with job-shell.output requests, in order, one in flight at a
// time. Data is written (or forwarded) within the batch timeout (shell
// option output.batch-timeout, default 50 ms) through the module's KVS
// batch, so a burst costs one write; end-of-stream events wait for more
// data or the end. It reports its own exit only once every
// stream of every task of the job has ended (a lost shell's count as
// ended: job-exec says so with job-shell.lost) and what it wrote is
// committed, so job-exec's "done" always follows the whole output. A log
// nothing has been written to by then (a job without output) is not
// written by the leader at all: it goes whole in the exit response and
// job-exec writes it with its completion events.
//
// A stream redirected to a file (shell option output.<stream>.type=file,
// path, optional label and mode=truncate|append) is written by the
// leader to that file, opened when the job starts, and the log says so
// with a "redirect" event.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// streams are the output streams, by index (the bit of a task's open
// streams).
var streams = [2]string{"stdout", "stderr"}

func streamIndex(name string) int {
	if name == "stderr" {
		return 1
	}
	return 0
}

// outputHeader is the context of the output eventlog's header event
// (RFC 24), its keys in flux-core's order.
type outputHeader struct {
	Version  int `json:"version"`
	Encoding struct {
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	} `json:"encoding"`
	Count struct {
		Stdout int `json:"stdout"`
		Stderr int `json:"stderr"`
	} `json:"count"`
	Options struct{} `json:"options"`
}

// redirectContext is the context of a "redirect" event.
type redirectContext struct {
	Stream string `json:"stream"`
	Rank   string `json:"rank"`
	Path   string `json:"path,omitempty"`
}

// fileTarget is an output file of the job.
type fileTarget struct {
	path  string
	f     *os.File
	label bool
	// partial holds each task's unterminated last line when labeling
	partial map[int][]byte
}

// defaultBatchTimeout is how long output waits to be written with what
// follows it (shell option output.batch-timeout, seconds): a job that
// ends sooner has its output written once, with its completion.
const defaultBatchTimeout = 50 * time.Millisecond

// batchTimeout reads output.batch-timeout.
func batchTimeout(opts map[string]any) (time.Duration, error) {
	out, _ := opts["output"].(map[string]any)
	switch v := out["batch-timeout"].(type) {
	case nil:
		return defaultBatchTimeout, nil
	case float64:
		if v >= 0 {
			return time.Duration(v * float64(time.Second)), nil
		}
	}
	return 0, fmt.Errorf("shell option output.batch-timeout=%v: want a number of seconds >= 0", out["batch-timeout"])
}

// after runs fn on the module goroutine after d.
func (j *job) after(d time.Duration, fn func()) {
	if d <= 0 {
		j.x.h.Post(fn)
		return
	}
	time.AfterFunc(d, func() { j.x.h.Post(fn) })
}

// outputLog is the leader shell's writer of a job's output.
type outputLog struct {
	j       *job
	key     string
	batch   time.Duration // output.batch-timeout
	header  []byte        // the encoded header (and redirect) events
	pending []byte        // events not yet handed to the KVS batch
	written bool          // the log is in the KVS (or its batch)
	queued  bool          // a flush is posted
	// spool keeps everything written, to write it all again after a
	// reconnect (resync: the KVS may have lost some of it)
	spool  spool
	resync bool
	// fwdSeq is, by broker rank, the last forwarded request taken
	fwdSeq map[uint]int
	files  [2]*fileTarget
	// open has, per task rank, a bit per stream not yet ended
	open  []uint8
	nopen int // tasks with a stream not yet ended
}

// newOutputLog sets up the leader's output: the header, output files.
func newOutputLog(j *job) (*outputLog, error) {
	o := &outputLog{j: j, key: j.dir + ".guest.output", open: make([]uint8, j.plan.NTasks),
		spool:  spool{path: j.x.opts.dirPath("output-" + strconv.FormatUint(uint64(j.id), 10))},
		fwdSeq: map[uint]int{}}
	for i := range o.open {
		o.open[i] = 3
	}
	o.nopen = len(o.open)
	bt, err := batchTimeout(j.js.ShellOptions())
	if err != nil {
		return nil, err
	}
	o.batch = bt
	var hdr outputHeader
	hdr.Version = 1
	hdr.Encoding.Stdout, hdr.Encoding.Stderr = "UTF-8", "UTF-8"
	hdr.Count.Stdout, hdr.Count.Stderr = j.plan.NTasks, j.plan.NTasks
	b, err := encodeEvent(time.Now(), "header", hdr)
	if err != nil {
		return nil, err
	}
	o.header = b
	opts, _ := j.js.ShellOptions()["output"].(map[string]any)
	mode, _ := opts["mode"].(string)
	switch mode {
	case "", "truncate", "append":
	default:
		return nil, fmt.Errorf("shell option output.mode=%q: want truncate or append", mode)
	}
	for si, stream := range streams {
		st, _ := opts[stream].(map[string]any)
		if st == nil {
			continue
		}
		if t, _ := st["type"].(string); t != "file" {
			continue
		}
		path, _ := st["path"].(string)
		if path == "" {
			continue
		}
		path = j.expandTemplate(path)
		if cwd := j.js.Cwd(); cwd != "" && !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		label, _ := st["label"].(bool)
		ft := &fileTarget{path: path, label: label, partial: map[int][]byte{}}
		if si == 1 && o.files[0] != nil && o.files[0].path == path {
			ft.f = o.files[0].f // both streams to one file
		} else {
			f, err := openOutput(j.cred, path, mode == "append")
			if err != nil {
				o.close()
				return nil, fmt.Errorf("output file %s: %w", path, err)
			}
			ft.f = f
		}
		o.files[si] = ft
		all := make([]int, j.plan.NTasks)
		for i := range all {
			all[i] = i
		}
		b, err := encodeEvent(time.Now(), "redirect", redirectContext{Stream: stream, Rank: rankSet(all), Path: path})
		if err != nil {
			return nil, err
		}
		o.header = append(o.header, b...)
		for i := range o.open {
			o.closeStream(i, si)
		}
	}
	return o, nil
}

// openOutput opens an output file as the job's user.
func openOutput(cred *syscall.Credential, path string, appendMode bool) (*os.File, error) {
	if appendMode {
		return openAsUser(cred, path) // runas.go
	}
	var f *os.File
	err := asUser(cred, func() error {
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
		return err
	})
	return f, err
}

// openInput opens a task's input file as the job's user.
func openInput(cred *syscall.Credential, path string) (*os.File, error) {
	var f *os.File
	err := asUser(cred, func() error {
		var err error
		f, err = os.Open(path)
		return err
	})
	return f, err
}

// expandTemplate fills the mustache tags of an output path: {{id}} or
// {{jobid}} (F58), {{id.ENCODING}} (f58, dec, hex, dothex, words) and
// {{name}} (the job name, or the base name of the command).
func (j *job) expandTemplate(s string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	name := j.js.JobName()
	if name == "" && len(j.js.Tasks) > 0 && len(j.js.Tasks[0].Command) > 0 {
		name = filepath.Base(j.js.Tasks[0].Command[0])
	}
	pairs := []string{"{{id}}", j.id.String(), "{{jobid}}", j.id.String(), "{{name}}", name}
	for _, enc := range []string{"f58", "dec", "hex", "dothex", "words"} {
		v, _ := j.id.Encode(enc)
		pairs = append(pairs, "{{id."+enc+"}}", v, "{{jobid."+enc+"}}", v)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// closeStream records the end of one stream of task rank.
func (o *outputLog) closeStream(rank, si int) {
	if rank < 0 || rank >= len(o.open) || o.open[rank]&(1<<si) == 0 {
		return
	}
	o.open[rank] &^= 1 << si
	if o.open[rank] == 0 {
		o.nopen--
	}
}

// complete reports whether every stream of every task has ended.
func (o *outputLog) complete() bool { return o.nopen == 0 }

// add takes one chunk of output (or the end of a stream) of task rank.
func (o *outputLog) add(stream string, rank int, data []byte, eof bool) {
	si := streamIndex(stream)
	if ft := o.files[si]; ft != nil {
		if len(data) > 0 {
			ft.write(rank, data)
		}
		if eof {
			ft.flushPartial(rank)
		}
		return
	}
	if rank < 0 || rank >= len(o.open) || o.open[rank]&(1<<si) == 0 {
		return // not a stream of this job, or it ended already
	}
	if len(data) > 0 {
		o.pending = appendDataEvent(o.pending, stream, rank, data, false)
		if !o.queued {
			o.queued = true
			o.j.after(o.batch, o.flush)
		}
	}
	if eof {
		o.pending = appendDataEvent(o.pending, stream, rank, nil, true)
		o.closeStream(rank, si)
	}
}

// flush hands pending events to the KVS batch.
func (o *outputLog) flush() {
	o.queued = false
	if len(o.pending) == 0 {
		return
	}
	if !o.j.x.conn.up {
		o.resync = true // kept, and written whole once reconnected
	}
	if !o.written {
		o.written = true
		o.spool.write(o.header)
		o.spool.write(o.pending)
		if !o.resync {
			o.j.x.batch.Put(o.key, append(o.header, o.pending...))
		}
	} else {
		o.spool.write(o.pending)
		if !o.resync {
			o.j.x.batch.Append(o.key, o.pending)
		}
	}
	o.pending = o.pending[:0]
}

// rewrite writes the whole log again (after a reconnect); the job's
// stream says nothing until it is committed.
func (o *outputLog) rewrite() {
	j := o.j
	data, err := o.spool.bytes()
	if err != nil {
		j.x.log.Error("job output: cannot read what was kept", "id", j.id.String(), "err", err)
		return
	}
	o.resync = false
	j.syncing = true
	j.x.batch.Put(o.key, data)
	j.x.batch.AfterCommit(func(err error) {
		j.syncing = false
		if err != nil {
			o.resync = true // the next connection tries again
			return
		}
		j.replay()
	})
}

// handoff returns the whole log when nothing of it has been written (it
// then never will be: the caller writes it).
func (o *outputLog) handoff() []byte {
	if o.written {
		return nil
	}
	o.written = true
	out := append(o.header, o.pending...)
	o.pending = nil
	return out
}

// close closes the output files.
func (o *outputLog) close() {
	for si, ft := range o.files {
		if ft == nil || ft.f == nil {
			continue
		}
		for rank := range ft.partial {
			ft.flushPartial(rank)
		}
		if si == 1 && o.files[0] != nil && o.files[0].f == ft.f {
			continue
		}
		ft.f.Close()
	}
}

// write writes task output to the file, "RANK: " before each line when
// labeling.
func (ft *fileTarget) write(rank int, data []byte) {
	if !ft.label {
		ft.f.Write(data)
		return
	}
	buf := append(ft.partial[rank], data...)
	var out []byte
	prefix := strconv.Itoa(rank) + ": "
	for {
		i := strings.IndexByte(string(buf), '\n')
		if i < 0 {
			break
		}
		out = append(append(out, prefix...), buf[:i+1]...)
		buf = buf[i+1:]
	}
	ft.partial[rank] = append([]byte(nil), buf...)
	if len(out) > 0 {
		ft.f.Write(out)
	}
}

// flushPartial writes a task's unterminated last line (labeling).
func (ft *fileTarget) flushPartial(rank int) {
	if p := ft.partial[rank]; len(p) > 0 {
		ft.f.Write(append(append([]byte(strconv.Itoa(rank)+": "), p...), '\n'))
	}
	delete(ft.partial, rank)
}

// outputChunk is a chunk of output in a job-shell.output request.
type outputChunk struct {
	Stream string `json:"stream"`
	Rank   int    `json:"rank"`
	Data   []byte `json:"data,omitempty"`
	EOF    bool   `json:"eof,omitempty"`
}

// forwarder sends a non-leader shell's output to the leader. A request
// the leader did not take (its broker or ours is down) goes again,
// whole and with the same sequence number, so the leader takes each
// once.
type forwarder struct {
	j        *job
	batch    time.Duration // output.batch-timeout
	pending  []outputChunk
	inflight bool
	queued   bool
	closing  bool
	closed   func()
	seq      int           // of the last request made
	retry    []outputChunk // the chunks of request seq, not yet taken
	retrying bool          // a retry is scheduled
}

// add queues a chunk; data is sent soon, the end of a stream with the
// next data or at the end.
func (fw *forwarder) add(stream string, rank int, data []byte, eof bool) {
	fw.pending = append(fw.pending, outputChunk{Stream: stream, Rank: rank, Data: data, EOF: eof})
	if len(data) > 0 && !fw.queued {
		fw.queued = true
		fw.j.after(fw.batch, fw.send)
	}
}

func (fw *forwarder) send() {
	if fw.inflight {
		return
	}
	if fw.retry == nil {
		if len(fw.pending) == 0 {
			if fw.closing && fw.closed != nil {
				done := fw.closed
				fw.closed = nil
				done()
			}
			return
		}
		fw.queued = false
		fw.retry = fw.pending
		fw.pending = nil
		fw.seq++
	}
	j := fw.j
	if !j.x.conn.up {
		return // sent again once reconnected
	}
	leader := uint32(j.plan.Ranks[0])
	f, err := j.x.h.RPC("job-shell.output", leader, map[string]any{"id": j.id, "rank": j.x.rank, "seq": fw.seq, "output": fw.retry}, 0)
	if err != nil {
		fw.again()
		return
	}
	fw.inflight = true
	f.Then(func(_ *flux.Message, err error) {
		fw.inflight = false
		switch {
		case err == nil:
			fw.retry = nil
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EPROTO):
			// the leader has no such job any more: it will never take it
			j.x.log.Error("output lost: the leader shell did not take it", "id", j.id.String(), "err", err)
			fw.retry = nil
		default:
			fw.again() // a broker on the way is down: later
			return
		}
		if fw.closing || len(fw.pending) > 0 {
			fw.send()
		}
	})
}

// again sends the request not taken again a little later.
func (fw *forwarder) again() {
	if fw.retrying {
		return
	}
	fw.retrying = true
	fw.j.after(250*time.Millisecond, func() {
		fw.retrying = false
		fw.send()
	})
}

// close sends what is left and calls done once the leader has it all.
func (fw *forwarder) close(done func()) {
	fw.closing, fw.closed = true, done
	fw.send()
}

// output takes a chunk of this shell's task output.
func (j *job) output(o shell.Output) {
	switch {
	case j.out != nil:
		j.out.add(o.Stream, o.Rank, o.Data, o.EOF)
		j.maybeReportExit()
	case j.fwd != nil:
		j.fwd.add(o.Stream, o.Rank, o.Data, o.EOF)
	}
}

// outputRequest (leader) takes output forwarded by another shell of the
// job: {id, output: [{stream, rank, data, eof}]}.
func (x *host) outputRequest(r *flux.Request) {
	var req struct {
		ID     jobid.ID      `json:"id"`
		Rank   uint          `json:"rank"`
		Seq    int           `json:"seq"`
		Output []outputChunk `json:"output"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.output is for job shells only")
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok || j.out == nil {
		r.Errorf(syscall.ENOENT, "job %s has no leader shell here", req.ID.String())
		return
	}
	if req.Seq > 0 {
		if req.Seq <= j.out.fwdSeq[req.Rank] {
			r.Respond(nil) // taken already: its response was lost
			return
		}
		j.out.fwdSeq[req.Rank] = req.Seq
	}
	for _, c := range req.Output {
		j.out.add(c.Stream, c.Rank, c.Data, c.EOF)
	}
	r.Respond(nil)
	j.maybeReportExit()
}

// lostRequest (leader) is job-exec saying a shell of the job was lost
// with its broker: {id, rank}. Its tasks' output will not come.
func (x *host) lostRequest(r *flux.Request) {
	var req struct {
		ID   jobid.ID `json:"id"`
		Rank uint     `json:"rank"`
	}
	if r.Decode(&req) != nil || !r.IsOwner() {
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok || j.out == nil {
		return
	}
	if idx := j.plan.Index(req.Rank); idx >= 0 {
		for _, rank := range j.plan.Tasks(idx) {
			j.out.closeStream(rank, 0)
			j.out.closeStream(rank, 1)
		}
	}
	j.maybeReportExit()
}

// encodeEvent encodes one eventlog line stamped t.
func encodeEvent(t time.Time, name string, ctx any) ([]byte, error) {
	ev, err := eventlog.NewAt(t, name, ctx)
	if err != nil {
		return nil, err
	}
	return eventlog.Encode(ev)
}

// appendDataEvent appends an RFC 24 data event (data, or the end of the
// stream) stamped now, with the keys in flux-core's order. Data that is
// not UTF-8 is sent base64-encoded, saying so in the event.
func appendDataEvent(b []byte, stream string, rank int, data []byte, eof bool) []byte {
	b = appendEventHead(b, time.Now(), "data")
	b = append(b, `{"stream":"`...)
	b = append(b, stream...)
	b = append(b, `","rank":"`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	b = append(b, '"')
	if !eof {
		if utf8.Valid(data) {
			b = append(b, `,"data":`...)
			b = jsonwire.AppendPlainString(b, data)
		} else {
			b = append(b, `,"data":"`...)
			b = base64.StdEncoding.AppendEncode(b, data)
			b = append(b, `","encoding":"base64"`...)
		}
	} else {
		b = append(b, `,"eof":true`...)
	}
	return append(b, "}}\n"...)
}

// appendTaskExit appends a shell.task-exit event (flux-core's keys and
// order).
func appendTaskExit(b []byte, t time.Time, e shell.TaskExit) []byte {
	ws := syscall.WaitStatus(e.WaitStatus)
	sig := 0
	if ws.Signaled() {
		sig = int(ws.Signal())
	}
	b = appendEventHead(b, t, "shell.task-exit")
	b = append(b, `{"localid":`...)
	b = strconv.AppendInt(b, int64(e.LocalID), 10)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, int64(e.Rank), 10)
	b = append(b, `,"state":"Exited","pid":`...)
	b = strconv.AppendInt(b, int64(e.PID), 10)
	b = append(b, `,"wait_status":`...)
	b = strconv.AppendInt(b, int64(e.WaitStatus), 10)
	b = append(b, `,"signaled":`...)
	b = strconv.AppendInt(b, int64(sig), 10)
	b = append(b, `,"exitcode":`...)
	b = strconv.AppendInt(b, int64(shell.ExitCode(e.WaitStatus)), 10)
	return append(b, "}}\n"...)
}

// appendShellExit appends a shell-exit event.
func appendShellExit(b []byte, t time.Time, rank uint, status int) []byte {
	b = appendEventHead(b, t, "shell-exit")
	b = append(b, `{"rank":`...)
	b = strconv.AppendUint(b, uint64(rank), 10)
	b = append(b, `,"wait_status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	return append(b, "}}\n"...)
}

// appendEventHead appends `{"timestamp":T,"name":"NAME","context":`.
func appendEventHead(b []byte, t time.Time, name string) []byte {
	b = append(b, `{"timestamp":`...)
	start := len(b)
	b = strconv.AppendFloat(b, float64(t.UnixNano())/1e9, 'g', 17, 64)
	if !strings.ContainsAny(string(b[start:]), ".e") {
		b = append(b, ".0"...)
	}
	b = append(b, `,"name":"`...)
	b = append(b, name...)
	return append(b, `","context":`...)
}

// rankSet formats task ranks as an RFC 22 idset.
func rankSet(ranks []int) string {
	var s idset.Set
	for _, r := range ranks {
		s.Add(uint(r))
	}
	return s.String()
}
