// Package schedsimple is the sched-simple broker module: a first-fit
// scheduler, first-come-first-served or with EASY, hybrid or
// conservative backfill (queue-policy), speaking RFC 27 to the job manager
// and RFC 28 to the resource module. It registers the "sched" and
// "feasibility" services; the allocation logic itself lives in
// internal/sched.
//
// At load it acquires the instance's resources (resource.acquire), learns
// the allocations of running jobs (job-manager.sched-hello), and tells the
// job manager it is ready (job-manager.sched-ready) in unlimited mode, or
// limited mode with the module argument mode=limited=N (see applyArgs).
// Then it answers:
//
//	sched.alloc {id, priority, userid, t_submit, jobspec}  (streaming)
//	    -> {id, type:0, R, annotations:{sched:{resource_summary}}}
//	     | {id, type:2, note}   the request can never be satisfied
//	     | {id, type:3}         cancelled by sched.cancel
//	sched.free {id, R, final} -> {id}
//	sched.cancel {id}                (no response)
//	sched.prioritize {jobs:[[id, priority], ...]}   (no response)
//	sched.expiration {id, expiration} -> {}
//	sched.resource-status -> {all, down, allocated}   (R objects)
//	feasibility.check {jobspec} -> {} or an error saying why never
//	sched-simple.debug {op, flags} -> {flags}  test hooks (debug.go)
//
// Pending jobs wait in a queue ordered by priority then submit time; each
// scheduling pass (after an alloc, a free, a priority change or resources
// coming up, coalesced to one pass per batch of messages) considers the
// first queue-depth jobs (see sched.FCFS and sched.Backfill), and a pass
// that started jobs is followed by another, until one starts none. With
// a backfill policy the jobs holding reservations are told their
// expected start (annotation sched.t_estimate, an RFC 27 type 1
// response) whenever it changes.
package schedsimple

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the module's name.
const Name = "sched-simple"

// Config is sched-simple's configuration, from module arguments
// (queue-depth=N, queue-policy=NAME, reservation-depth=N) over the
// [sched-simple] table of the instance configuration (the same keys)
// over the broker attributes sched-simple.queue-depth and
// sched-simple.queue-policy.
type Config struct {
	// QueuePolicy is fcfs (the default), easy, hybrid or conservative
	// (see sched.FCFS and sched.Backfill).
	QueuePolicy string
	// ReservationDepth is how many blocked jobs hybrid backfill
	// protects with a reservation (default DefaultReservationDepth).
	ReservationDepth int
	// QueueDepth is how many pending jobs (in queue order) each
	// scheduling pass considers; "unlimited" on the command line for
	// all of them. Default sched.DefaultQueueDepth (8); 1 makes
	// scheduling strictly FCFS.
	QueueDepth int
	// Policy holds the named queues, whose jobs run only on nodes with
	// the properties the queue requires. Nil: no queues.
	Policy *policy.Config
	// Limit is how many alloc requests the job manager may have
	// outstanding at the scheduler (job-manager.sched-ready limited
	// mode, module argument mode=limited=N); 0 for all of them
	// (unlimited mode, the default).
	Limit int
	// LogLevel is the least severe message the module logs (module
	// argument log-level=NAME, a syslog severity); "" logs everything.
	LogLevel string
	// Fit places jobs on nodes (module argument alloc-mode=worst-fit,
	// first-fit or best-fit; worst-fit, flux-core's, by default).
	Fit sched.Fit
	// GPUShare is how many jobs a GPU may be given to at once (module
	// argument or [sched-simple] key gpu-share=N; 1, the default: GPUs
	// are not shared). See sched.NewPoolShared.
	GPUShare int
	// NICPrefer places the slots of jobs spanning nodes in a NUMA
	// domain with a fabric NIC when one has room (the nic match
	// plugin, sched/nic.go; key nic-prefer=true|false, true by
	// default).
	NICPrefer bool
	// PreemptMode is what becomes of a preempted job (key
	// preempt-mode): "cancel" (the default) ends it, "requeue" sends it
	// back to the queue with its submit time (preempt.go); a job's
	// attributes.system.preempt-mode overrides it.
	PreemptMode string
	// MaxRequeue bounds how many times one job is requeued (key
	// max-requeue, default DefaultMaxRequeue); preempted once more it
	// is canceled.
	MaxRequeue int
}

