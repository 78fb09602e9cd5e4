package schedsimple

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// acquireGrowth applies the resource.acquire responses of dynamic
// resources (RFC 51), which the resource module adds to RFC 28's:
// {resources: R} adds R's nodes to the pool, down until an {up}
// response says otherwise (pending jobs are scheduled then), and
// {shrink: idset} removes nodes, which the pool refuses, with an error
// logged, while a job holds some of their resources. The feasibility
// of jobspecs is worked out again for the new inventory; jobs already
// queued stay queued.
func (s *scheduler) acquireGrowth(m *flux.Message) {
	var resp struct {
		Resources json.RawMessage `json:"resources"`
		Shrink    *string         `json:"shrink"`
	}
	if m.UnmarshalPayload(&resp) != nil {
		return // acquireUpdate says why
	}
	if len(resp.Resources) > 0 && string(resp.Resources) != "null" {
		r, err := rset.Parse(resp.Resources)
		switch {
		case err != nil:
			s.log.Error("resource.acquire: bad resources", "err", err)
		default:
			if err := s.pool.Grow(r); err != nil {
				s.log.Error(fmt.Sprintf("resource.acquire: cannot grow by rank %s: %v", r.Ranks(), err))
				break
			}
			s.resetFeasibility()
			s.log.Info(fmt.Sprintf("grew by rank %s: %d nodes, %d cores, %d gpus", r.Ranks(), r.NNodes(), r.NCores(), r.NGPUs()))
		}
	}
	if resp.Shrink != nil {
		ranks, err := idset.Parse(*resp.Shrink)
		switch {
		case err != nil:
			s.log.Error("resource.acquire: bad shrink idset", "err", err)
		default:
			if err := s.pool.Shrink(ranks); err != nil {
				s.log.Error(fmt.Sprintf("resource.acquire: cannot give back rank %s: %v", ranks, err))
				break
			}
			s.resetFeasibility()
			s.log.Info(fmt.Sprintf("shrank by rank %s", ranks))
		}
	}
}

// resetFeasibility forgets the cached requests: their feasibility was
// decided against the old inventory.
func (s *scheduler) resetFeasibility() {
	s.cache = newRequestCache(s.cache.policy)
}
