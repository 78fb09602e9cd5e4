// Package jobarchive is the job-archive broker module: it copies every
// inactive job's record (its job-list fields, jobspec, R and eventlog)
// into an SQLite file of plain columns (db.go), which outlives the
// instance's KVS and job purges and feeds usage reports (flux usage).
// Seed 003 asks for job records backed up "in some sort of plain text".
//
// It loads when the configuration has an [archive] table:
//
//	[archive]
//	dbpath = "/var/lib/flux/job-archive.sqlite"  # default: STATEDIR/job-archive.sqlite
//	period = "5s"                                # how often to look for newly inactive jobs
//
// Every period (and when asked: job-archive.sync, and once more as it
// unloads) it lists the jobs that became inactive since the newest one
// archived (job-list.list, every field in one stream), drops those
// archived already (one query for the lot), and, oldest first, a batch
// at a time, reads the rest of each record from the job's KVS directory
// (the batch's lookups all in flight) and inserts the batch in one
// transaction. A job already archived is left as it is, so a restart,
// a crash or an overlap archives none twice; a pass cut short keeps
// the batches it committed.
//
// job-archive.query reads it back for flux usage: a streaming RPC whose
// responses carry up to queryChunk records each ({"records": [...]}),
// ended by ENODATA. The owner reads every user's jobs, anyone else only
// their own (a cluster report, cluster=true, is the owner's). The
// database and the query's payloads are in package archivedb.
package jobarchive

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Name is the module (and service) name.
const Name = "job-archive"

// DefaultPeriod is how often the archive looks for new inactive jobs.
const DefaultPeriod = 5 * time.Second

// overlap is how far before the newest archived job a poll looks again
// (jobs that became inactive in the same instant as it).
const overlap = 1.0

// Config is the [archive] table.
type Config struct {
	DBPath string  `json:"dbpath"`
	Period string  `json:"period"`
	period float64 // seconds
}

