// Package contentsqlite is the "content-sqlite" broker module: the
// content store's backing store on rank 0, one SQLite database
// (modernc.org/sqlite, pure Go). It registers the content-backing service
// besides its own and announces itself to the content module with
// content.register-backing.
//
// Services (payloads as flux-core's content-sqlite):
//
//	content-backing.load            raw digest → raw blob, or ENOENT
//	content-backing.store           raw blob → raw digest
//	content-backing.store-batch     many blobs → their digests (pkg/flux/content/batch.go)
//	content-backing.checkpoint-get  {"key":K} → {"value":V}, or ENOENT
//	content-backing.checkpoint-put  {"key":K,"value":V} → (no payload)
//	content-sqlite.stats-get        → {"object_count":N, ...}
//
// The database is <statedir>/content.sqlite when the statedir attribute
// is set (journal_mode=WAL, synchronous=NORMAL: a committed store
// survives a crash of the broker; synchronous=FULL also survives power
// loss), otherwise <rundir>/content.sqlite, a scratch file with
// journal_mode=MEMORY and synchronous=OFF that is removed at unload.
// Every blob read back is hashed and compared with its digest, so a
// damaged row is an EIO error, never wrong data.
//
// Requests are answered on the module's Serve goroutine; database work
// happens on one worker goroutine that applies whatever has queued up in
// a single transaction (see worker).
package contentsqlite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// Name is the module name.
const Name = "content-sqlite"

// BackingService is the service name every backing store provides.
const BackingService = "content-backing"

// startupTimeout bounds the setup RPCs and shutdownTimeout the final
// flush at unload (the broker allows a module 10s to stop).
const (
	startupTimeout  = 10 * time.Second
	shutdownTimeout = 7 * time.Second
)

var errClosed = fmt.Errorf("content-sqlite is unloading: %w", syscall.ENOSYS)

// Config tunes the module; each field is a module argument.
type Config struct {
	// JournalMode (journal_mode=) is SQLite's journal mode: DELETE,
	// TRUNCATE, PERSIST, MEMORY, WAL or OFF (default WAL; MEMORY for a
	// scratch database).
	JournalMode string
	// Synchronous (synchronous=) is EXTRA, FULL, NORMAL or OFF (default
	// NORMAL; OFF for a scratch database).
	Synchronous string
	// Compress (compress=s2|zstd|deflate|none) is how blobs of 256 bytes or
	// more are stored when that makes them smaller. Default: s2 for the
	// statedir's database (persistentCompress: fast enough that the
	// smaller writes make the pipeline faster, not slower), none for a
	// scratch one (it never outlives the instance).
	Compress string
	// Truncate (truncate) starts from an empty database.
	Truncate bool
	// QuickCheck (quick_check) checks the database at every load, not
	// only after it was not closed cleanly.
	QuickCheck bool
}

// Validate reports a setting SQLite would refuse.
func (c Config) Validate() error {
	if c.JournalMode != "" && !oneOf(c.JournalMode, "DELETE", "TRUNCATE", "PERSIST", "MEMORY", "WAL", "OFF") {
		return fmt.Errorf("journal_mode %q is not DELETE, TRUNCATE, PERSIST, MEMORY, WAL or OFF: %w", c.JournalMode, syscall.EINVAL)
	}
	if c.Synchronous != "" && !oneOf(c.Synchronous, "EXTRA", "FULL", "NORMAL", "OFF") {
		return fmt.Errorf("synchronous %q is not EXTRA, FULL, NORMAL or OFF: %w", c.Synchronous, syscall.EINVAL)
	}
	return nil
}

