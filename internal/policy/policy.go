// Package policy reads the job policy of the instance configuration, the
// tables flux-config-queues(5) and flux-config-policy(5) describe:
//
//	[policy.limits]
//	duration = "1h"                 # longest time limit (FSD)
//	job-size.max.nnodes = 8         # also ncores, ngpus; and job-size.min
//
//	[policy.jobspec.defaults.system]
//	queue = "batch"                 # for jobs that name none
//	duration = "30m"                # for jobs that set no time limit
//
//	[queues.batch]                  # named queues (none: one anonymous)
//	requires = ["batch"]            # node properties the queue runs on
//	gpu-share = 4                   # jobs per GPU on its nodes (sched-simple)
//	[queues.debug]
//	policy.limits.duration = "10m"  # the queue's own limits
//	policy.jobspec.defaults.system.duration = "5m"
//
// job-ingest checks a job's queue (and fills in the defaults) at submit
// time, sched-simple confines each queue's jobs to the nodes with its
// properties, and the job manager configures its limit plugins from
// policy.limits.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"syscall"
	"unicode"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Config is the job policy. The zero value is flux's default: one
// anonymous queue and no limits.
type Config struct {
	// Duration is policy.limits.duration as given (an FSD), "" for none.
	Duration string
	// JobSize is policy.limits.job-size ({max: {...}, min: {...}}), nil
	// for none.
	JobSize json.RawMessage
	// MaxJobspecSize bounds a submitted jobspec in bytes (ingest
	// max-jobspec-size; default DefaultMaxJobspecSize).
	MaxJobspecSize int64
	// Queues are the named queues; empty means the anonymous queue only.
	Queues map[string]Queue
	// DefaultQueue is policy.jobspec.defaults.system.queue, "" for none.
	DefaultQueue string
	// DefaultDuration is policy.jobspec.defaults.system.duration in
	// seconds: the time limit of jobs that set none (0: unlimited).
	DefaultDuration float64
	// Reservations are the advance reservations ([reservations.NAME],
	// reservation.go).
	Reservations map[string]Reservation
	// Access is policy.access (nil: anyone may submit).
	Access *Access
	// accounting: per-association privileges (accounting.go)
	accounting acctPrivileges
	names      names // uid -> names for Access
}

// Queue is one named queue.
type Queue struct {
	// Requires lists the node properties (RFC 20) a node must have to
	// run the queue's jobs.
	Requires []string
	// Duration and JobSize are queues.NAME.policy.limits: they replace
	// the instance-wide limits for the queue's jobs ("" / nil: the
	// instance's apply).
	Duration string
	JobSize  json.RawMessage
	// DefaultDuration is queues.NAME.policy.jobspec.defaults.system.
	// duration in seconds (0: the instance's default applies).
	DefaultDuration float64
	// Access is queues.NAME.policy.access: it replaces the instance's
	// for the queue (nil: the instance's applies).
	Access *Access
	// Preemptible (queues.NAME.preemptible) makes every job of the
	// queue preemptible: the scheduler cancels it when a job that is not
	// preemptible needs its resources (a "standby" queue).
	Preemptible bool
	// GPUShare (queues.NAME.gpu-share) is how many jobs may be given
	// each GPU of the queue's nodes at once, 1 to MaxGPUShare; 0 when
	// not set ([sched-simple] gpu-share applies).
	GPUShare int
	// PreemptMode (queues.NAME.preempt-mode, Slurm's PreemptMode per
	// partition) is what becomes of the queue's jobs when they are
	// preempted: "cancel" or "requeue"; "" when not set (the
	// scheduler's preempt-mode applies; a job's own attributes.system.
	// preempt-mode overrides both).
	PreemptMode string
}

// MaxGPUShare bounds queues.NAME.gpu-share (the scheduler's bound,
// sched.MaxGPUShare).
const MaxGPUShare = 64

// DefaultMaxJobspecSize is the largest jobspec accepted when the
// configuration sets no ingest.max-jobspec-size (Slurm's max_script_size
// is the same 4 MiB).
const DefaultMaxJobspecSize = 4 << 20

