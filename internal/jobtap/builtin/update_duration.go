package builtin

import (
	"encoding/json"
	"fmt"
	"math"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// UpdateDuration allows flux update of a job's duration (flux-core's
// .update-duration): a pending job's by its owner or the instance owner,
// a running job's by the instance owner only. The new duration is then
// checked like a submitted one (.limit-duration), except that the
// instance owner's update needs no check unless owner-allow-any=0.
type UpdateDuration struct {
	ownerAllowAny bool
}

var _ jobtap.UpdateHook = (*UpdateDuration)(nil)

// Name implements jobtap.Plugin.
func (*UpdateDuration) Name() string { return ".update-duration" }

// Load implements jobtap.Loader: conf is {"owner-allow-any": 0 or 1}.
func (u *UpdateDuration) Load(_ jobtap.Host, conf json.RawMessage) error {
	u.ownerAllowAny = true
	if len(conf) == 0 || string(conf) == "null" {
		return nil
	}
	var c struct {
		OwnerAllowAny *int `json:"owner-allow-any"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		return fmt.Errorf("config: owner-allow-any must be 0 or 1: %v: %w", err, syscall.EINVAL)
	}
	if c.OwnerAllowAny != nil {
		if *c.OwnerAllowAny != 0 && *c.OwnerAllowAny != 1 {
			return fmt.Errorf("config: owner-allow-any=%d: must be 0 or 1: %w", *c.OwnerAllowAny, syscall.EINVAL)
		}
		u.ownerAllowAny = *c.OwnerAllowAny == 1
	}
	return nil
}

// Query implements jobtap.Querier.
func (u *UpdateDuration) Query() any {
	return map[string]any{"owner-allow-any": u.ownerAllowAny}
}

// UpdateKeys implements jobtap.UpdateHook.
func (*UpdateDuration) UpdateKeys() []string { return []string{"attributes.system.duration"} }

// Update implements jobtap.UpdateHook.
func (u *UpdateDuration) Update(j *jobtap.Job, _ string, v any, owner bool) (any, error) {
	var d float64
	switch x := v.(type) {
	case float64:
		d = x
	case string:
		var err error
		if d, err = fsd.Parse(x); err != nil {
			return nil, flux.NewError(syscall.EINVAL, err.Error())
		}
	default:
		return nil, flux.NewError(syscall.EINVAL, "duration must be a number of seconds or an FSD string")
	}
	if d < 0 || math.IsNaN(d) {
		return nil, flux.NewError(syscall.EINVAL, "duration must not be negative")
	}
	if math.IsInf(d, 1) {
		d = 0 // RFC 23 infinity: jobspec's unlimited
	}
	if j.State == jobtap.StateRun || j.State == jobtap.StateCleanup {
		if !owner || !u.ownerAllowAny {
			return nil, flux.NewError(syscall.EPERM, "duration update of running job requires instance owner privileges")
		}
	}
	if owner && u.ownerAllowAny {
		return jobtap.Validated{Value: d}, nil
	}
	return d, nil
}
