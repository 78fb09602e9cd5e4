// Package joblist is the job-list broker module (RFC 43): an in-memory
// index of every job, built from the job manager's events journal and, at
// load, from the KVS records of inactive jobs the job manager no longer
// holds (taken from the module's snapshot file where it has them,
// snapshot.go). It serves job-list.list (filtered, ordered listings streamed in
// chunks), job-list.list-id, job-list.list-attrs and job-list.job-stats.
//
// Records are compact summaries (no jobspec or R is kept), so an
// instance with tens of thousands of inactive jobs stays small.
package joblist

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/internal/memo"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/snapfile"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Name is the module and service name.
const Name = "job-list"

// Config is the module configuration (module arguments key=value).
type Config struct {
	// Private limits guests to their own jobs (default: every user sees
	// the public fields of every job). Argument private=1, or the broker
	// attribute job-list.private=1.
	Private bool
	// ChunkJobs is how many jobs one job-list.list response carries at
	// most (default 1024).
	ChunkJobs int
	// RestoreWorkers is how many KVS reads of inactive jobs run in
	// parallel at load (default 64).
	RestoreWorkers int
	// NoRestore skips reading inactive jobs from the KVS at load.
	NoRestore bool
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ChunkJobs: 1024, RestoreWorkers: 64}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.ChunkJobs < 1 {
		return fmt.Errorf("job-list: chunk-jobs=%d: must be at least 1", c.ChunkJobs)
	}
	if c.RestoreWorkers < 1 {
		return fmt.Errorf("job-list: restore-workers=%d: must be at least 1", c.RestoreWorkers)
	}
	return nil
}

func parseArgs(args []string) (Config, error) {
	c := DefaultConfig()
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "private":
			c.Private = v == "" || v == "1" || v == "true"
		case "no-restore":
			c.NoRestore = v == "" || v == "1" || v == "true"
		case "chunk-jobs", "restore-workers":
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, fmt.Errorf("job-list: %s=%q: not an integer", k, v)
			}
			if k == "chunk-jobs" {
				c.ChunkJobs = n
			} else {
				c.RestoreWorkers = n
			}
		default:
			return c, fmt.Errorf("job-list: unknown argument %q", a)
		}
	}
	return c, c.Validate()
}

// Module is the job-list module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	cfg, err := parseArgs(args)
	if err != nil {
		return err
	}
	if v, err := h.Attr(ctx, "job-list.private"); err == nil && (v == "1" || v == "true") {
		cfg.Private = true
	}
	s := newService(ctx, h, flux.NewLogger(h, Name), cfg)
	s.privateFixed = cfg.Private
	if err := s.loadPrivate(ctx); err != nil { // private.go
		return err
	}
	s.register()
	if err := h.OnOwnerEvent(ctx, "job-purge-inactive", s.purgeEvent); err != nil {
		return fmt.Errorf("subscribing to job-purge-inactive: %w", err)
	}
	if err := h.OnOwnerEvent(ctx, "job-manager.online", s.jmOnline); err != nil {
		return fmt.Errorf("subscribing to job-manager.online: %w", err)
	}
	if dir, _ := h.Attr(ctx, "statedir"); dir != "" {
		s.snap.Path = filepath.Join(dir, snapshotFile)
	}
	s.subscribe()
	err = h.Serve(ctx)
	s.stop()
	s.snap.Final()
	return err
}

// service owns the index; every method runs on the Serve goroutine
// except the restore workers, which hand their results over with Post.
type service struct {
	pause pauseState // pause.go
	ctx   context.Context
	h     *flux.Handle
	log   *slog.Logger
	cfg   Config
	// privateFixed: private mode from the module's arguments or the
	// job-list.private attribute, on whatever [access] says (private.go)
	privateFixed bool
	idx          *index

	journal     *flux.Future
	backlogDone bool // journal backlog (full=true) received
	// backlogSeen: the jobs in the current subscription's backlog
	backlogSeen map[jobid.ID]struct{}
	// backlogInactive: the backlog's inactive jobs (entries without
	// events, see reconcile)
	backlogInactive []jobid.ID
	restoring       bool        // KVS restore running
	ready           bool        // backlog received: requests are served
	catchUpTimer    *time.Timer // see catchUp
	deferred        []*flux.Request
	waiters         map[uint64][]*idWaiter
	retryDelay      float64
	purged          int // inactive jobs dropped on job-purge-inactive
	purgedByQueue   map[string]int
	idLookups       int // list-id requests (flux module stats job-list)
	stopRestore     context.CancelFunc
	restoreWait     chan struct{}
	stats           restoreStats
	specs           *memo.Cache[specFields] // jobspecs summarized, by text
	// purgedWhileRestoring: jobs purged while the restore runs, which it
	// must not add back
	purgedWhileRestoring map[jobid.ID]struct{}
	snap                 *snapfile.Keeper // snapshot_write.go
}

