package builtin

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// History remembers each user's submitted jobs, newest last, for
// `flux job last` (job-manager.history.get).
type History struct {
	byUser map[uint32][]jobid.ID
	limit  int
}

func newHistory() *History { return &History{byUser: make(map[uint32][]jobid.ID), limit: 1000} }

var (
	_ jobtap.NewHook         = (*History)(nil)
	_ jobtap.InactiveAddHook = (*History)(nil)
	_ jobtap.Servicer        = (*History)(nil)
)

// Name implements jobtap.Plugin.
func (*History) Name() string { return ".history" }

// JobInactiveAdd implements jobtap.InactiveAddHook: a restart keeps the
// history of ended jobs too, in id (submission) order among the rest.
func (hp *History) JobInactiveAdd(j *jobtap.Job) {
	list := hp.byUser[j.Userid]
	i, found := slices.BinarySearch(list, j.ID)
	if found {
		return
	}
	list = slices.Insert(list, i, j.ID)
	if len(list) > hp.limit {
		list = list[len(list)-hp.limit:]
	}
	hp.byUser[j.Userid] = list
}

// JobNew implements jobtap.NewHook.
func (hp *History) JobNew(j *jobtap.Job) {
	list := append(hp.byUser[j.Userid], j.ID)
	if len(list) > hp.limit {
		list = list[len(list)-hp.limit:]
	}
	hp.byUser[j.Userid] = list
}

// Methods implements jobtap.Servicer.
func (hp *History) Methods() []jobtap.Method {
	return []jobtap.Method{{Topic: "history.get", Handler: hp.get}}
}

func (hp *History) get(payload json.RawMessage, userid uint32, owner bool) (any, error) {
	var req struct {
		Max    int     `json:"max"`
		Userid *uint32 `json:"userid"`
	}
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, fmt.Errorf("history.get: %v: %w", err, syscall.EPROTO)
		}
	}
	uid := userid
	if req.Userid != nil {
		if *req.Userid != userid && !owner {
			return nil, fmt.Errorf("history.get: only the owner may read another user's history: %w", syscall.EPERM)
		}
		uid = *req.Userid
	}
	list := hp.byUser[uid]
	out := make([]jobid.ID, 0, len(list))
	for i := len(list) - 1; i >= 0; i-- {
		out = append(out, list[i])
		if req.Max > 0 && len(out) >= req.Max {
			break
		}
	}
	return map[string]any{"jobs": out}, nil
}
