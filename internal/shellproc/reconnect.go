package shellproc

// Outliving the broker. A shell's connection to its broker ends when the
// broker stops, crashes or restarts. The shell then keeps its tasks
// running and what they produce: output is kept by the leader (its whole
// log, in memory and past spoolMemory in a file, see spool.go) and by
// the other shells (chunks not yet taken by the leader), exits and exec
// events in each job's stream log (job.said). Every 50-500 ms it reads
// the broker's current URI from its shell directory (broker.uri, written
// by the job-shell module as it loads) and connects again. Then it
// registers its services again, says hello to the job-shell module with
// the jobs it holds, rewrites the output eventlog of the jobs it leads
// (the KVS may have lost what was written after rank 0's last checkpoint)
// and answers job-exec's attach requests by saying again everything it
// had said.
//
// A shell gives up, killing its tasks, when its shell directory is
// removed (the instance is gone for good) or no broker came back within
// job-shell.reconnect-timeout (default 1h; 1m for a shell holding only
// ended jobs). A shell with no job at all exits when its broker goes.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/internal/shellrecord"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// connState is the state of the shell's connection (Serve goroutine).
type connState struct {
	up     bool
	lostAt time.Time
	// timeout is job-shell.reconnect-timeout
	timeout time.Duration
}

const (
	// EndedLinger is how long, once connected, an ended job's record
	// is kept for a restarted job-exec that lost its end (the job-shell
	// module keeps its own record of the job as long).
	EndedLinger = 15 * time.Second
	// endedOnlyTimeout bounds the wait for a broker of a shell that
	// holds only ended jobs.
	endedOnlyTimeout = time.Minute
	// defaultReconnectTimeout is job-shell.reconnect-timeout's default
	// (see readTimeout), and noStatedirTimeout its default in an
	// instance without a statedir.
	defaultReconnectTimeout = time.Hour
	noStatedirTimeout       = 10 * time.Second
)

// BrokerURIFile is the file of a shell directory holding the broker's
// current local URI.
const BrokerURIFile = "broker.uri"

// A shell's record in its directory is package shellrecord's: the
// broker's run directory cleanup reads records too, without the rest of
// the shell.
type Record = shellrecord.Record

// RecordName, ParseRecord and ReadRecord are shellrecord's.
var (
	RecordName  = shellrecord.Name
	ParseRecord = shellrecord.Parse
	ReadRecord  = shellrecord.Read
)

// writeRecord writes the shell's record into its directory.
func (x *host) writeRecord() error {
	st, err := procfs.StartTime(os.Getpid())
	if err != nil {
		return err
	}
	rec := Record{PID: os.Getpid(), StartTime: st, Userid: uint32(os.Getuid())}
	path := x.opts.dirPath(RecordName(rec.PID))
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(rec.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (x *host) removeRecord() {
	os.Remove(x.opts.dirPath(RecordName(os.Getpid())))
}

// readTimeout reads job-shell.reconnect-timeout. Its default: an hour
// in an instance that can restart (a statedir); elsewhere no broker
// but one started again by hand can come back, and the shell waits as
// long as job-exec waits for it (job-exec.reattach-timeout, 10s), so
// that a job job-exec gave up leaves nothing running.
func (x *host) readTimeout(ctx context.Context) {
	x.conn.timeout = defaultReconnectTimeout
	if sd, _ := x.h.Attr(ctx, "statedir"); sd == "" {
		x.conn.timeout = noStatedirTimeout
		if v, err := x.h.Attr(ctx, "job-exec.reattach-timeout"); err == nil && v != "" {
			if d, err := fsd.ParseDuration(v); err == nil && d > 0 {
				x.conn.timeout = d
			}
		}
	}
	if v, err := x.h.Attr(ctx, "job-shell.reconnect-timeout"); err == nil && v != "" {
		if d, err := fsd.ParseDuration(v); err == nil && d > 0 {
			x.conn.timeout = d
		} else {
			x.log.Warn("job-shell.reconnect-timeout: want a duration (FSD); using the default", "value", v)
		}
	}
}

// connected runs on each connection to a broker (the first and each
// after a reconnect): the shell's services, then hello to the module.
func (x *host) connected(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := x.h.RegisterService(ctx, x.svc); err != nil {
		return fmt.Errorf("registering %s: %w", x.svc, err)
	}
	for svc, j := range x.services {
		if err := x.h.RegisterService(ctx, svc); err != nil {
			x.log.Warn("cannot register shell service again", "service", svc, "job", j.id.String(), "err", err)
		}
	}
	x.conn.up = true
	x.readTimeout(ctx)
	if err := x.h.Call(ctx, "job-shell.hello", uint32(x.rank), x.hello(), nil); err != nil {
		return fmt.Errorf("job-shell.hello: %w", err)
	}
	return nil
}

// Hello is what a shell tells the job-shell module of itself
// (job-shell.hello, and its answer to the module's SERVICE.hello).
type Hello struct {
	PID     int        `json:"pid"`
	Userid  uint32     `json:"userid"`
	Service string     `json:"service"`
	Jobs    []jobid.ID `json:"jobs"`  // running
	Ended   []jobid.ID `json:"ended"` // ended, kept for a late attach
}

func (x *host) hello() Hello {
	m := Hello{PID: os.Getpid(), Userid: uint32(os.Getuid()), Service: x.svc, Jobs: []jobid.ID{}, Ended: []jobid.ID{}}
	for id := range x.jobs {
		m.Jobs = append(m.Jobs, id)
	}
	for id := range x.ended {
		m.Ended = append(m.Ended, id)
	}
	return m
}

// watch follows the connection: when it is lost, it looks for a broker
// until one takes the shell back or the shell gives up.
func (x *host) watch(ctx context.Context) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			x.h.Post(x.purgeEnded)
			continue
		case <-x.h.Done():
		}
		x.h.Post(x.disconnected)
		delay := 50 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 500*time.Millisecond)
			x.h.Post(x.checkGiveUp)
			b, err := os.ReadFile(x.opts.dirPath(BrokerURIFile))
			if err != nil {
				continue
			}
			c, err := flux.DialLocal(strings.TrimSpace(string(b)))
			if err != nil {
				continue
			}
			if err := x.h.Reconnect(c); err != nil {
				c.Close()
				continue
			}
			done := make(chan struct{})
			x.h.Post(func() {
				defer close(done)
				x.reconnected(ctx)
			})
			select {
			case <-done:
			case <-ctx.Done():
				return
			}
			break
		}
	}
}