func oneOf(s string, set ...string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

func parseArgs(args []string) (Config, error) {
	var c Config
	for _, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case name == "journal_mode" && hasValue:
			c.JournalMode = value
		case name == "synchronous" && hasValue:
			c.Synchronous = value
		case name == "compress" && hasValue && (value == "s2" || value == "zstd" || value == "deflate" || value == "none"):
			c.Compress = value
		case name == "truncate" && !hasValue:
			c.Truncate = true
		case name == "quick_check" && !hasValue:
			c.QuickCheck = true
		default:
			return c, fmt.Errorf("unknown or malformed module option %q (journal_mode=, synchronous=, compress=s2|zstd|deflate|none, truncate, quick_check): %w", a, syscall.EINVAL)
		}
	}
	return c, c.Validate()
}

// Module is the content-sqlite module.
type Module struct{}

var _ module.Module = Module{}

// New returns the module (a module.Factory).
func New() module.Module { return Module{} }

// Name returns "content-sqlite".
func (Module) Name() string { return Name }

type service struct {
	h       *flux.Handle
	log     *slog.Logger
	st      *Store
	w       *worker
	cfg     Config
	scratch bool
	load    tstat
	store   tstat
	// garbage collection as the instance stops (gcstop.go)
	gc          gcChoice
	gcThreshold int64
}