// Fetch reads the instance configuration (config.get) and parses its
// job policy.
func Fetch(ctx context.Context, h *flux.Handle) (*Config, error) {
	var raw json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &raw); err != nil {
		return nil, fmt.Errorf("config.get: %w", err)
	}
	return Parse(raw)
}

// policyTable is a policy table: the instance's [policy] or a queue's
// [queues.NAME.policy].
type policyTable struct {
	Limits *struct {
		Duration json.RawMessage `json:"duration"`
		JobSize  json.RawMessage `json:"job-size"`
	} `json:"limits"`
	Jobspec *struct {
		Defaults *struct {
			System map[string]json.RawMessage `json:"system"`
		} `json:"defaults"`
	} `json:"jobspec"`
	Access json.RawMessage `json:"access"`
}

// defaults returns the table's jobspec.defaults.system (nil if none).
func (p *policyTable) defaults() map[string]json.RawMessage {
	if p.Jobspec == nil || p.Jobspec.Defaults == nil {
		return nil
	}
	return p.Jobspec.Defaults.System
}

// Parse extracts the job policy from the configuration object (the TOML
// configuration as JSON). Other tables are ignored; a malformed policy
// or queues table is an error that names the key.
func Parse(conf []byte) (*Config, error) {
	var top struct {
		Policy       *policyTable               `json:"policy"`
		Queues       map[string]json.RawMessage `json:"queues"`
		Reservations map[string]json.RawMessage `json:"reservations"`
		Accounting   json.RawMessage            `json:"accounting"`
		Ingest       *struct {
			MaxJobspecSize any `json:"max-jobspec-size"`
		} `json:"ingest"`
	}
	c := &Config{MaxJobspecSize: DefaultMaxJobspecSize}
	if len(conf) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(conf, &top); err != nil {
		return nil, invalid("policy or queues table: %v", err)
	}
	if top.Ingest != nil && top.Ingest.MaxJobspecSize != nil {
		n, err := size.Parse(top.Ingest.MaxJobspecSize)
		if err != nil {
			return nil, invalid("ingest.max-jobspec-size: %v", err)
		}
		if n > message.MaxSize { // a jobspec limit past it could never be reached
			return nil, invalid("ingest.max-jobspec-size: %s is more than a message may carry (%s)", size.Format(n), size.Format(message.MaxSize))
		}
		c.MaxJobspecSize = n
	}
	if len(top.Accounting) > 0 {
		var err error
		if c.accounting, err = parseAccounting(top.Accounting); err != nil {
			return nil, err
		}
	}
	if len(top.Reservations) > 0 {
		var err error
		if c.Reservations, err = parseReservations(top.Reservations); err != nil {
			return nil, err
		}
	}
	if p := top.Policy; p != nil && p.Limits != nil {
		var err error
		c.Duration, c.JobSize, err = parseLimits("policy.limits", p.Limits.Duration, p.Limits.JobSize)
		if err != nil {
			return nil, err
		}
	}
	for name, v := range top.Queues {
		if err := checkQueueName(name); err != nil {
			return nil, err
		}
		var q struct {
			Requires    json.RawMessage `json:"requires"`
			Policy      *policyTable    `json:"policy"`
			Preemptible json.RawMessage `json:"preemptible"`
			GPUShare    json.RawMessage `json:"gpu-share"`
			PreemptMode json.RawMessage `json:"preempt-mode"`
		}
		if err := json.Unmarshal(v, &q); err != nil {
			return nil, invalid("queues.%s must be a table, not %s", name, v)
		}
		var queue Queue
		if len(q.Preemptible) > 0 {
			if err := json.Unmarshal(q.Preemptible, &queue.Preemptible); err != nil {
				return nil, invalid("queues.%s.preemptible must be true or false, not %s", name, q.Preemptible)
			}
		}
		if len(q.PreemptMode) > 0 {
			if json.Unmarshal(q.PreemptMode, &queue.PreemptMode) != nil || (queue.PreemptMode != "cancel" && queue.PreemptMode != "requeue") {
				return nil, invalid("queues.%s.preempt-mode must be \"cancel\" or \"requeue\", not %s", name, q.PreemptMode)
			}
		}
		if len(q.GPUShare) > 0 {
			var n float64
			if err := json.Unmarshal(q.GPUShare, &n); err != nil || n != math.Trunc(n) || n < 1 || n > MaxGPUShare {
				return nil, invalid("queues.%s.gpu-share must be an integer from 1 (not shared) to %d, not %s", name, MaxGPUShare, q.GPUShare)
			}
			queue.GPUShare = int(n)
		}
		if q.Policy != nil && q.Policy.Limits != nil {
			var err error
			queue.Duration, queue.JobSize, err = parseLimits("queues."+name+".policy.limits", q.Policy.Limits.Duration, q.Policy.Limits.JobSize)
			if err != nil {
				return nil, err
			}
		}
		if q.Policy != nil && len(q.Policy.Access) > 0 {
			var err error
			if queue.Access, err = parseAccess("queues."+name+".policy.access", q.Policy.Access); err != nil {
				return nil, err
			}
		}
		if q.Policy != nil {
			path := "queues." + name + ".policy.jobspec.defaults.system"
			for key, v := range q.Policy.defaults() {
				if key != "duration" {
					return nil, invalid("%s.%s: only duration may be set per queue", path, key)
				}
				d, err := parseDefaultDuration(path+".duration", v)
				if err != nil {
					return nil, err
				}
				queue.DefaultDuration = d
			}
		}
		if len(q.Requires) > 0 && string(q.Requires) != "null" {
			if err := json.Unmarshal(q.Requires, &queue.Requires); err != nil {
				return nil, invalid("queues.%s.requires must be an array of property names, not %s", name, q.Requires)
			}
			for _, prop := range queue.Requires {
				if err := rset.CheckPropertyName(strings.TrimPrefix(prop, "^")); err != nil {
					return nil, invalid("queues.%s.requires: %v", name, err)
				}
			}
		}
		if c.Queues == nil {
			c.Queues = make(map[string]Queue)
		}
		c.Queues[name] = queue
	}
	if p := top.Policy; p != nil && len(p.Access) > 0 {
		var err error
		if c.Access, err = parseAccess("policy.access", p.Access); err != nil {
			return nil, err
		}
	}
	if p := top.Policy; p != nil {
		defaults := p.defaults()
		for key := range defaults {
			if key != "queue" && key != "duration" {
				return nil, invalid("policy.jobspec.defaults.system.%s: unknown key (queue and duration may be set)", key)
			}
		}
		if v, ok := defaults["duration"]; ok {
			d, err := parseDefaultDuration("policy.jobspec.defaults.system.duration", v)
			if err != nil {
				return nil, err
			}
			c.DefaultDuration = d
		}
		if q, ok := defaults["queue"]; ok {
			if err := json.Unmarshal(q, &c.DefaultQueue); err != nil {
				return nil, invalid("policy.jobspec.defaults.system.queue must be a string, not %s", q)
			}
			if _, ok := c.Queues[c.DefaultQueue]; !ok {
				known := "no queues are configured"
				if c.Named() {
					known = "queues: " + c.queueNames()
				}
				return nil, invalid("policy.jobspec.defaults.system.queue: %q is not a configured queue (%s)",
					c.DefaultQueue, known)
			}
		}
	}
	return c, nil
}