// disconnected: the broker went away.
func (x *host) disconnected() {
	if !x.conn.up {
		return
	}
	x.conn.up = false
	x.conn.lostAt = time.Now()
	if len(x.jobs) == 0 && len(x.ended) == 0 {
		x.stop() // nothing to keep: a new broker starts new shells
		return
	}
	for _, j := range x.jobs {
		j.req = nil
		if j.out != nil && j.out.written {
			j.out.resync = true
		}
	}
	for _, j := range x.ended {
		j.req = nil
		if j.out != nil && j.out.written {
			j.out.resync = true
		}
	}
}

// checkGiveUp ends the shell when no broker can come back for it.
func (x *host) checkGiveUp() {
	if x.conn.up {
		return
	}
	// its own record goes with the directory (a directory reached by
	// descriptor is still there when removed: what is in it is not)
	if _, err := os.Stat(x.opts.dirPath(RecordName(os.Getpid()))); os.IsNotExist(err) {
		x.giveUp(fmt.Sprintf("the shell directory %s was removed: the instance is gone", x.opts.Dir))
		return
	}
	limit := x.conn.timeout
	if len(x.jobs) == 0 && x.endsReported() {
		// only records of ends job-exec heard of while connected: a
		// safety net, not worth keeping long
		limit = min(limit, endedOnlyTimeout)
	}
	if time.Since(x.conn.lostAt) > limit {
		x.giveUp(fmt.Sprintf("no broker came back within %v", limit))
	}
}

// endsReported reports whether every ended job this shell keeps ended
// while a broker was connected (its end reached job-exec, or would have
// but for a crash just then); an end no one has heard of is kept as long
// as a running job.
func (x *host) endsReported() bool {
	for _, j := range x.ended {
		if !j.endedAt.Before(x.conn.lostAt) {
			return false
		}
	}
	return true
}

// giveUp kills the shell's tasks, removes their temporary directories
// and ends the shell.
func (x *host) giveUp(why string) {
	if x.opts.Log != nil {
		x.opts.Log.Error("job shell giving up: "+why, "jobs", len(x.jobs))
	}
	for _, j := range x.jobs {
		j.signal(syscall.SIGKILL)
	}
	for _, j := range x.jobs {
		if j.sh != nil {
			select {
			case <-j.sh.Done():
			case <-time.After(2 * time.Second):
			}
		}
		j.removeTmpdir()
	}
	x.stop()
}

// reconnected runs once a broker took the shell back.
func (x *host) reconnected(ctx context.Context) {
	// a connection the shell could not settle on is dropped: the watch
	// loop tries again
	if err := x.learnBroker(ctx); err != nil {
		x.log.Error("reconnected, but the broker does not answer", "err", err)
		x.h.Close()
		return
	}
	if err := x.connected(ctx); err != nil {
		x.log.Error("reconnected, but the job-shell module did not take the shell back", "err", err)
		x.h.Close()
		return
	}
	x.log.Info(fmt.Sprintf("job shell reconnected after %v", time.Since(x.conn.lostAt).Round(time.Millisecond)),
		"jobs", len(x.jobs), "ended", len(x.ended))
	now := time.Now()
	for _, j := range x.ended {
		j.endedAt = now
		if j.out != nil && j.out.resync {
			j.out.rewrite()
		}
	}
	for _, j := range x.jobs {
		if j.out != nil && j.out.resync {
			j.out.rewrite()
		}
		if j.fwd != nil {
			j.fwd.send()
		}
	}
}

// keepEnded keeps an ended job's record for a late attach.
func (x *host) keepEnded(j *job) {
	j.endedAt = time.Now()
	j.req = nil
	x.ended[j.id] = j
}

// purgeEnded drops the records of jobs ended long enough ago, while a
// broker is connected.
func (x *host) purgeEnded() {
	if !x.conn.up {
		return
	}
	for id, j := range x.ended {
		if time.Since(j.endedAt) > EndedLinger {
			delete(x.ended, id)
			if j.out != nil {
				j.out.spool.remove()
			}
		}
	}
}