// Run opens the database and serves the backing store until ctx is done;
// then it asks the content module to flush, unregisters and closes.
func (Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	cfg, err := parseArgs(args)
	if err != nil {
		return err
	}
	// Start up even if the module is removed meanwhile: the content
	// module may already hold blobs that only this module can save, so
	// it registers and then flushes them (finish) rather than give up.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startupTimeout)
	defer cancel()
	if rank, err := h.Attr(sctx, "rank"); err != nil || rank != "0" {
		return fmt.Errorf("%s is the backing store of rank 0 and cannot load on rank %s: %w", Name, rank, syscall.EINVAL)
	}
	hash, err := fluxcontent.HashName(sctx, h)
	if err != nil {
		return err
	}
	opts, scratch, err := dbOptions(sctx, h, cfg, hash)
	if err != nil {
		return err
	}
	st, err := Open(opts)
	if err != nil {
		if !scratch {
			// The state directory's content is the instance's jobs and
			// KVS: running on without it would hide them and hand out
			// job IDs it already used. Stop the instance instead.
			flux.NewLogger(h, Name).Error(fmt.Sprintf("cannot open the state directory's content store, shutting down: %v", err))
			h.Call(sctx, "broker.shutdown", 0, map[string]int{"exitcode": 1}, nil)
		}
		return err
	}
	// opening and checking a large database takes its own time: the
	// registration RPCs get their own deadline
	cancel()
	sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), startupTimeout)
	defer cancel()
	s := &service{h: h, log: flux.NewLogger(h, Name), st: st, cfg: cfg, scratch: scratch}
	if !scratch {
		if s.gcThreshold, err = gcThreshold(sctx, h); err != nil {
			s.log.Error(err.Error() + ": no automatic garbage collection")
		}
	}
	s.w = startWorker(st, h.Post)
	defer s.close()

	h.HandleFunc(BackingService+".load", s.owner(s.handleLoad))
	h.HandleFunc(BackingService+".store", s.owner(s.handleStore))
	h.HandleFunc(BackingService+".store-batch", s.owner(s.handleStoreBatch))
	h.HandleFunc(BackingService+".checkpoint-get", s.owner(s.handleCheckpointGet))
	h.HandleFunc(BackingService+".checkpoint-put", s.owner(s.handleCheckpointPut))
	h.HandleFunc(BackingService+".disconnect", func(*flux.Request) {})
	h.HandleFunc(Name+".stats-get", s.handleStats)
	h.HandleFunc(Name+".gc-at-stop", s.owner(s.handleGCAtStop))
	h.HandleFunc(Name+".disconnect", func(*flux.Request) {})
	if err := h.RegisterService(sctx, BackingService); err != nil {
		return fmt.Errorf("register service %s: %w", BackingService, err)
	}
	err = h.Call(sctx, "content.register-backing", 0, map[string]string{"name": Name}, nil)
	if err != nil && !errors.Is(err, syscall.ENOSYS) {
		return fmt.Errorf("content.register-backing: %w", err)
	}
	registered := err == nil
	checked := "not checked: closed cleanly"
	if st.Checked() {
		checked = "quick_check ok"
	}
	s.log.Debug(fmt.Sprintf("%s (%d objects) journal_mode=%s synchronous=%s, %s",
		st.Path(), st.Count(), st.opts.JournalMode, st.opts.Synchronous, checked))

	serveCtx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	go func() {
		select {
		case <-ctx.Done():
			h.Post(func() { s.finish(registered, stopServe) })
		case <-serveCtx.Done():
		}
	}()
	err = h.Serve(serveCtx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// persistentCompress is the statedir database's default compression.
// Measured (bench/README.md, 2026-12-02 third session): 10,000 jobs
// through bench/throughput with a statedir, s2 against none: 7,802-9,596
// against 5,116-7,553 jobs/s, broker CPU 175-210 against 200-235 µs a
// job, statedir 32-34 against 47-49 MB. zstd (0.54 of the size against
// s2's 0.66) compresses these small blobs at 70 MB/s here against s2's
// 370 MB/s, and deflate at 26 MB/s: both slowed the pipeline 25-50%.
var persistentCompress = "s2"

// dbOptions picks the database file and its pragmas.
func dbOptions(ctx context.Context, h *flux.Handle, cfg Config, hash string) (Options, bool, error) {
	o := Options{Hash: hash, JournalMode: cfg.JournalMode, Synchronous: cfg.Synchronous,
		Compress: cfg.Compress, Truncate: cfg.Truncate, QuickCheck: cfg.QuickCheck}
	if o.Compress == "none" {
		o.Compress = ""
	}
	dir, err := h.Attr(ctx, "statedir")
	if err == nil && dir != "" {
		o.Path = filepath.Join(dir, "content.sqlite")
		if cfg.Compress == "" {
			o.Compress = persistentCompress
		}
		return o, false, nil
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return o, false, err
	}
	dir, err = h.Attr(ctx, "rundir")
	if err != nil {
		return o, false, err
	}
	o.Path = filepath.Join(dir, "content.sqlite")
	o.Truncate = true // a scratch database never outlives the module
	if o.JournalMode == "" {
		o.JournalMode = "MEMORY"
	}
	if o.Synchronous == "" {
		o.Synchronous = "OFF"
	}
	return o, true, nil
}

// finish runs on the Serve goroutine once the module is asked to stop:
// the content module writes back what it still holds, then the backing
// store unregisters and Serve ends.
func (s *service) finish(registered bool, stop func()) {
	if !registered {
		stop()
		return
	}
	timer := time.AfterFunc(shutdownTimeout, func() {
		s.log.Error(fmt.Sprintf("unload: content flush did not finish within %v", shutdownTimeout))
		stop()
	})
	unregister := func() {
		f, err := s.h.RPC("content.unregister-backing", 0, nil, 0)
		if err != nil {
			timer.Stop()
			stop()
			return
		}
		f.Then(func(_ *flux.Message, err error) {
			if err != nil && !errors.Is(err, syscall.ENOSYS) {
				s.log.Error("content.unregister-backing: " + err.Error())
			}
			timer.Stop()
			stop()
		})
	}
	f, err := s.h.RPC("content.flush", 0, nil, 0)
	if err != nil {
		unregister()
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil && !errors.Is(err, syscall.ENOSYS) {
			s.log.Error("unload: content flush: " + err.Error())
		}
		unregister()
	})
}

func (s *service) close() {
	s.w.stop()
	s.collect()
	if err := s.st.Close(); err != nil {
		s.log.Error("close database: " + err.Error())
	}
	if s.scratch {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(s.st.Path() + suffix)
		}
	}
}

func (s *service) owner(fn flux.HandlerFunc) flux.HandlerFunc {
	return func(r *flux.Request) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "%s: the content service is restricted to the instance owner", r.Topic())
			return
		}
		fn(r)
	}
}
