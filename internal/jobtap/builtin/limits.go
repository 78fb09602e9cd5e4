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

// LimitJobSize rejects jobs outside configured size limits
// (policy.limits.job-size in flux-core: {max:{nnodes,ncores,ngpus},
// min:{...}}). The instance owner is exempt.
type LimitJobSize struct {
	Max sizeLimits `json:"max"`
	Min sizeLimits `json:"min"`
}

var (
	_ jobtap.Loader    = (*LimitJobSize)(nil)
	_ jobtap.Validator = (*LimitJobSize)(nil)
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
	for name, v := range map[string]*int{"max.nnodes": &l.Max.NNodes, "max.ncores": &l.Max.NCores, "max.ngpus": &l.Max.NGPUs,
		"min.nnodes": &l.Min.NNodes, "min.ncores": &l.Min.NCores, "min.ngpus": &l.Min.NGPUs} {
		switch {
		case *v == -1: // flux-core's spelling of "no limit"
			*v = 0
		case *v < 0:
			return fmt.Errorf("config: %s must be >= 0, or -1 for no limit (got %d): %w", name, *v, syscall.EINVAL)
		}
	}
	return nil
}

// Query implements jobtap.Querier.
func (l *LimitJobSize) Query() any { return l }

// Validate implements jobtap.Validator.
func (l *LimitJobSize) Validate(j *jobtap.Job, owner bool) error {
	if owner || j.Jobspec == nil {
		return nil
	}
	js := j.Jobspec
	check := func(what string, n, lo, hi int) error {
		if hi > 0 && n > hi {
			return fmt.Errorf("job %s of %d exceeds the limit of %d", what, n, hi)
		}
		if lo > 0 && n < lo {
			return fmt.Errorf("job %s of %d is below the minimum of %d", what, n, lo)
		}
		return nil
	}
	if err := check("nnodes", js.ResourceCount("node"), l.Min.NNodes, l.Max.NNodes); err != nil {
		return err
	}
	if err := check("ncores", js.ResourceCount("core"), l.Min.NCores, l.Max.NCores); err != nil {
		return err
	}
	return check("ngpus", js.ResourceCount("gpu"), l.Min.NGPUs, l.Max.NGPUs)
}

// LimitDuration rejects jobs whose duration exceeds the configured limit
// (policy.limits.duration, an FSD); the owner is exempt. It also guards
// updates of attributes.system.duration.
type LimitDuration struct {
	limit float64
}

var (
	_ jobtap.Validator  = (*LimitDuration)(nil)
	_ jobtap.UpdateHook = (*LimitDuration)(nil)
)

// Name implements jobtap.Plugin.
func (*LimitDuration) Name() string { return ".limit-duration" }

// Load implements jobtap.Loader: conf is {"duration": "FSD"}.
func (l *LimitDuration) Load(_ jobtap.Host, conf json.RawMessage) error {
	if len(conf) == 0 || string(conf) == "null" {
		return nil
	}
	var c struct {
		Duration string `json:"duration"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		return fmt.Errorf("config: %v: %w", err, syscall.EINVAL)
	}
	if c.Duration == "" {
		return nil
	}
	d, err := fsd.Parse(c.Duration)
	if err != nil {
		return fmt.Errorf("config: duration: %v: %w", err, syscall.EINVAL)
	}
	l.limit = d
	return nil
}

// Query implements jobtap.Querier.
func (l *LimitDuration) Query() any { return map[string]any{"duration": l.limit} }

func (l *LimitDuration) check(d float64) error {
	if l.limit <= 0 || math.IsInf(l.limit, 1) {
		return nil
	}
	if d == 0 || d > l.limit {
		shown := "unlimited"
		if d > 0 {
			shown = fsd.Format(d)
		}
		return fmt.Errorf("job duration %s exceeds the limit of %s", shown, fsd.Format(l.limit))
	}
	return nil
}

// Validate implements jobtap.Validator.
func (l *LimitDuration) Validate(j *jobtap.Job, owner bool) error {
	if owner || j.Jobspec == nil {
		return nil
	}
	d, err := j.Jobspec.Duration()
	if err != nil {
		return err
	}
	return l.check(d)
}

// UpdateKeys implements jobtap.UpdateHook.
func (*LimitDuration) UpdateKeys() []string { return []string{"attributes.system.duration"} }

// Update implements jobtap.UpdateHook.
func (l *LimitDuration) Update(_ *jobtap.Job, _ string, v any, owner bool) (any, error) {
	var d float64
	switch x := v.(type) {
	case float64:
		d = x
	case string:
		var err error
		if d, err = fsd.Parse(x); err != nil {
			return nil, fmt.Errorf("%v: %w", err, syscall.EINVAL)
		}
	default:
		return nil, fmt.Errorf("duration must be a number of seconds or an FSD string: %w", syscall.EINVAL)
	}
	if d < 0 {
		return nil, fmt.Errorf("duration must not be negative: %w", syscall.EINVAL)
	}
	if !owner {
		if err := l.check(d); err != nil {
			return nil, fmt.Errorf("%v: %w", err, syscall.EPERM)
		}
	}
	return d, nil
}