// DefaultReservationDepth is hybrid backfill's reservation depth when
// none is configured.
const DefaultReservationDepth = 8

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{QueueDepth: sched.DefaultQueueDepth, QueuePolicy: "fcfs", ReservationDepth: DefaultReservationDepth, Fit: sched.WorstFit, GPUShare: 1,
		NICPrefer: true, PreemptMode: wire.PreemptCancel, MaxRequeue: DefaultMaxRequeue}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.QueueDepth < 1 {
		return fmt.Errorf("queue-depth=%d: must be at least 1", c.QueueDepth)
	}
	switch c.QueuePolicy {
	case "fcfs", "easy", "hybrid", "conservative":
	default:
		return fmt.Errorf("queue-policy=%q: use fcfs, easy, hybrid or conservative", c.QueuePolicy)
	}
	if c.ReservationDepth < 1 {
		return fmt.Errorf("reservation-depth=%d: must be at least 1", c.ReservationDepth)
	}
	if c.GPUShare < 1 || c.GPUShare > sched.MaxGPUShare {
		return fmt.Errorf("gpu-share=%d: must be from 1 (not shared) to %d", c.GPUShare, sched.MaxGPUShare)
	}
	if err := wire.CheckPreemptMode(c.PreemptMode); err != nil {
		return err
	}
	return wire.CheckMaxRequeue(c.MaxRequeue)
}

// gpuShares is each node's GPU share: [sched-simple] gpu-share, and
// where queues are configured each queue's own (queues.NAME.gpu-share,
// the global one when it sets none) on the nodes it requires. A node
// several queues cover shares as the least of them allows, so a queue
// that does not share never has its GPUs shared (sched.GPUShares).
// The shares are read when the resources are acquired: a change takes
// effect when the module is reloaded.
func (c Config) gpuShares() sched.GPUShares {
	s := sched.GPUShares{Default: max(c.GPUShare, 1)}
	if c.Policy == nil {
		return s
	}
	names := make([]string, 0, len(c.Policy.Queues))
	for name := range c.Policy.Queues {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		q := c.Policy.Queues[name]
		share := q.GPUShare
		if share == 0 {
			share = s.Default
		}
		s.Rules = append(s.Rules, sched.ShareRule{Name: "queues." + name, Requires: q.Requires, Share: share})
	}
	return s
}

// NewPolicy returns the queue policy the configuration names.
func (c Config) NewPolicy() sched.Policy {
	if c.QueuePolicy == "fcfs" || c.QueuePolicy == "" {
		return &sched.FCFS{Depth: c.QueueDepth}
	}
	return sched.NewBackfill(c.QueuePolicy, c.QueueDepth, c.ReservationDepth)
}

func parseReservationDepth(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("reservation-depth=%q: must be a positive integer", v)
	}
	return n, nil
}

// setKey applies one configuration key (from arguments, the config
// table or attributes).
func (c *Config) setKey(k, v string) error {
	switch k {
	case "queue-depth":
		n, err := parseDepth(v)
		if err != nil {
			return err
		}
		c.QueueDepth = n
	case "queue-policy", "policy":
		c.QueuePolicy = v
	case "reservation-depth":
		n, err := parseReservationDepth(v)
		if err != nil {
			return err
		}
		c.ReservationDepth = n
	case "alloc-mode":
		f, err := sched.ParseFit(v)
		if err != nil {
			return err
		}
		c.Fit = f
	case "gpu-share":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > sched.MaxGPUShare {
			return fmt.Errorf("gpu-share=%q: must be an integer from 1 (not shared) to %d", v, sched.MaxGPUShare)
		}
		c.GPUShare = n
	case "nic-prefer":
		b, err := strconv.ParseBool(v)
		if err != nil || v != "true" && v != "false" {
			return fmt.Errorf("nic-prefer=%q: must be true or false", v)
		}
		c.NICPrefer = b
	case "preempt-mode", "max-requeue":
		return c.setPreemptKey(k, v) // preempt.go
	default:
		return fmt.Errorf("unknown key %q (known: queue-depth, queue-policy, reservation-depth, alloc-mode, gpu-share, nic-prefer, preempt-mode, max-requeue)", k)
	}
	return nil
}

func parseDepth(v string) (int, error) {
	if v == "unlimited" {
		return math.MaxInt, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("queue-depth=%q: must be a positive integer or \"unlimited\"", v)
	}
	return n, nil
}

// parseConfig reads module arguments over the attribute settings.
func parseConfig(ctx context.Context, h *flux.Handle, args []string) (Config, error) {
	cfg, _, err := loadConfig(ctx, h, args)
	return cfg, err
}

