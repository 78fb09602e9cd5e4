package joblist

import (
	"encoding/json"
	"path"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// Only the parts of a jobspec (RFC 14/25) job-list needs. Decoding is
// lenient: an invalid jobspec leaves fields unset, as in flux-core.
type specResource struct {
	Type  string          `json:"type"`
	Count json.RawMessage `json:"count"`
	With  []specResource  `json:"with"`
}

type specDoc struct {
	Resources []specResource `json:"resources"`
	Tasks     []struct {
		Command []string `json:"command"`
		Count   struct {
			PerSlot *int `json:"per_slot"`
			Total   *int `json:"total"`
		} `json:"count"`
	} `json:"tasks"`
	Attributes struct {
		System struct {
			Duration *float64 `json:"duration"`
			Cwd      string   `json:"cwd"`
			Queue    string   `json:"queue"`
			Project  string   `json:"project"`
			Bank     string   `json:"bank"`
			Job      struct {
				Name string `json:"name"`
			} `json:"job"`
			Shell struct {
				Options struct {
					PerResource *struct {
						Type  string `json:"type"`
						Count *int   `json:"count"`
					} `json:"per-resource"`
				} `json:"options"`
			} `json:"shell"`
		} `json:"system"`
	} `json:"attributes"`
}

// count reads a resource count: an integer, or a range object whose
// "min" is used.
func resCount(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var r struct {
		Min int `json:"min"`
	}
	if json.Unmarshal(raw, &r) == nil {
		return r.Min
	}
	return 0
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

// setJobspec extracts name, cwd, queue, project, bank, duration, ntasks,
// nnodes and ncores from a jobspec.
func (r *record) setJobspec(raw []byte) {
	var js specDoc
	if json.Unmarshal(raw, &js) != nil {
		return
	}
	sys := &js.Attributes.System
	name := sys.Job.Name
	if name == "" && len(js.Tasks) > 0 && len(js.Tasks[0].Command) > 0 {
		arg0 := js.Tasks[0].Command[0]
		name = path.Base(arg0)
		if arg0 == "" || arg0[len(arg0)-1] == '/' {
			name = arg0
		}
	}
	r.name = intern(name)
	r.cwd = intern(sys.Cwd)
	r.queue = intern(sys.Queue)
	r.project = intern(sys.Project)
	r.bank = intern(sys.Bank)
	r.duration = 0
	if sys.Duration != nil {
		r.duration = *sys.Duration
	}
	nnodes, nslots, slotSize := specCounts(js.Resources)
	if nnodes > 0 {
		r.nnodes = int32(nnodes)
	}
	if nnodes == 0 && nslots > 0 && slotSize > 0 {
		r.ncores = int32(nslots * slotSize)
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
		r.ntasks = int32(ntasks)
	}
}

// setR extracts ranks, nnodes, ncores, nodelist and expiration from R
// (RFC 20).
func (r *record) setR(raw []byte) {
	var R struct {
		Execution struct {
			RLite []struct {
				Rank     string            `json:"rank"`
				Children map[string]string `json:"children"`
			} `json:"R_lite"`
			Nodelist   []string `json:"nodelist"`
			Expiration *float64 `json:"expiration"`
		} `json:"execution"`
	}
	if json.Unmarshal(raw, &R) != nil {
		return
	}
	var ranks idset.Set
	ncores := 0
	for _, e := range R.Execution.RLite {
		rs, err := idset.Parse(e.Rank)
		if err != nil {
			return
		}
		ranks = ranks.Union(rs)
		if c, ok := e.Children["core"]; ok {
			cs, err := idset.Parse(c)
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
	if len(R.Execution.Nodelist) > 0 {
		hl := hostlist.New()
		for _, s := range R.Execution.Nodelist {
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
	if R.Execution.Expiration != nil {
		r.expiration = *R.Execution.Expiration
	} else {
		r.expiration = 0
	}
}
