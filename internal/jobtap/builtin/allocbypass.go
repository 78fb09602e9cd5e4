package builtin

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// AllocBypass lets the instance owner run a job on resources it names
// itself (seed 001): a jobspec carrying attributes.system.alloc-bypass.R
// (or the older attributes.system.R) is allocated that R without asking
// the scheduler, and the scheduler is not told when it is freed.
type AllocBypass struct {
	h jobtap.Host
}

var (
	_ jobtap.Loader    = (*AllocBypass)(nil)
	_ jobtap.Validator = (*AllocBypass)(nil)
	_ jobtap.NewHook   = (*AllocBypass)(nil)
	_ jobtap.AllocHook = (*AllocBypass)(nil)
)

// Name implements jobtap.Plugin.
func (*AllocBypass) Name() string { return "alloc-bypass" }

// Load implements jobtap.Loader.
func (a *AllocBypass) Load(h jobtap.Host, _ json.RawMessage) error {
	a.h = h
	return nil
}

// bypassR returns the R a jobspec brings, if any.
func bypassR(j *jobtap.Job) (any, bool) {
	if j.Jobspec == nil {
		return nil, false
	}
	if v, ok := j.Jobspec.Attribute("system.alloc-bypass.R"); ok {
		return v, true
	}
	if v, ok := j.Jobspec.Attribute("system.R"); ok {
		return v, true
	}
	return nil, false
}

func encodeR(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case string:
		raw = []byte(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	r, err := rset.Parse(raw)
	if err != nil {
		return nil, err
	}
	return r.Encode(), nil
}

// Validate implements jobtap.Validator.
func (a *AllocBypass) Validate(j *jobtap.Job, owner bool) error {
	v, ok := bypassR(j)
	if !ok {
		return nil
	}
	if !owner {
		return fmt.Errorf("alloc-bypass: only the instance owner may submit a job with its own R")
	}
	if _, err := encodeR(v); err != nil {
		return fmt.Errorf("alloc-bypass: invalid R: %v", err)
	}
	return nil
}

// JobNew implements jobtap.NewHook: mark bypass jobs with a flag.
func (a *AllocBypass) JobNew(j *jobtap.Job) {
	if _, ok := bypassR(j); ok && j.State == jobtap.StateNew {
		a.h.PostEvent(j.ID, "set-flags", map[string]any{"flags": []string{"alloc-bypass"}})
	}
}

// Alloc implements jobtap.AllocHook.
func (a *AllocBypass) Alloc(j *jobtap.Job) (json.RawMessage, bool, error) {
	v, ok := bypassR(j)
	if !ok {
		return nil, false, nil
	}
	R, err := encodeR(v)
	if err != nil {
		return nil, false, fmt.Errorf("alloc-bypass: invalid R: %v", err)
	}
	return R, true, nil
}