// configSources is what sched-simple's configuration is made of besides
// the instance configuration's [sched-simple] table, read once at load:
// the broker attributes sched-simple.queue-depth and
// sched-simple.queue-policy, FLUX_SCHED_OPTS and the module arguments.
// A flux config reload builds the configuration again from them and the
// new table (scheduler.configReload), so the arguments still win.
type configSources struct {
	attrs     map[string]string
	schedOpts string
	args      []string
}

// loadConfig reads the configuration at load, and what it was made of.
func loadConfig(ctx context.Context, h *flux.Handle, args []string) (Config, configSources, error) {
	src := configSources{attrs: map[string]string{}, schedOpts: os.Getenv("FLUX_SCHED_OPTS"), args: args}
	for _, k := range []string{"queue-depth", "queue-policy"} {
		if v, err := h.Attr(ctx, "sched-simple."+k); err == nil {
			src.attrs[k] = v
		}
	}
	var top map[string]any
	var raw json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &raw); err == nil {
		if err := json.Unmarshal(raw, &top); err != nil {
			return DefaultConfig(), src, fmt.Errorf("[sched-simple]: %w", err)
		}
	}
	cfg, err := src.build(top)
	return cfg, src, err
}

// build makes the configuration: module arguments over FLUX_SCHED_OPTS
// over the [sched-simple] table of top (the instance configuration;
// nil for none) over the attributes over the defaults. It does not read
// the queues (Config.Policy).
func (src configSources) build(top map[string]any) (Config, error) {
	cfg := DefaultConfig()
	for _, k := range []string{"queue-depth", "queue-policy"} {
		if v, ok := src.attrs[k]; ok {
			if err := cfg.setKey(k, v); err != nil {
				return cfg, fmt.Errorf("attribute sched-simple.%w", err)
			}
		}
	}
	if err := cfg.applyTable(top); err != nil {
		return cfg, err
	}
	if err := cfg.applySchedOpts(src.schedOpts); err != nil {
		return cfg, err
	}
	if err := cfg.applyArgs(src.args); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// A flux config reload changes what can change while the module runs,
// for what it does from then on: preempt-mode and max-requeue (the next
// preemptions), alloc-mode (the next placements). The other keys shape
// state built at load (the resource pool's GPU shares and match
// plugins, the queue policy and its view of the running jobs, the queue
// depth the job manager was told in limited mode): a reload that changes
// one of them is refused, naming it, since a reload changes everything
// or nothing.

// moduleOnlyKeys are the keys a reload cannot change, with their values
// (mode= and log-level= are module arguments only, which a reload keeps).
var moduleOnlyKeys = []struct {
	key string
	val func(Config) string
}{
	{"queue-depth", Config.depthString},
	{"queue-policy", func(c Config) string { return c.QueuePolicy }},
	{"reservation-depth", func(c Config) string { return strconv.Itoa(c.ReservationDepth) }},
	{"gpu-share", func(c Config) string { return strconv.Itoa(c.GPUShare) }},
	{"nic-prefer", func(c Config) string { return strconv.FormatBool(c.NICPrefer) }},
}

// reloaded returns the configuration a reload to next makes of c: c with
// next's live keys (see above), or an error naming each key that would
// change but cannot without flux module reload sched-simple.
func (c Config) reloaded(next Config) (Config, error) {
	var changed, args []string
	for _, k := range moduleOnlyKeys {
		if was, now := k.val(c), k.val(next); was != now {
			changed = append(changed, fmt.Sprintf("%s (%s, now %s)", k.key, now, was))
			args = append(args, k.key+"="+now)
		}
	}
	if len(changed) > 0 {
		return c, fmt.Errorf("[sched-simple] %s: cannot change while sched-simple runs, so the configuration was not reloaded; "+
			"flux module reload sched-simple %s applies it (or flux module remove sched-simple, flux config reload, flux module load sched-simple)",
			strings.Join(changed, ", "), strings.Join(args, " "))
	}
	c.PreemptMode, c.MaxRequeue, c.Fit = next.PreemptMode, next.MaxRequeue, next.Fit
	return c, nil
}

// applySchedOpts reads FLUX_SCHED_OPTS, flux-sched 0.x's (2018) way to
// choose a scheduler plugin ("plugin=sched.fcfs", seed 004): its FCFS
// and backfill plugins are sched-simple's queue-policy=fcfs and easy.
// Anything else is refused with what replaced it, not ignored.
func (c *Config) applySchedOpts(opts string) error {
	for _, o := range strings.Fields(strings.ReplaceAll(opts, ",", " ")) {
		k, v, _ := strings.Cut(o, "=")
		if k != "plugin" {
			return fmt.Errorf("FLUX_SCHED_OPTS=%q: %s: unknown (flux-sched 0.x's options are gone; use sched-simple's queue-policy=fcfs|easy|hybrid|conservative)", opts, o)
		}
		switch v {
		case "sched.fcfs":
			c.QueuePolicy = "fcfs"
		case "sched.backfill":
			c.QueuePolicy = "easy"
		default:
			return fmt.Errorf("FLUX_SCHED_OPTS=%q: plugin %s: flux-sched 0.x's plugins are gone; sched-simple takes queue-policy=fcfs|easy|hybrid|conservative (sched.fcfs is fcfs, sched.backfill easy)", opts, v)
		}
	}
	return nil
}

// applyArgs applies the module arguments: the configuration keys
// (queue-depth=N|unlimited, queue-policy=NAME, reservation-depth=N) and
// those flux-core's sched-simple takes on its command line:
//
//	mode=unlimited     the job manager sends every pending job's alloc
//	                   request; the scheduler considers all of them
//	                   (queue-depth=unlimited)
//	mode=limited=N     the job manager keeps at most N alloc requests
//	                   outstanding, and the scheduler considers those N
//	log-level=NAME     log only messages at least as severe as NAME
//	                   (emerg, alert, crit, err, warning, notice, info,
//	                   debug)
//	alloc-mode=MODE    how jobs are placed: worst-fit (the default, the
//	                   nodes with the most free cores first), first-fit
//	                   (the lowest ranks first) or best-fit (the fullest
//	                   nodes that fit first); the legacy C sched-simple's
//	                   option
//	pool-class=NAME    flux-core's choice of resource pool class
//	                   (TreePool or Rv1Pool:Rv1Pool); fluxgo has one
//	                   pool implementation, which serves for both
//	test-hello-nopartial  flux-core's test switch for hello without
//	                   partial-ok; fluxgo's hello has no partial mode
//
// A bare "unlimited" is taken as mode=unlimited. Anything else, or a bad
// value, is an error naming the argument.
func (c *Config) applyArgs(args []string) error {
	for _, a := range args {
		if err := c.applyArg(a); err != nil {
			return fmt.Errorf("module argument %q: %w", a, err)
		}
	}
	return nil
}

func (c *Config) applyArg(a string) error {
	k, v, _ := strings.Cut(a, "=")
	switch k {
	case "unlimited":
		if a != k {
			return fmt.Errorf("unknown argument (known: %s)", knownArgs)
		}
		c.QueueDepth, c.Limit = math.MaxInt, 0
	case "mode":
		return c.setMode(v)
	case "log-level":
		if _, err := flux.ParseSeverity(v); err != nil {
			return fmt.Errorf("unknown log level %q: use emerg, alert, crit, err, warning, notice, info or debug", v)
		}
		c.LogLevel = v
	case "alloc-mode":
		f, err := sched.ParseFit(v)
		if err != nil {
			return err
		}
		c.Fit = f
	case "pool-class":
		if !knownPoolClass(v) {
			return fmt.Errorf("unknown pool class %q: use TreePool or Rv1Pool:Rv1Pool", v)
		}
	case "test-hello-nopartial":
		if a != k {
			return fmt.Errorf("test-hello-nopartial takes no value")
		}
	case "queue-depth", "queue-policy", "policy", "reservation-depth", "gpu-share", "nic-prefer", "preempt-mode", "max-requeue":
		if a == k {
			return fmt.Errorf("%s needs a value (%s=VALUE)", k, k)
		}
		return c.setKey(k, v)
	default:
		return fmt.Errorf("unknown argument (known: %s)", knownArgs)
	}
	return nil
}

const knownArgs = "mode=unlimited, mode=limited=N, queue-depth=N|unlimited, queue-policy=NAME, reservation-depth=N, gpu-share=N, nic-prefer=true|false, preempt-mode=cancel|requeue, max-requeue=N, log-level=LEVEL, alloc-mode=MODE, pool-class=NAME, test-hello-nopartial"

// setMode applies mode=unlimited or mode=limited=N.
func (c *Config) setMode(v string) error {
	if v == "unlimited" {
		c.QueueDepth, c.Limit = math.MaxInt, 0
		return nil
	}
	if n, ok := strings.CutPrefix(v, "limited="); ok {
		limit, err := strconv.Atoi(n)
		if err != nil || limit < 1 {
			return fmt.Errorf("the limit must be a positive integer, not %q", n)
		}
		c.QueueDepth, c.Limit = limit, limit
		return nil
	}
	return fmt.Errorf("unknown mode %q: use mode=unlimited or mode=limited=N", v)
}

// knownPoolClass reports whether v names one of flux-core's resource pool
// classes as its pool-class= does: a module (its pool_class) or
// module:Class, optionally under flux.resource.
func knownPoolClass(v string) bool {
	switch strings.TrimPrefix(v, "flux.resource.") {
	case "TreePool", "TreePool:TreePool", "Rv1Pool:Rv1Pool":
		return true
	}
	return false
}

// readyPayload is the job-manager.sched-ready request: unlimited mode,
// or limited mode with the configured limit.
func (c Config) readyPayload() map[string]any {
	if c.Limit > 0 {
		return map[string]any{"mode": "limited", "limit": c.Limit, "attached": true}
	}
	return map[string]any{"mode": "unlimited", "attached": true}
}

// depthString renders the queue depth as flux-core's ready message does.
func (c Config) depthString() string {
	if c.QueueDepth == math.MaxInt {
		return "unlimited"
	}
	return strconv.Itoa(c.QueueDepth)
}

// applyTable applies the configuration's [sched-simple] table.
func (c *Config) applyTable(top map[string]any) error {
	raw, ok := top[Name]
	if !ok {
		return nil
	}
	t, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("[sched-simple]: want a table, not %v", raw)
	}
	for k, v := range t {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case float64:
			s = strconv.FormatFloat(x, 'f', -1, 64)
		case int64:
			s = strconv.FormatInt(x, 10)
		case bool:
			s = strconv.FormatBool(x)
		default:
			return fmt.Errorf("[sched-simple] %s: want a string or a number, got %v", k, v)
		}
		if err := c.setKey(k, s); err != nil {
			return fmt.Errorf("[sched-simple] %w", err)
		}
	}
	return nil
}

