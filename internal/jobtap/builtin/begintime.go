package builtin

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
)

// BeginTime holds a job in DEPEND until the time given by its
// "begin-time" dependency (RFC 26; flux submit --begin-time).
type BeginTime struct {
	h jobtap.Host
}

var (
	_ jobtap.Loader     = (*BeginTime)(nil)
	_ jobtap.Validator  = (*BeginTime)(nil)
	_ jobtap.DependHook = (*BeginTime)(nil)
)

// Name implements jobtap.Plugin.
func (*BeginTime) Name() string { return ".begin-time" }

// Load implements jobtap.Loader.
func (b *BeginTime) Load(h jobtap.Host, _ json.RawMessage) error {
	b.h = h
	return nil
}

// maxBeginTime bounds a begin-time: 2^33 s after the epoch (the year
// 2242). Past about 9.2e9 s a wait no longer fits a time.Duration, and
// a job so held was released at once.
const maxBeginTime = 1 << 33

// parseBeginTime reads a begin-time dependency's value: a timestamp,
// not negative, finite, at most maxBeginTime.
func parseBeginTime(s string) (float64, error) {
	t, err := strconv.ParseFloat(s, 64)
	if err != nil || t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
		return 0, fmt.Errorf("Invalid begin-time=%s", s)
	}
	if t > maxBeginTime {
		return 0, fmt.Errorf("Invalid begin-time=%s: after %d, the latest a job may be held until", s, int64(maxBeginTime))
	}
	return t, nil
}

// Validate implements jobtap.Validator: a begin-time that is not a
// timestamp is refused at submission, as flux-core does.
func (b *BeginTime) Validate(j *jobtap.Job, _ bool) error {
	if j.Jobspec == nil {
		return nil
	}
	deps, err := j.Jobspec.Dependencies()
	if err != nil {
		return nil // not ours to judge: the dependency plugins say why
	}
	for _, d := range deps {
		if d.Scheme != "begin-time" {
			continue
		}
		if _, err := parseBeginTime(d.Value); err != nil {
			return err
		}
	}
	return nil
}

// JobDepend implements jobtap.DependHook.
func (b *BeginTime) JobDepend(j *jobtap.Job) error {
	if j.Jobspec == nil {
		return nil
	}
	deps, err := j.Jobspec.Dependencies()
	if err != nil {
		return err
	}
	for _, d := range deps {
		if d.Scheme != "begin-time" {
			continue
		}
		t, err := parseBeginTime(d.Value)
		if err != nil {
			return err
		}
		wait := time.Until(time.Unix(0, int64(t*1e9)))
		if wait <= 0 {
			continue
		}
		desc := "begin-time=" + strconv.FormatFloat(t, 'f', 3, 64)
		if err := b.h.AddDependency(j.ID, desc); err != nil {
			return err
		}
		id := j.ID
		b.h.AfterFunc(wait, func() { b.h.RemoveDependency(id, desc) })
	}
	return nil
}
