// Package policy reads the job policy of the instance configuration, the
// tables flux-config-queues(5) and flux-config-policy(5) describe:
//
//	[policy.limits]
//	duration = "1h"                 # longest time limit (FSD)
//	job-size.max.nnodes = 8         # also ncores, ngpus; and job-size.min
//
//	[policy.jobspec.defaults.system]
//	queue = "batch"                 # for jobs that name none
//
//	[queues.batch]                  # named queues (none: one anonymous)
//	requires = ["batch"]            # node properties the queue runs on
//	[queues.debug]
//
// job-ingest checks a job's queue (and fills in the default) at submit
// time, sched-simple confines each queue's jobs to the nodes with its
// properties, and the job manager configures its limit plugins from
// policy.limits.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// Config is the job policy. The zero value is flux's default: one
// anonymous queue and no limits.
type Config struct {
	// Duration is policy.limits.duration as given (an FSD), "" for none.
	Duration string
	// JobSize is policy.limits.job-size ({max: {...}, min: {...}}), nil
	// for none.
	JobSize json.RawMessage
	// Queues are the named queues; empty means the anonymous queue only.
	Queues map[string]Queue
	// DefaultQueue is policy.jobspec.defaults.system.queue, "" for none.
	DefaultQueue string
}

// Queue is one named queue.
type Queue struct {
	// Requires lists the node properties (RFC 20) a node must have to
	// run the queue's jobs.
	Requires []string
}

// Fetch reads the instance configuration (config.get) and parses its
// job policy.
func Fetch(ctx context.Context, h *flux.Handle) (*Config, error) {
	var raw json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &raw); err != nil {
		return nil, fmt.Errorf("config.get: %w", err)
	}
	return Parse(raw)
}

// Parse extracts the job policy from the configuration object (the TOML
// configuration as JSON). Other tables are ignored; a malformed policy
// or queues table is an error that names the key.
func Parse(conf []byte) (*Config, error) {
	var top struct {
		Policy *struct {
			Limits *struct {
				Duration json.RawMessage `json:"duration"`
				JobSize  json.RawMessage `json:"job-size"`
			} `json:"limits"`
			Jobspec *struct {
				Defaults *struct {
					System map[string]json.RawMessage `json:"system"`
				} `json:"defaults"`
			} `json:"jobspec"`
		} `json:"policy"`
		Queues map[string]json.RawMessage `json:"queues"`
	}
	c := &Config{}
	if len(conf) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(conf, &top); err != nil {
		return nil, invalid("policy or queues table: %v", err)
	}
	if p := top.Policy; p != nil && p.Limits != nil {
		if d := p.Limits.Duration; len(d) > 0 && string(d) != "null" {
			if err := json.Unmarshal(d, &c.Duration); err != nil {
				return nil, invalid("policy.limits.duration must be a string (an FSD such as \"1h\"), not %s", d)
			}
			if _, err := fsd.Parse(c.Duration); err != nil {
				return nil, invalid("policy.limits.duration: %v", err)
			}
		}
		if js := p.Limits.JobSize; len(js) > 0 && string(js) != "null" {
			if err := checkJobSize(js); err != nil {
				return nil, err
			}
			c.JobSize = js
		}
	}
	for name, v := range top.Queues {
		var q struct {
			Requires json.RawMessage `json:"requires"`
		}
		if err := json.Unmarshal(v, &q); err != nil {
			return nil, invalid("queues.%s must be a table, not %s", name, v)
		}
		var queue Queue
		if len(q.Requires) > 0 && string(q.Requires) != "null" {
			if err := json.Unmarshal(q.Requires, &queue.Requires); err != nil {
				return nil, invalid("queues.%s.requires must be an array of property names, not %s", name, q.Requires)
			}
			for _, prop := range queue.Requires {
				if strings.TrimPrefix(prop, "^") == "" || strings.ContainsAny(prop, " \t!&'\"`|()") {
					return nil, invalid("queues.%s.requires: %q is not a valid property name", name, prop)
				}
			}
		}
		if c.Queues == nil {
			c.Queues = make(map[string]Queue)
		}
		c.Queues[name] = queue
	}
	if p := top.Policy; p != nil && p.Jobspec != nil && p.Jobspec.Defaults != nil {
		if q, ok := p.Jobspec.Defaults.System["queue"]; ok {
			if err := json.Unmarshal(q, &c.DefaultQueue); err != nil {
				return nil, invalid("policy.jobspec.defaults.system.queue must be a string, not %s", q)
			}
			if _, ok := c.Queues[c.DefaultQueue]; !ok {
				return nil, invalid("policy.jobspec.defaults.system.queue: %q is not a configured queue (queues: %s)",
					c.DefaultQueue, c.queueNames())
			}
		}
	}
	return c, nil
}

// checkJobSize checks policy.limits.job-size: {max, min} of {nnodes,
// ncores, ngpus} counts (-1 or absent: no limit).
func checkJobSize(raw json.RawMessage) error {
	var js map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &js); err != nil {
		return invalid("policy.limits.job-size must be a table of max and min tables, not %s", raw)
	}
	for bound, counts := range js {
		if bound != "max" && bound != "min" {
			return invalid("policy.limits.job-size.%s: unknown key (want max or min)", bound)
		}
		for what, v := range counts {
			if what != "nnodes" && what != "ncores" && what != "ngpus" {
				return invalid("policy.limits.job-size.%s.%s: unknown key (want nnodes, ncores or ngpus)", bound, what)
			}
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n < -1 {
				return invalid("policy.limits.job-size.%s.%s must be a count (-1 for none), not %s", bound, what, v)
			}
		}
	}
	return nil
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

func (c *Config) queueNames() string {
	names := make([]string, 0, len(c.Queues))
	for n := range c.Queues {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), syscall.EINVAL)
}