// CheckTable checks the [sched-simple] table of a configuration as the
// module will read it (flux start and flux config reload check it first).
func CheckTable(top map[string]any) error {
	c := DefaultConfig()
	if err := c.applyTable(top); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("[sched-simple] %w", err)
	}
	return nil
}

// Module is the sched-simple module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	cfg, src, err := loadConfig(ctx, h, args)
	if err != nil {
		return err
	}
	if cfg.Policy, err = policy.Fetch(ctx, h); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := newScheduler(h, newLogger(h, cfg.LogLevel), cfg, cancel)
	s.src = src
	if err := s.acquire(ctx); err != nil {
		return err
	}
	if err := s.setReservations(cfg.Policy); err != nil {
		return err
	}
	s.register()
	s.ctx = ctx
	if err := h.OnOwnerEvent(ctx, "job-manager.online", s.jmOnline); err != nil {
		return err
	}
	for _, svc := range []string{"sched", "feasibility"} {
		if err := h.RegisterService(ctx, svc); err != nil {
			return fmt.Errorf("register service %s: %w", svc, err)
		}
	}
	go s.hello(ctx)
	err = h.Serve(ctx)
	s.shutdown()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// newLogger returns the module's logger, dropping messages less severe
// than level (a syslog severity name; "" keeps all).
func newLogger(h *flux.Handle, level string) *slog.Logger {
	l := flux.NewLogger(h, Name)
	if level == "" {
		return l
	}
	sev, _ := flux.ParseSeverity(level) // checked by applyArg
	return slog.New(levelHandler{l.Handler(), severityLevel(sev)})
}

// severityLevel is the slog level of a syslog severity (0-7), as the
// broker log handler maps them back: err and worse are errors, notice
// and info are info.
func severityLevel(sev int) slog.Level {
	switch {
	case sev <= 3:
		return slog.LevelError
	case sev == 4:
		return slog.LevelWarn
	case sev <= 6:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// levelHandler drops records below min.
type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (l levelHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return lvl >= l.min && l.Handler.Enabled(ctx, lvl)
}

func (l levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{l.Handler.WithAttrs(as), l.min}
}

func (l levelHandler) WithGroup(g string) slog.Handler {
	return levelHandler{l.Handler.WithGroup(g), l.min}
}

// errno maps a sched error kind to the errno of an RPC error.
func errno(err error) syscall.Errno {
	switch {
	case errors.Is(err, sched.ErrUnsatisfiable):
		return syscall.EOVERFLOW
	case errors.Is(err, sched.ErrNotFound):
		return syscall.ENOENT
	default:
		return syscall.EINVAL
	}
}
