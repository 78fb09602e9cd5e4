package builtin

import (
	"encoding/json"
	"fmt"
	"math"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// sizeLimits bounds a job's size; 0 (or absent) means no limit.
type sizeLimits struct {
	NNodes int `json:"nnodes"`
	NCores int `json:"ncores"`
	NGPUs  int `json:"ngpus"`
}

// sizeBounds are a max and a min size.
type sizeBounds struct {
	Max sizeLimits `json:"max"`
	Min sizeLimits `json:"min"`
}

// normalize turns flux-core's -1 ("no limit") into 0 and refuses other
// negative counts.
func (b *sizeBounds) normalize(path string) error {
	for name, v := range map[string]*int{"max.nnodes": &b.Max.NNodes, "max.ncores": &b.Max.NCores, "max.ngpus": &b.Max.NGPUs,
		"min.nnodes": &b.Min.NNodes, "min.ncores": &b.Min.NCores, "min.ngpus": &b.Min.NGPUs} {
		switch {
		case *v == -1:
			*v = 0
		case *v < 0:
			return fmt.Errorf("config: %s%s must be >= 0, or -1 for no limit (got %d): %w", path, name, *v, syscall.EINVAL)
		}
	}
	return nil
}

// LimitJobSize rejects jobs outside configured size limits
// (policy.limits.job-size in flux-core: {max:{nnodes,ncores,ngpus},
// min:{...}}), or their queue's (queues: {NAME: {max, min}}) where it
// has its own.
type LimitJobSize struct {
	sizeBounds
	Queues map[string]*sizeBounds `json:"queues,omitempty"`
}

var (
	_ jobtap.Loader          = (*LimitJobSize)(nil)
	_ jobtap.Validator       = (*LimitJobSize)(nil)
	_ jobtap.QueueUpdateHook = (*LimitJobSize)(nil)
)

// Name implements jobtap.Plugin.
func (*LimitJobSize) Name() string { return ".limit-job-size" }

// Load implements jobtap.Loader.
func (l *LimitJobSize) Load(_ jobtap.Host, conf json.RawMessage) error {
	if len(conf) == 0 || string(conf) == "null" {
		return nil
	}
	if err := json.Unmarshal(conf, l); err != nil {
		return fmt.Errorf("config: %v: %w", err, syscall.EINVAL)
	}
	if err := l.normalize(""); err != nil {
		return err
	}
	for name, b := range l.Queues {
		if b == nil {
			return fmt.Errorf("config: queues.%s: want {max, min}: %w", name, syscall.EINVAL)
		}
		if err := b.normalize("queues." + name + "."); err != nil {
			return err
		}
	}
	return nil
}

// Query implements jobtap.Querier.
func (l *LimitJobSize) Query() any { return l }

// Validate implements jobtap.Validator. As in flux-core, the limits hold
// for every submitter, the instance owner included.
func (l *LimitJobSize) Validate(j *jobtap.Job, _ bool) error {
	if j.Jobspec == nil || j.Exempt {
		return nil
	}
	return l.check(j, j.Jobspec.Queue())
}

// QueueUpdate implements jobtap.QueueUpdateHook: the job must fit the
// new queue's limits.
func (l *LimitJobSize) QueueUpdate(j *jobtap.Job, queue string, owner bool) error {
	if owner || j.Jobspec == nil {
		return nil
	}
	return l.check(j, queue)
}

// check holds the job to the limits of queue, with flux-core's messages:
// every maximum is checked before any minimum.
func (l *LimitJobSize) check(j *jobtap.Job, queue string) error {
	js := j.Jobspec
	b := &l.sizeBounds
	if qb, ok := l.Queues[queue]; ok {
		b = qb
	}
	counts := []struct {
		what   string
		n      int
		lo, hi int
	}{
		{"nnodes", js.ResourceCount("node"), b.Min.NNodes, b.Max.NNodes},
		{"ncores", js.ResourceCount("core"), b.Min.NCores, b.Max.NCores},
		{"ngpus", js.ResourceCount("gpu"), b.Min.NGPUs, b.Max.NGPUs},
	}
	for _, c := range counts {
		if c.hi > 0 && c.n > c.hi {
			return fmt.Errorf("requested %s (%d) exceeds policy limit of %d%s", c.what, c.n, c.hi, forQueue(queue))
		}
	}
	for _, c := range counts {
		if c.lo > 0 && c.n < c.lo {
			return fmt.Errorf("requested %s (%d) is under policy limit of %d%s", c.what, c.n, c.lo, forQueue(queue))
		}
	}
	return nil
}

// forQueue is the tail of a limit message naming the job's queue (none
// for the anonymous queue).
func forQueue(queue string) string {
	if queue == "" {
		return ""
	}
	return " for queue " + queue
}

// LimitDuration rejects jobs whose duration exceeds the configured limit
// (policy.limits.duration, an FSD). It also guards updates of
// attributes.system.duration, which the instance owner may take beyond
// the limit.
type LimitDuration struct {
	limit  float64
	queues map[string]float64 // queues with their own limit
}

var (
	_ jobtap.Validator       = (*LimitDuration)(nil)
	_ jobtap.QueueUpdateHook = (*LimitDuration)(nil)
)

// Name implements jobtap.Plugin.
func (*LimitDuration) Name() string { return ".limit-duration" }

// Load implements jobtap.Loader: conf is {"duration": "FSD"}.
func (l *LimitDuration) Load(_ jobtap.Host, conf json.RawMessage) error {
	if len(conf) == 0 || string(conf) == "null" {
		return nil
	}
	var c struct {
		Duration string            `json:"duration"`
		Queues   map[string]string `json:"queues"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		return fmt.Errorf("config: %v: %w", err, syscall.EINVAL)
	}
	if c.Duration != "" {
		d, err := fsd.Parse(c.Duration)
		if err != nil {
			return fmt.Errorf("config: duration: %v: %w", err, syscall.EINVAL)
		}
		l.limit = d
	}
	for name, v := range c.Queues {
		d, err := fsd.Parse(v)
		if err != nil {
			return fmt.Errorf("config: queues.%s: %v: %w", name, err, syscall.EINVAL)
		}
		if l.queues == nil {
			l.queues = make(map[string]float64)
		}
		l.queues[name] = d
	}
	return nil
}

// Query implements jobtap.Querier.
func (l *LimitDuration) Query() any {
	q := map[string]any{"duration": l.limit}
	if len(l.queues) > 0 {
		q["queues"] = l.queues
	}
	return q
}

// limitFor is the limit of a job (in its queue).
func (l *LimitDuration) limitFor(j *jobtap.Job) float64 {
	if j == nil || j.Jobspec == nil {
		return l.limit
	}
	return l.queueLimit(j.Jobspec.Queue())
}

// queueOf is the queue a job names ("" for none).
func queueOf(j *jobtap.Job) string {
	if j == nil || j.Jobspec == nil {
		return ""
	}
	return j.Jobspec.Queue()
}

// queueLimit is the limit of queue name.
func (l *LimitDuration) queueLimit(name string) float64 {
	if d, ok := l.queues[name]; ok {
		return d
	}
	return l.limit
}

// QueueUpdate implements jobtap.QueueUpdateHook: the job's duration must
// be within the new queue's limit.
func (l *LimitDuration) QueueUpdate(j *jobtap.Job, queue string, owner bool) error {
	if owner || j.Jobspec == nil {
		return nil
	}
	d, err := j.Jobspec.Duration()
	if err != nil {
		return err
	}
	return l.check(d, l.queueLimit(queue), queue)
}

// check holds duration d to limit (of queue), with flux-core's message.
func (l *LimitDuration) check(d, limit float64, queue string) error {
	if limit <= 0 || math.IsInf(limit, 1) {
		return nil
	}
	if d == 0 || d > limit {
		shown := "unlimited"
		if d > 0 {
			shown = fsd.FormatPrecision(d, 2)
		}
		return fmt.Errorf("requested duration (%s) exceeds policy limit of %s%s", shown, fsd.FormatPrecision(limit, 2), forQueue(queue))
	}
	return nil
}

// Validate implements jobtap.Validator: the job's duration must be within
// its queue's limit, whoever submits it (the instance owner too, as in
// flux-core; only the owner's updates may go beyond limits).
func (l *LimitDuration) Validate(j *jobtap.Job, _ bool) error {
	if j.Jobspec == nil || j.Exempt {
		return nil
	}
	return l.QueueUpdate(j, j.Jobspec.Queue(), false)
}

// ReallocCheck implements jobtap.ReallocHook: a running job may grow only
// within the maximum sizes of its queue (the minimums held at submit).
func (l *LimitJobSize) ReallocCheck(j *jobtap.Job, cur, add jobtap.Size) error {
	if j.Jobspec == nil || j.Exempt {
		return nil
	}
	queue := j.Jobspec.Queue()
	b := &l.sizeBounds
	if qb, ok := l.Queues[queue]; ok {
		b = qb
	}
	for _, c := range []struct {
		what         string
		cur, add, hi int
	}{
		{"nnodes", cur.Nodes, add.Nodes, b.Max.NNodes},
		{"ncores", cur.Cores, add.Cores, b.Max.NCores},
		{"ngpus", cur.GPUs, add.GPUs, b.Max.NGPUs},
	} {
		if c.hi > 0 && c.add > 0 && c.cur+c.add > c.hi {
			return fmt.Errorf("growing the job to %s %d (%d + %d) exceeds policy limit of %d%s", c.what, c.cur+c.add, c.cur, c.add, c.hi, forQueue(queue))
		}
	}
	return nil
}

// Resized implements jobtap.ReallocHook (the size limits need no count).
func (*LimitJobSize) Resized(*jobtap.Job, jobtap.Size) {}
