package builtin

import (
	"encoding/json"
	"fmt"
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
	_ jobtap.DependHook = (*BeginTime)(nil)
)

// Name implements jobtap.Plugin.
func (*BeginTime) Name() string { return ".begin-time" }

// Load implements jobtap.Loader.
func (b *BeginTime) Load(h jobtap.Host, _ json.RawMessage) error {
	b.h = h
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
		t, err := strconv.ParseFloat(d.Value, 64)
		if err != nil || t < 0 {
			return fmt.Errorf("begin-time: invalid timestamp %q", d.Value)
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
