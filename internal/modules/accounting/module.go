// Package accounting is the accounting broker module (rank 0): it owns
// the instance's accounting database (package internal/accounting) and
// serves flux account. The instance owner manages banks, users and
// projects; every user may read the banks, the projects and their own
// associations. After every change, and when it starts, it sends the
// enforcers (job-ingest, the job manager's .accounting-limits plugin) a
// snapshot of the database, and answers a change only once they have
// it: when flux account add-user returns, the user's jobs are charged
// by the new rules. A job manager loaded again (its job-manager.online
// event) is sent the snapshot and the fair-share factors anew.
//
// The database is an SQLite file, STATEDIR/accounting.sqlite (RUNDIR's
// without a statedir), or the module argument dbpath=PATH. It is made
// by the first change: an instance that never uses flux account has no
// file and enforces nothing.
package accounting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the module (and service) name.
const Name = acct.Service

// DBFile is the database's file name in the statedir.
const DBFile = "accounting.sqlite"

// Module is the accounting module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

type server struct {
	h     *flux.Handle
	log   *slog.Logger
	path  string
	pg    pgArgs     // a PostgreSQL database instead of the file
	store acct.Store // nil until the file exists
	fs    FairShareConfig
	// usageMark: the newest t_inactive the usage history has (history.go)
	usageMark float64
	// fair is the last fair-share pass's, for view-user
	fair map[acct.AssocKey]acct.FairShareEntry
}

// parseArgs reads dbpath=PATH, or database=URL and cluster=NAME.
func parseArgs(args []string) (string, pgArgs, error) {
	var path string
	var pg pgArgs
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "dbpath":
			path = v
		case "database":
			pg.url = v
		case "cluster":
			pg.cluster = v
		default:
			return "", pg, fmt.Errorf("accounting: unknown option %q (want dbpath=PATH, or database=URL cluster=NAME)", a)
		}
	}
	return path, pg, pg.check(path)
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	path, pg, err := parseArgs(args)
	if err != nil {
		return err
	}
	dbpath := path
	if path == "" {
		dir, _ := h.Attr(ctx, "statedir")
		if dir == "" {
			if dir, err = h.Attr(ctx, "rundir"); err != nil {
				return fmt.Errorf("accounting: neither statedir nor rundir: %w", err)
			}
		}
		path = filepath.Join(dir, DBFile)
	}
	var raw json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &raw); err != nil {
		return fmt.Errorf("config.get: %w", err)
	}
	fs, err := parseFairShareConfig(raw)
	if err != nil {
		return err
	}
	if pg, err = pg.fromConfig(raw, dbpath); err != nil {
		return err
	}
	s := &server{h: h, log: flux.NewLogger(h, Name), path: path, pg: pg, fs: fs}
	defer func() {
		if s.store != nil {
			s.store.Close()
		}
	}()
	if _, err := os.Stat(path); err == nil || pg.url != "" {
		if err := s.open(ctx); err != nil {
			return err
		}
		s.push(ctx)
	}
	s.handlers(ctx)
	// a job manager loaded again (flux module reload job-manager) has
	// lost the database and the fair-share factors its plugins held
	if err := h.OnOwnerEvent(ctx, "job-manager.online", func(*flux.Message) { s.jmOnline(ctx) }); err != nil {
		return fmt.Errorf("accounting: subscribing to job-manager.online: %w", err)
	}
	defer s.fairShareLoop(ctx)()
	return h.Serve(ctx)
}

func (s *server) open(ctx context.Context) error {
	if s.store != nil {
		return nil
	}
	var st acct.Store
	var err error
	if s.pg.url != "" {
		st, err = acct.OpenPostgres(ctx, s.pg.url, s.pg.cluster)
	} else {
		st, err = acct.OpenSQLite(ctx, s.path)
	}
	if err != nil {
		return err
	}
	s.store = st
	return nil
}

// snapshot reads what the enforcers need.
func (s *server) snapshot(ctx context.Context) (acct.Snapshot, error) {
	snap := acct.Snapshot{Associations: []acct.Association{}, Projects: []string{}}
	if s.store == nil {
		return snap, nil
	}
	as, err := s.store.Associations(ctx, "")
	if err != nil {
		return snap, err
	}
	ps, err := s.store.Projects(ctx)
	if err != nil {
		return snap, err
	}
	snap.Associations = as
	for _, p := range ps {
		snap.Projects = append(snap.Projects, p.Name)
	}
	return snap, nil
}

// push sends the enforcers the database as it is now. An enforcer that
// is not loaded (ENOSYS) is skipped: it asks for a snapshot when it
// starts.
func (s *server) push(ctx context.Context) error {
	snap, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, topic := range []string{acct.IngestUpdateTopic, acct.LimitsUpdateTopic} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.h.Call(cctx, topic, flux.NodeidAny, snap, nil)
		cancel()
		if err != nil && flux.ErrnoOf(err) != syscall.ENOSYS {
			s.log.Error("sending the accounting database", "topic", topic, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", topic, err))
		}
	}
	// new associations get their fair-share now, not at the next pass
	if _, err := s.updateFairShare(ctx); err != nil {
		s.log.Warn("fair-share pass", "err", err)
	}
	return errors.Join(errs...)
}

// jmOnline sends a job manager that has just started (or was reloaded)
// what its plugins hold of the database: the snapshot for
// .accounting-limits and the fair-share factors for mf-priority. A job
// manager that has not loaded the plugin answers ENOSYS, which is
// skipped.
func (s *server) jmOnline(ctx context.Context) {
	if s.store == nil {
		return // no database: nothing to enforce
	}
	snap, err := s.snapshot(ctx)
	if err != nil {
		s.log.Error("reading the accounting database for the job manager", "err", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = s.h.Call(cctx, acct.LimitsUpdateTopic, flux.NodeidAny, snap, nil)
	cancel()
	if err != nil && flux.ErrnoOf(err) != syscall.ENOSYS {
		s.log.Error("sending the accounting database to the job manager", "topic", acct.LimitsUpdateTopic, "err", err)
	}
	if _, err := s.updateFairShare(ctx); err != nil {
		s.log.Warn("fair-share pass", "err", err)
	}
}

// write serves a change with request payload T: the owner's only; the
// enforcers have it before the answer.
func write[T any](ctx context.Context, s *server, what string, fn func(req *T) (any, error)) flux.HandlerFunc {
	return func(r *flux.Request) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "%s: only the instance owner may change the accounting database", what)
			return
		}
		req := new(T)
		if len(r.Msg.JSON()) > 0 && r.Decode(req) != nil {
			return
		}
		if err := s.open(ctx); err != nil {
			r.Errorf(syscall.EIO, "%v", err)
			return
		}
		resp, err := fn(req)
		if err != nil {
			r.RespondError(err)
			return
		}
		if err := s.push(ctx); err != nil {
			r.Errorf(syscall.EIO, "%s: saved, but not yet enforced: %v", what, err)
			return
		}
		r.Respond(resp)
	}
}
