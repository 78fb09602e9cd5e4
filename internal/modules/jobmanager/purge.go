package jobmanager

// Purging inactive jobs (flux job purge; [job-manager] inactive-age-limit
// and inactive-num-limit): a purged job's KVS directory is removed, the
// job manager forgets it, and job-list drops it on the
// job-purge-inactive event {jobs:[id, ...]} published once the removal
// is committed.
//
// job-manager.purge (instance owner) {age_limit?, num_limit?, force,
// batch?, jobs?} → {count}: with jobs, exactly those (each must be an
// inactive job the manager knows); otherwise the oldest inactive jobs
// while one is older than age_limit seconds or more than num_limit
// remain, at most batch (default 50, at most 1000) at a time. Without
// force nothing is purged and count says how many would be (all of
// them, not a batch).

import (
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

const (
	defaultPurgeBatch = 50
	maxPurgeBatch     = 1000
	// autoPurgePeriod is how often configured limits are applied.
	autoPurgePeriod = time.Second
)

// purgeLimits select inactive jobs to purge; a negative limit is none.
type purgeLimits struct {
	age float64 // seconds since the job became inactive
	num int     // inactive jobs to keep
}

func (l purgeLimits) none() bool { return l.age < 0 && l.num < 0 }

func (m *manager) handlePurge(r *flux.Request) {
	var req struct {
		AgeLimit *float64   `json:"age_limit"`
		NumLimit *int       `json:"num_limit"`
		Force    bool       `json:"force"`
		Batch    *int       `json:"batch"`
		Jobs     []jobid.ID `json:"jobs"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if m.whenLoaded(func() { m.handlePurge(r) }) {
		return // purge picks from every inactive job
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may purge jobs")
		return
	}
	lim := purgeLimits{age: -1, num: -1}
	if req.AgeLimit != nil && *req.AgeLimit != -1 {
		if *req.AgeLimit < 0 {
			r.Errorf(syscall.EINVAL, "age limit must be >= 0, not %g", *req.AgeLimit)
			return
		}
		lim.age = *req.AgeLimit
	}
	if req.NumLimit != nil && *req.NumLimit != -1 {
		if *req.NumLimit < 0 {
			r.Errorf(syscall.EINVAL, "num limit must be >= 0, not %d", *req.NumLimit)
			return
		}
		lim.num = *req.NumLimit
	}
	batch := defaultPurgeBatch
	if req.Batch != nil {
		if *req.Batch < 1 || *req.Batch > maxPurgeBatch {
			r.Errorf(syscall.EINVAL, "batch must be between 1 and %d, not %d", maxPurgeBatch, *req.Batch)
			return
		}
		batch = *req.Batch
	}
	var ids []jobid.ID
	if len(req.Jobs) > 0 {
		for _, id := range req.Jobs {
			j, ok := m.job(id)
			if !ok && m.forgottenIndex(id) >= 0 {
				continue // inactive, beyond what the manager keeps in memory
			}
			if !ok {
				r.Errorf(syscall.ENOENT, "%s: id not found", id.String())
				return
			}
			if j.State != jobtap.StateInactive {
				r.Errorf(syscall.EINVAL, "%s: cannot purge active job", id.String())
				return
			}
		}
		ids = req.Jobs
	} else {
		max := batch
		if !req.Force {
			max = -1 // how many in all
		}
		ids = m.purgeable(lim, max)
	}
	if !req.Force || len(ids) == 0 {
		r.Respond(map[string]any{"count": len(ids)})
		return
	}
	// answered once the records are gone from the KVS
	m.purge(ids, func(err error) {
		if err != nil {
			r.RespondError(fmt.Errorf("removing purged jobs from the KVS: %w", err))
			return
		}
		r.Respond(map[string]any{"count": len(ids)})
	})
}

// purgeable returns the oldest inactive jobs lim selects, at most max
// (negative: no bound).
func (m *manager) purgeable(lim purgeLimits, max int) []jobid.ID {
	if lim.none() {
		return nil
	}
	now := m.now()
	total := len(m.forgotten) + len(m.inactive)
	var ids []jobid.ID
	// oldest first: the forgotten jobs, then m.inactive
	for i := 0; i < total; i++ {
		if max >= 0 && len(ids) >= max {
			break
		}
		var id jobid.ID
		var t float64
		if i < len(m.forgotten) {
			id, t = m.forgotten[i].id, m.forgotten[i].tInactive
		} else {
			id = m.inactive[i-len(m.forgotten)]
			t = m.tInactive(id)
		}
		tooMany := lim.num >= 0 && total-i > lim.num
		tooOld := lim.age >= 0 && now-t > lim.age
		if !tooMany && !tooOld {
			break
		}
		ids = append(ids, id)
	}
	return ids
}

// forgottenIndex returns the index of id in m.forgotten, or -1.
func (m *manager) forgottenIndex(id jobid.ID) int {
	for i, f := range m.forgotten {
		if f.id == id {
			return i
		}
	}
	return -1
}

// tInactive returns when inactive job id became inactive.
func (m *manager) tInactive(id jobid.ID) float64 {
	if j, ok := m.jobs[id]; ok {
		return j.tInactive
	}
	return m.done[id].tInactive
}

// purge forgets the inactive jobs ids, removes their KVS directories and,
// once that is committed, tells job-list and calls done (optional).
func (m *manager) purge(ids []jobid.ID, done func(error)) {
	if len(ids) == 0 {
		return
	}
	gone := make(map[jobid.ID]bool, len(ids))
	m.snap.Changed(len(ids))
	for _, id := range ids {
		gone[id] = true
		m.batch.Unlink(jobDir(id))
		delete(m.jobs, id)
		delete(m.done, id)
	}
	keep := m.inactive[:0]
	ncompact := 0
	for i, id := range m.inactive {
		if gone[id] {
			continue
		}
		if i < m.ncompact {
			ncompact++
		}
		keep = append(keep, id)
	}
	clear(m.inactive[len(keep):])
	m.inactive, m.ncompact = keep, ncompact
	if len(m.forgotten) > 0 {
		kept := m.forgotten[:0]
		for _, f := range m.forgotten {
			if !gone[f.id] {
				kept = append(kept, f)
			}
		}
		clear(m.forgotten[len(kept):])
		m.forgotten = kept
	}
	m.purged += len(ids)
	payload, _ := json.Marshal(map[string]any{"jobs": ids})
	m.batch.AfterCommit(func(err error) {
		if err != nil {
			m.log.Error(fmt.Sprintf("removing %d purged jobs from the KVS failed", len(ids)), "err", err)
		}
		if err := m.h.Publish("job-purge-inactive", json.RawMessage(payload), false); err != nil {
			m.log.Error("job-purge-inactive event not published", "err", err)
		}
		if done != nil {
			done(err)
		}
	})
}

// setPurgeLimits sets the configured purge limits and, when there are
// some, makes sure autoPurge runs.
func (m *manager) setPurgeLimits(l purgeLimits) {
	m.purgeConf = l
	if !l.none() && !m.autoPurging {
		m.autoPurging = true
		m.h.Post(m.autoPurge)
	}
}

// autoPurge applies the configured limits now and every autoPurgePeriod
// while there are some.
func (m *manager) autoPurge() {
	if m.whenLoaded(m.autoPurge) {
		return
	}
	if m.purgeConf.none() {
		m.autoPurging = false
		return
	}
	for {
		ids := m.purgeable(m.purgeConf, maxPurgeBatch)
		m.purge(ids, nil)
		if len(ids) < maxPurgeBatch {
			break
		}
	}
	time.AfterFunc(autoPurgePeriod, func() { m.h.Post(m.autoPurge) })
}

// purgeConfig reads [job-manager] inactive-age-limit (an FSD string)
// and inactive-num-limit (an integer >= 0) from the instance
// configuration (config.get).
func purgeConfig(raw json.RawMessage) (purgeLimits, error) {
	lim := purgeLimits{age: -1, num: -1}
	var conf struct {
		JM struct {
			Age json.RawMessage `json:"inactive-age-limit"`
			Num json.RawMessage `json:"inactive-num-limit"`
		} `json:"job-manager"`
	}
	if len(raw) == 0 {
		return lim, nil
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return lim, fmt.Errorf("[job-manager]: %w", err)
	}
	if len(conf.JM.Age) > 0 {
		var s string
		if json.Unmarshal(conf.JM.Age, &s) != nil {
			return lim, fmt.Errorf("[job-manager] inactive-age-limit: expected a string (FSD), not %s", conf.JM.Age)
		}
		d, err := fsd.Parse(s)
		if err != nil {
			return lim, fmt.Errorf("[job-manager] inactive-age-limit: %w", err)
		}
		lim.age = d
	}
	if len(conf.JM.Num) > 0 {
		var n int
		if json.Unmarshal(conf.JM.Num, &n) != nil {
			return lim, fmt.Errorf("[job-manager] inactive-num-limit: expected an integer, not %s", conf.JM.Num)
		}
		if n < 0 {
			return lim, fmt.Errorf("[job-manager] inactive-num-limit: must be >= 0, not %d", n)
		}
		lim.num = n
	}
	return lim, nil
}
