// Package schedsimple is the sched-simple broker module: a first-fit,
// first-come-first-served scheduler speaking RFC 27 to the job manager
// and RFC 28 to the resource module. It registers the "sched" and
// "feasibility" services; the allocation logic itself lives in
// internal/sched.
//
// At load it acquires the instance's resources (resource.acquire), learns
// the allocations of running jobs (job-manager.sched-hello), and tells the
// job manager it is ready in unlimited mode (job-manager.sched-ready).
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
//
// Pending jobs wait in a queue ordered by priority then submit time; each
// scheduling pass (after an alloc, a free, a priority change or resources
// coming up, coalesced to one pass per batch of messages) considers the
// first queue-depth jobs (see sched.FCFS), and a pass that started jobs
// is followed by another, until one starts none.
package schedsimple

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the module's name.
const Name = "sched-simple"

// Config is sched-simple's configuration, from module arguments
// (queue-depth=N) or, when absent there, the broker attribute
// sched-simple.queue-depth.
type Config struct {
	// QueueDepth is how many pending jobs (in queue order) each
	// scheduling pass considers; "unlimited" on the command line for
	// all of them. Default sched.DefaultQueueDepth (8); 1 makes
	// scheduling strictly FCFS.
	QueueDepth int
	// Policy holds the named queues, whose jobs run only on nodes with
	// the properties the queue requires. Nil: no queues.
	Policy *policy.Config
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{QueueDepth: sched.DefaultQueueDepth} }

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.QueueDepth < 1 {
		return fmt.Errorf("queue-depth=%d: must be at least 1", c.QueueDepth)
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
	cfg := DefaultConfig()
	if v, err := h.Attr(ctx, "sched-simple.queue-depth"); err == nil {
		n, err := parseDepth(v)
		if err != nil {
			return cfg, fmt.Errorf("attribute sched-simple.%w", err)
		}
		cfg.QueueDepth = n
	}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "queue-depth":
			n, err := parseDepth(v)
			if err != nil {
				return cfg, err
			}
			cfg.QueueDepth = n
		case "unlimited":
			// flux-core's flag for the (default here) unlimited mode
		default:
			return cfg, fmt.Errorf("unknown module argument %q (known: queue-depth=N)", a)
		}
	}
	return cfg, cfg.Validate()
}

// Module is the sched-simple module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	cfg, err := parseConfig(ctx, h, args)
	if err != nil {
		return err
	}
	if cfg.Policy, err = policy.Fetch(ctx, h); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := newScheduler(h, flux.NewLogger(h, Name), cfg, cancel)
	if err := s.acquire(ctx); err != nil {
		return err
	}
	s.register()
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
