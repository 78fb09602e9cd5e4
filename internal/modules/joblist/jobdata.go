package joblist

import (
	"path"
	"unique"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Only the parts of a jobspec (RFC 14/25) job-list needs (see
// decodeSpec). Decoding is lenient: an invalid jobspec leaves fields
// unset, as in flux-core.
type specResource struct {
	Type  string
	Count []byte // the raw count: an integer or a range object
	With  []specResource
}

type specTask struct {
	Command []string
	Count   struct {
		PerSlot *int
		Total   *int
	}
}

type specPerResource struct {
	Type  string
	Count *int
}

type specSystem struct {
	Duration *float64
	Cwd      string
	Queue    string
	Project  string
	Bank     string
	Job      struct {
		Name string
	}
	Shell struct {
		Options struct {
			PerResource *specPerResource
		}
	}
}

type specDoc struct {
	Resources  []specResource
	Tasks      []specTask
	Attributes struct {
		System specSystem
	}
}

// count reads a resource count: an integer, or a range object whose
// "min" is used.
func resCount(raw []byte) int {
	if n, err := jsonwire.Int(raw); err == nil {
		return int(n)
	}
	min := 0
	if isObject(raw) {
		err := jsonwire.Object(raw, func(k, v []byte) error {
			if string(k) == "min" && !jsonwire.IsNull(v) {
				n, err := jsonwire.Int(v)
				min = int(n)
				return err
			}
			return nil
		})
		if err != nil {
			return 0
		}
	}
	return min
}

// counts walks the resource tree as flux-core's jj does: nodes, slots
// (total) and cores per slot.
func specCounts(res []specResource) (nnodes, nslots, slotSize int) {
	var walk func(rs []specResource, mult int)
	walk = func(rs []specResource, mult int) {
		for _, r := range rs {
			c := resCount(r.Count)
			switch r.Type {
			case "node":
				nnodes += c * mult
				walk(r.With, mult*c)
			case "slot":
				nslots += c * mult
				for _, w := range r.With {
					if w.Type == "core" {
						slotSize = resCount(w.Count)
					}
				}
			default:
				walk(r.With, mult*c)
			}
		}
	}
	walk(res, 1)
	return
}

// specFields is what a record takes from its jobspec: name, cwd, queue,
// project, bank, duration, ntasks, nnodes and ncores. A count below 0
// leaves the record's as it is.
type specFields struct {
	ok                     bool // the jobspec could be decoded
	labels                 unique.Handle[labels]
	duration               float64
	nnodes, ncores, ntasks int32
}

// setJobspec sets the record's fields from a jobspec.
func (r *record) setJobspec(raw []byte) { r.applySpec(summarizeSpec(raw)) }

// applySpec sets the record's fields from a jobspec's summary.
func (r *record) applySpec(f specFields) {
	if !f.ok {
		return
	}
	r.labels = f.labels
	r.duration = f.duration
	if f.nnodes >= 0 {
		r.nnodes = f.nnodes
	}
	if f.ncores >= 0 {
		r.ncores = f.ncores
	}
	if f.ntasks >= 0 {
		r.ntasks = f.ntasks
	}
}

// summarizeSpec decodes what job-list shows of a jobspec. It does not
// keep raw.
func summarizeSpec(raw []byte) specFields {
	f := specFields{nnodes: -1, ncores: -1, ntasks: -1}
	js, err := decodeSpec(raw)
	if err != nil {
		return f
	}
	f.ok = true
	sys := &js.Attributes.System
	name := sys.Job.Name
	if name == "" && len(js.Tasks) > 0 && len(js.Tasks[0].Command) > 0 {
		arg0 := js.Tasks[0].Command[0]
		name = path.Base(arg0)
		if arg0 == "" || arg0[len(arg0)-1] == '/' {
			name = arg0
		}
	}
	f.labels = unique.Make(labels{name: name, cwd: sys.Cwd, queue: sys.Queue, project: sys.Project, bank: sys.Bank})
	if sys.Duration != nil {
		f.duration = *sys.Duration
	}
	nnodes, nslots, slotSize := specCounts(js.Resources)
	if nnodes > 0 {
		f.nnodes = int32(nnodes)
	}
	if nnodes == 0 && nslots > 0 && slotSize > 0 {
		f.ncores = int32(nslots * slotSize)
	}
	ntasks := -1
	if pr := sys.Shell.Options.PerResource; pr != nil {
		cnt := 1
		if pr.Count != nil {
			cnt = *pr.Count
		}
		switch {
		case pr.Type == "node" && nnodes > 0:
			ntasks = nnodes * cnt
		case pr.Type == "core" && nnodes == 0:
			ntasks = nslots * slotSize * cnt
		}
	}
	if ntasks < 0 && len(js.Tasks) > 0 {
		c := js.Tasks[0].Count
		switch {
		case c.Total != nil:
			ntasks = *c.Total
		case c.PerSlot != nil:
			ntasks = *c.PerSlot * nslots
		default:
			ntasks = nslots
		}
	}
	if ntasks >= 0 {
		f.ntasks = int32(ntasks)
	}
	return f
}

// setR extracts ranks, nnodes, ncores, nodelist and expiration from R
// (RFC 20).
func (r *record) setR(raw []byte) {
	ri, err := decodeR(raw)
	if err != nil {
		return
	}
	var ranks idset.Set
	ncores := 0
	for _, e := range ri.rlite {
		rs, err := idset.Parse(e.rank)
		if err != nil {
			return
		}
		ranks = ranks.Union(rs)
		if e.cores != "" {
			cs, err := idset.Parse(e.cores)
			if err == nil {
				ncores += rs.Count() * cs.Count()
			}
		}
	}
	r.ranks = intern(ranks.Encode(true))
	r.nnodes = int32(ranks.Count())
	if ncores > 0 {
		r.ncores = int32(ncores)
	}
	if len(ri.nodelist) > 0 {
		hl := hostlist.New()
		for _, s := range ri.nodelist {
			h, err := hostlist.Parse(s)
			if err != nil {
				hl = nil
				break
			}
			hl.AppendList(h)
		}
		if hl != nil {
			r.nodelist = intern(hl.String())
		}
	}
	if ri.expiration != nil {
		r.expiration = *ri.expiration
	} else {
		r.expiration = 0
	}
}