// ParseConfig reads the [archive] table of a configuration object;
// statedir fills in the default path.
func ParseConfig(raw json.RawMessage, statedir string) (*Config, error) {
	var top struct {
		Archive *Config `json:"archive"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("[archive]: %w", err)
	}
	c := top.Archive
	if c == nil {
		c = &Config{}
	}
	c.period = DefaultPeriod.Seconds()
	if c.Period != "" {
		d, err := fsd.Parse(c.Period)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("archive.period=%q: want a positive duration (FSD, e.g. 5s)", c.Period)
		}
		c.period = d
	}
	if c.DBPath == "" {
		if statedir == "" {
			return nil, errors.New("archive.dbpath is not set and the instance has no statedir to keep the archive in")
		}
		c.DBPath = filepath.Join(statedir, "job-archive.sqlite")
	}
	return c, nil
}

// Module is the job-archive module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

type archiver struct {
	h     *flux.Handle
	log   *slog.Logger
	cfg   *Config
	db    *sql.DB
	mu    sync.Mutex // one poll at a time
	since float64
	// stats
	archived, polls int
	lastErr         string
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	var raw json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &raw); err != nil {
		return fmt.Errorf("config.get: %w", err)
	}
	statedir, _ := h.Attr(ctx, "statedir")
	cfg, err := ParseConfig(raw, statedir)
	if err != nil {
		return err
	}
	db, err := archivedb.Open(cfg.DBPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	a := &archiver{h: h, log: flux.NewLogger(h, Name), cfg: cfg, db: db}
	if a.since, err = archivedb.LastInactive(ctx, db); err != nil {
		return fmt.Errorf("job archive %s: %w", cfg.DBPath, err)
	}
	h.HandleFunc(Name+".stats", func(r *flux.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		r.Respond(map[string]any{"dbpath": cfg.DBPath, "period": cfg.period, "archived": a.archived,
			"polls": a.polls, "t_inactive": a.since, "error": a.lastErr})
	})
	// sync: archive now, answer when done (the owner only: it is work
	// done on the instance's behalf)
	h.HandleFunc(Name+".sync", func(r *flux.Request) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "only the instance owner may sync the job archive")
			return
		}
		go func() {
			n, err := a.poll(ctx)
			if err != nil {
				r.Errorf(syscall.EIO, "job archive: %v", err)
				return
			}
			r.Respond(map[string]any{"archived": n})
		}()
	})
	h.HandleFunc(Name+".query", func(r *flux.Request) { go a.query(ctx, r) })
	h.HandleFunc(Name+".disconnect", func(*flux.Request) {})
	go func() {
		t := time.NewTicker(time.Duration(cfg.period * float64(time.Second)))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := a.poll(ctx); err != nil && ctx.Err() == nil {
					a.log.Error("archiving inactive jobs", "err", err)
				}
			}
		}
	}()
	err = h.Serve(ctx)
	// unloading (the instance stopping): take the jobs that ended since
	// the last poll while job-list and job-info are still there
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, perr := a.poll(fctx); perr != nil {
		a.log.Warn("final archive pass", "err", perr)
	}
	return err
}

// poll archives the jobs that became inactive since the last one
// archived and returns how many were new.
func (a *archiver) poll(ctx context.Context) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls++
	n, err := a.pollLocked(ctx)
	a.lastErr = ""
	if err != nil {
		a.lastErr = err.Error()
	}
	return n, err
}

func (a *archiver) pollLocked(ctx context.Context) (int, error) {
	req := job.ListRequest{Attrs: []string{"all"}, Since: max(a.since-overlap, 0),
		Constraint: map[string]any{"states": []string{"inactive"}}}
	var jobs []*job.Info
	err := job.ListPages(ctx, a.h, req, func(payload []byte) error {
		return job.DecodeJobs(payload, func(j *job.Info) {
			c := *j
			jobs = append(jobs, &c)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("job-list.list: %w", err)
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	// which are archived already (those of the overlap, or all of
	// them after a crash between an insert and its reply): one query
	// for the lot
	ids := make([]uint64, len(jobs))
	for i, j := range jobs {
		ids[i] = uint64(j.ID)
	}
	have, err := archivedb.Archived(ctx, a.db, ids)
	if err != nil {
		return 0, err
	}
	unarchived := jobs[:0]
	for _, j := range jobs {
		if !have[uint64(j.ID)] {
			unarchived = append(unarchived, j)
		}
	}
	// oldest first, a batch at a time, each batch committed before the
	// next is read: a pass cut short (the deadline of the last one as
	// the module unloads, or a crash) leaves every job that became
	// inactive before the newest archived one archived, so the next
	// pass (or start) that looks from there misses none
	slices.SortStableFunc(unarchived, func(x, y *job.Info) int { return cmp.Compare(x.TInactive, y.TInactive) })
	n := 0
	for start := 0; start < len(unarchived); start += batchJobs {
		batch := unarchived[start:min(start+batchJobs, len(unarchived))]
		recs, err := a.records(ctx, batch)
		if err != nil {
			return n, err
		}
		k, err := archivedb.Insert(ctx, a.db, recs)
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			a.since = max(a.since, r.TInactive)
		}
		n += k
		a.archived += k
	}
	return n, nil
}

// batchJobs is how many jobs' records are read (their KVS lookups all
// in flight at once) and inserted in one transaction.
const batchJobs = 256

// jobKeys are the job's KVS keys a record holds; the last two only
// for a job that was given resources.
var jobKeys = [...]string{"jobspec", "eventlog", "R", "guest.usage"}

// records reads the rest of each job's record from the KVS: every
// lookup of the batch sent before the first answer is read (the
// module runs as the instance owner, so it reads the job directories
// itself rather than through job-info, one request per key).
func (a *archiver) records(ctx context.Context, jobs []*job.Info) ([]archivedb.Record, error) {
	futs := make([]*flux.Future, 0, len(jobs)*len(jobKeys))
	waited := 0
	defer func() {
		// abandon the lookups not waited for (an error cut it short)
		for _, f := range futs[waited:] {
			if f != nil {
				f.Close()
			}
		}
	}()
	for _, j := range jobs {
		keys := jobKeys[:2]
		if ran(j) {
			keys = jobKeys[:]
		}
		for k := range jobKeys {
			var f *flux.Future
			if k < len(keys) {
				var err error
				if f, err = kvs.LookupAsync(a.h, kvs.PrimaryNamespace, 0, job.KVSKey(j.ID, jobKeys[k])); err != nil {
					return nil, fmt.Errorf("job %s: %s: %w", j.ID.String(), jobKeys[k], err)
				}
			}
			futs = append(futs, f)
		}
	}
	out := make([]archivedb.Record, 0, len(jobs))
	var vals [len(jobKeys)]string
	for i, j := range jobs {
		var gone error
		for k := range jobKeys {
			f := futs[i*len(jobKeys)+k]
			waited++
			vals[k] = ""
			if f == nil {
				continue
			}
			v, err := lookupValue(ctx, f, jobKeys[k])
			switch {
			case err == nil:
				vals[k] = v
			case errors.Is(err, syscall.ENOENT) && k >= 2:
				// no R (an exception before the alloc) or no usage
				// measured
			case errors.Is(err, syscall.ENOENT):
				gone = err
			default:
				return nil, fmt.Errorf("job %s: %w", j.ID.String(), err)
			}
		}
		// a job purged between the list and the lookup is skipped, not
		// fatal
		if gone != nil {
			a.log.Warn("job gone before it was archived", "id", j.ID.String(), "err", gone)
			continue
		}
		out = append(out, record(j, vals[0], vals[1], vals[2], vals[3]))
	}
	return out, nil
}

// ran reports whether the job may have an R (and usage) in the KVS.
func ran(j *job.Info) bool { return j.TRun > 0 || j.Nnodes > 0 }

// lookupValue waits for a kvs.lookup and returns its value as text.
// The response is read as just the val object's type and base64 data
// (the KVS resolves valrefs), not decoded into a tree object.
func lookupValue(ctx context.Context, f *flux.Future, key string) (string, error) {
	m, err := f.Get(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	var resp struct {
		Val *struct {
			Type string `json:"type"`
			Data string `json:"data"`
		} `json:"val"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		return "", fmt.Errorf("%s: kvs.lookup response: %w", key, err)
	}
	if resp.Val == nil || resp.Val.Type != "val" {
		return "", fmt.Errorf("%s: kvs.lookup answered no value: %w", key, syscall.EPROTO)
	}
	v, err := base64.StdEncoding.DecodeString(resp.Val.Data)
	if err != nil {
		return "", fmt.Errorf("%s: kvs.lookup value is not base64: %w", key, syscall.EPROTO)
	}
	return string(v), nil
}