// checkQueueName refuses a queue name no command line could give: empty,
// or holding spaces or control characters.
func checkQueueName(name string) error {
	if name == "" {
		return invalid(`queues."": a queue needs a name`)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' {
			return invalid("queues.%q: a queue name may not hold spaces, commas or control characters", name)
		}
	}
	return nil
}

// parseLimits reads a limits table (at path): duration, an FSD, and
// job-size.
func parseLimits(path string, duration, jobSize json.RawMessage) (string, json.RawMessage, error) {
	var d string
	if len(duration) > 0 && string(duration) != "null" {
		if err := json.Unmarshal(duration, &d); err != nil {
			return "", nil, invalid("%s.duration must be a string (an FSD such as \"1h\"), not %s", path, duration)
		}
		if _, err := fsd.Parse(d); err != nil {
			return "", nil, invalid("%s.duration: %v", path, err)
		}
	}
	if len(jobSize) == 0 || string(jobSize) == "null" {
		return d, nil, nil
	}
	if err := checkJobSize(path+".job-size", jobSize); err != nil {
		return "", nil, err
	}
	return d, jobSize, nil
}

// parseDefaultDuration reads a default time limit: an FSD string (or a
// number of seconds).
func parseDefaultDuration(path string, v json.RawMessage) (float64, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		d, err := fsd.Parse(s)
		if err != nil {
			return 0, invalid("%s: %v", path, err)
		}
		if math.IsInf(d, 1) {
			d = 0 // "inf": no default limit
		}
		return d, nil
	}
	var d float64
	if err := json.Unmarshal(v, &d); err != nil || d < 0 {
		return 0, invalid("%s must be an FSD string such as \"1h\" (or seconds), not %s", path, v)
	}
	return d, nil
}

