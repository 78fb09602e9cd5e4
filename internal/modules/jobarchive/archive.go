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
// archived (job-list.list), fetches the rest of each record
// (job-info.lookup) and inserts them in one transaction. A job already
// archived is left as it is, so a restart or an overlap costs nothing.
//
// job-archive.query reads it back for flux usage: a streaming RPC whose
// responses carry up to queryChunk records each ({"records": [...]}),
// ended by ENODATA. The owner reads every user's jobs, anyone else only
// their own (a cluster report, cluster=true, is the owner's). The
// database and the query's payloads are in package archivedb.
package jobarchive

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
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
	var unarchived []*job.Info
	for _, j := range jobs {
		has, err := archivedb.Has(ctx, a.db, uint64(j.ID))
		if err != nil {
			return 0, err
		}
		if !has {
			unarchived = append(unarchived, j)
		}
	}
	if len(unarchived) == 0 {
		return 0, nil
	}
	recs, err := a.records(ctx, unarchived)
	if err != nil {
		return 0, err
	}
	n, err := archivedb.Insert(ctx, a.db, recs)
	if err != nil {
		return 0, err
	}
	for _, r := range recs {
		a.since = max(a.since, r.TInactive)
	}
	a.archived += n
	return n, nil
}

// lookupWindow bounds the job-info lookups in flight.
const lookupWindow = 128

// records fetches the rest of each job's record.
func (a *archiver) records(ctx context.Context, jobs []*job.Info) ([]archivedb.Record, error) {
	out := make([]archivedb.Record, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, lookupWindow)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = a.record(ctx, j)
		}()
	}
	wg.Wait()
	// a job purged between the list and the lookup is skipped, not fatal
	kept := out[:0]
	for i, r := range out {
		switch {
		case errs[i] == nil:
			kept = append(kept, r)
		case errors.Is(errs[i], syscall.ENOENT):
			a.log.Warn("job gone before it was archived", "id", jobs[i].ID.String())
		default:
			return nil, errs[i]
		}
	}
	return kept, nil
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

func (a *archiver) record(ctx context.Context, j *job.Info) (archivedb.Record, error) {
	r := archivedb.Record{ID: uint64(j.ID), Jobid: j.ID.String(), Userid: j.Userid, Username: username(j.Userid),
		Name: j.Name, Queue: j.Queue, Bank: j.Bank, Project: j.Project, Result: j.Result.String(),
		TSubmit: j.TSubmit, TRun: j.TRun, TCleanup: j.TCleanup, TInactive: j.TInactive, Duration: j.Duration,
		Ntasks: j.Ntasks, Nnodes: j.Nnodes, Ncores: j.Ncores, Ranks: j.Ranks, Nodelist: j.Nodelist, Cwd: j.Cwd}
	if j.ExceptionOccurred {
		r.ExceptionType, r.ExceptionNote = j.ExceptionType, j.ExceptionNote
	}
	if j.Has.Has(job.AttrWaitstatus) {
		ws, code := int64(j.Waitstatus), int64(job.WaitstatusToExitCode(j.Waitstatus))
		r.Waitstatus, r.ExitCode = &ws, &code
	}
	var texts struct {
		Jobspec  string `json:"jobspec"`
		Eventlog string `json:"eventlog"`
	}
	if err := a.h.Call(ctx, "job-info.lookup", flux.NodeidAny,
		map[string]any{"id": j.ID, "keys": []string{"jobspec", "eventlog"}, "flags": 0}, &texts); err != nil {
		return r, fmt.Errorf("job %s: %w", r.Jobid, err)
	}
	r.Jobspec, r.Eventlog = texts.Jobspec, texts.Eventlog
	if j.TRun > 0 || j.Nnodes > 0 {
		var R struct {
			R string `json:"R"`
		}
		err := a.h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": j.ID, "keys": []string{"R"}, "flags": 0}, &R)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return r, fmt.Errorf("job %s: R: %w", r.Jobid, err)
		}
		r.R = R.R
		if rs, err := rset.Parse([]byte(R.R)); err == nil {
			r.Ngpus = rs.NGPUs()
		}
		// peak memory and CPU time from the job's cgroups, when the
		// shells measured them (issue 24)
		var u struct {
			Usage string `json:"guest.usage"`
		}
		err = a.h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": j.ID, "keys": []string{"guest.usage"}, "flags": 0}, &u)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return r, fmt.Errorf("job %s: guest.usage: %w", r.Jobid, err)
		}
		r.SetUsage(u.Usage)
	}
	return r, nil
}