var usernames sync.Map

func username(uid uint32) string {
	if n, ok := usernames.Load(uid); ok {
		return n.(string)
	}
	n := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(n); err == nil {
		n = u.Username
	}
	usernames.Store(uid, n)
	return n
}

// record is a job's archive row: its job-list fields and the texts of
// its KVS keys.
func record(j *job.Info, jobspec, eventlog, R, usage string) archivedb.Record {
	r := archivedb.Record{ID: uint64(j.ID), Jobid: j.ID.String(), Userid: j.Userid, Username: username(j.Userid),
		Name: j.Name, Queue: j.Queue, Bank: j.Bank, Project: j.Project, Result: j.Result.String(),
		TSubmit: j.TSubmit, TRun: j.TRun, TCleanup: j.TCleanup, TInactive: j.TInactive, Duration: j.Duration,
		Ntasks: j.Ntasks, Nnodes: j.Nnodes, Ncores: j.Ncores, Ranks: j.Ranks, Nodelist: j.Nodelist, Cwd: j.Cwd,
		Jobspec: jobspec, Eventlog: eventlog}
	if j.ExceptionOccurred {
		r.ExceptionType, r.ExceptionNote = j.ExceptionType, j.ExceptionNote
	}
	if j.Has.Has(job.AttrWaitstatus) {
		ws, code := int64(j.Waitstatus), int64(job.WaitstatusToExitCode(j.Waitstatus))
		r.Waitstatus, r.ExitCode = &ws, &code
	}
	if ran(j) {
		r.R = R
		if rs, err := rset.Parse([]byte(R)); err == nil {
			r.Ngpus = rs.NGPUs()
		}
		// peak memory and CPU time from the job's cgroups, when the
		// shells measured them (issue 24)
		r.SetUsage(usage)
	}
	return r
}