// DefaultDurationOf is the time limit given to a job of queue name that
// sets none: the queue's default, else the instance's (0: none).
func (c *Config) DefaultDurationOf(name string) float64 {
	if q, ok := c.Queues[name]; ok && q.DefaultDuration > 0 {
		return q.DefaultDuration
	}
	return c.DefaultDuration
}

// checkJobSize checks a job-size table: {max, min} of {nnodes, ncores,
// ngpus} counts (-1 or absent: no limit).
func checkJobSize(path string, raw json.RawMessage) error {
	var js map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &js); err != nil {
		return invalid("%s must be a table of max and min tables, not %s", path, raw)
	}
	for bound, counts := range js {
		if bound != "max" && bound != "min" {
			return invalid("%s.%s: unknown key (want max or min)", path, bound)
		}
		for what, v := range counts {
			if what != "nnodes" && what != "ncores" && what != "ngpus" {
				return invalid("%s.%s.%s: unknown key (want nnodes, ncores or ngpus)", path, bound, what)
			}
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n < -1 {
				return invalid("%s.%s.%s must be a count (-1 for none), not %s", path, bound, what, v)
			}
		}
	}
	return nil
}

// SizeLimits are job-size bounds: "max" and "min", each counting
// "nnodes", "ncores" and "ngpus" (-1: no limit).
type SizeLimits map[string]map[string]int

// Limits returns the limits that hold for jobs of queue name ("" for the
// anonymous queue): the queue's own duration if it sets one, else the
// instance's; its job-size keys over the instance's, key by key.
func (c *Config) Limits(name string) (duration string, size SizeLimits) {
	duration = c.Duration
	size = SizeLimits{}
	merge := func(raw json.RawMessage) {
		var s SizeLimits
		if raw == nil || json.Unmarshal(raw, &s) != nil {
			return // none, or refused by Parse already
		}
		for bound, counts := range s {
			if size[bound] == nil {
				size[bound] = map[string]int{}
			}
			for k, v := range counts {
				size[bound][k] = v
			}
		}
	}
	merge(c.JobSize)
	if q, ok := c.Queues[name]; ok {
		if q.Duration != "" {
			duration = q.Duration
		}
		merge(q.JobSize)
	}
	return duration, size
}

// Named reports whether named queues are configured.
func (c *Config) Named() bool { return len(c.Queues) > 0 }

// CheckQueue says whether a job may be submitted to queue name ("" for
// none), with flux-core's messages; the submission is refused with
// EINVAL and the error's text.
func (c *Config) CheckQueue(name string) error {
	switch {
	case name == "" && c.Named():
		return fmt.Errorf("a named queue is required (queues: %s)", c.queueNames())
	case name == "":
		return nil
	case !c.Named():
		return fmt.Errorf("'%s' is not a valid queue (no queues are configured)", name)
	}
	if _, ok := c.Queues[name]; !ok {
		return fmt.Errorf("'%s' is not a valid queue (queues: %s)", name, c.queueNames())
	}
	return nil
}

// Requires returns the node properties queue name requires (nil for
// none or an unknown queue).
func (c *Config) Requires(name string) []string { return c.Queues[name].Requires }

// Preemptible reports whether the named queue's jobs are preemptible.
func (c *Config) Preemptible(name string) bool { return c.Queues[name].Preemptible }

// PreemptMode is queue name's preempt-mode ("" when it sets none).
func (c *Config) PreemptMode(name string) string { return c.Queues[name].PreemptMode }

// Names lists the named queues, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Queues))
	for n := range c.Queues {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *Config) queueNames() string { return strings.Join(c.Names(), ", ") }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), syscall.EINVAL)
}
