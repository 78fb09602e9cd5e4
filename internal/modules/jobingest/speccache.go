package jobingest

import (
	"errors"

	"github.com/fluxgo/fluxgo/internal/memo"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// specCache remembers the outcome of parsing and checking the jobspecs
// submitted lately, by their exact text. Jobs submitted together are
// often identical (a job array, flux submit --cc, a throughput test),
// and a parsed jobspec is large: identical jobs share one, from here to
// the job manager, which treats jobspecs as read-only.
type specCache struct {
	entries *memo.Cache[*specEntry]
}

// specEntry is what checking one jobspec text found.
type specEntry struct {
	spec     *jobspec.Jobspec
	parseErr error // RFC 14 (or not JSON): always fatal
	v1Err    error // RFC 25: fatal unless the novalidate flag is set

	// defaulted: the same jobspec with configured defaults filled in
	defaulted map[defaults]defaultedSpec
}

// defaults are the configured values filled in a jobspec that sets none
// (policy.jobspec.defaults.system): "" and 0 leave it as it is.
type defaults struct {
	queue    string
	duration float64
	// the bank and project the job is charged to (accounting.go)
	bank, project string
}

// defaultedSpec is a jobspec with defaults filled in: its text (what is
// stored as the job's jobspec) and parsed form.
type defaultedSpec struct {
	text []byte
	spec *jobspec.Jobspec
}

// specCacheSize bounds the jobspecs remembered.
const specCacheSize = 64

func newSpecCache() *specCache {
	return &specCache{entries: memo.New[*specEntry](specCacheSize)}
}

// check returns the parsed jobspec, or why it is refused.
func (c *specCache) check(text []byte, novalidate bool) (*jobspec.Jobspec, error) {
	e, ok := c.entries.LookupBytes(text)
	if !ok {
		e = parseSpec(text)
		c.entries.Put(string(text), e)
	}
	if e.parseErr != nil {
		return nil, e.parseErr
	}
	if e.v1Err != nil && !novalidate {
		return nil, e.v1Err
	}
	return e.spec, nil
}

func parseSpec(text []byte) *specEntry {
	spec, err := jobspec.Parse(text)
	if err != nil {
		return &specEntry{parseErr: err}
	}
	if !jsonwire.Valid(text) {
		return &specEntry{parseErr: errors.New("the signed jobspec must be JSON")}
	}
	return &specEntry{spec: spec, v1Err: spec.ValidateV1()}
}

// withDefaults returns the jobspec text (already checked) with the
// queue and duration of d set, and its parsed form: what a job that names
// no queue, or sets no time limit, is stored with when defaults are
// configured.
func (c *specCache) withDefaults(text []byte, d defaults) ([]byte, *jobspec.Jobspec, error) {
	e, ok := c.entries.LookupBytes(text)
	if !ok || e.spec == nil {
		e = parseSpec(text)
		if e.parseErr != nil {
			return nil, nil, e.parseErr
		}
		c.entries.Put(string(text), e)
	}
	if q, ok := e.defaulted[d]; ok {
		return q.text, q.spec, nil
	}
	spec, err := jobspec.Parse(text) // a copy: cached jobspecs are shared
	if err != nil {
		return nil, nil, err
	}
	if d.queue != "" {
		spec.SetQueue(d.queue)
	}
	if d.duration > 0 {
		if err := spec.SetDuration(d.duration); err != nil {
			return nil, nil, err
		}
	}
	for _, kv := range []struct{ key, val string }{{"system.bank", d.bank}, {"system.project", d.project}} {
		if kv.val != "" {
			if err := spec.SetAttribute(kv.key, kv.val); err != nil {
				return nil, nil, err
			}
		}
	}
	out, err := spec.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	if e.defaulted == nil {
		e.defaulted = make(map[defaults]defaultedSpec)
	}
	e.defaulted[d] = defaultedSpec{text: out, spec: spec}
	return out, spec, nil
}