func newService(ctx context.Context, h *flux.Handle, log *slog.Logger, cfg Config) *service {
	s := &service{
		ctx:     ctx,
		h:       h,
		log:     log,
		cfg:     cfg,
		idx:     newIndex(),
		waiters: make(map[uint64][]*idWaiter),
		specs:   memo.New[specFields](256),
	}
	s.snap = s.newSnapshotKeeper("")
	return s
}

func (s *service) register() {
	s.h.HandleFunc(Name+".list", s.handleList)
	s.h.HandleFunc(Name+".list-id", s.handleListID)
	s.h.HandleFunc(Name+".list-attrs", s.handleListAttrs)
	s.h.HandleFunc(Name+".job-stats", s.handleStats)
	s.h.HandleFunc(Name+".stats-get", s.handleModuleStats)
	s.h.HandleFunc(Name+".disconnect", s.handleDisconnect)
	s.h.HandleFunc(Name+".job-state-pause", s.handlePause)     // pause.go
	s.h.HandleFunc(Name+".job-state-unpause", s.handleUnpause) // pause.go
	s.h.HandleFunc(Name+".config-reload", s.configReload)      // private.go
}

// purgeEvent drops the jobs the job manager purged
// (job-purge-inactive {jobs:[id, ...]}).
func (s *service) purgeEvent(m *flux.Message) {
	var ev struct {
		Jobs []jobid.ID `json:"jobs"`
	}
	if err := m.UnmarshalPayload(&ev); err != nil {
		s.log.Error("job-purge-inactive: " + err.Error())
		return
	}
	for _, id := range ev.Jobs {
		if s.restoring {
			if s.purgedWhileRestoring == nil {
				s.purgedWhileRestoring = make(map[jobid.ID]struct{})
			}
			s.purgedWhileRestoring[id] = struct{}{}
		}
		if r := s.idx.jobs[id]; r != nil && r.State == job.StateInactive {
			if q := r.lab().queue; q != "" {
				if s.purgedByQueue == nil {
					s.purgedByQueue = make(map[string]int)
				}
				s.purgedByQueue[q]++
			}
			s.idx.remove(r)
			s.purged++
			s.snap.Changed(1)
		}
	}
}

// stop ends the restore workers (reverse of start order).
func (s *service) stop() {
	if s.stopRestore != nil {
		s.stopRestore()
		<-s.restoreWait
	}
}

// setReady serves the requests that arrived during start-up. Requests
// wait for the journal backlog (every active job) and for the KVS
// restore of old inactive jobs: a listing right after a restart is then
// complete, never silently short (as flux-core's job-list, which reads
// them before it serves).
func (s *service) setReady() {
	if s.ready || !s.backlogDone || s.restoring {
		return
	}
	s.ready = true
	s.log.Debug("job-list ready", "jobs", len(s.idx.jobs), "restored", s.stats.restored)
	d := s.deferred
	s.deferred = nil
	for _, r := range d {
		s.dispatch(r)
	}
	s.checkAllWaiters()
}

func (s *service) dispatch(r *flux.Request) {
	switch r.Topic() {
	case Name + ".list":
		s.handleList(r)
	case Name + ".list-id":
		s.handleListID(r)
	case Name + ".list-attrs":
		s.handleListAttrs(r)
	default:
		s.handleStats(r)
	}
}

// deferUntilReady queues r if the index is still being built.
func (s *service) deferUntilReady(r *flux.Request) bool {
	if s.ready {
		return false
	}
	s.deferred = append(s.deferred, r)
	return true
}
