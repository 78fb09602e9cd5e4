package builtin

import (
	"encoding/json"
	"fmt"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// AccountLimits enforces per-association limits (seed 003: "enforce
// accounting limits ... e.g. total nodes across all of a user+bank's
// jobs"). An association is a user and the bank a job is charged to
// (attributes.system.bank, flux submit -B; "" for none). The [accounting]
// table sets them, each key overriding the one before it:
//
//	[accounting]                        # every association
//	max-active-jobs = 100               # submitted, not yet inactive
//	max-running-jobs = 10               # released to run (past DEPEND)
//	max-nodes = 16                      # nodes of its released jobs
//	max-cores = 512                     # cores of its released jobs
//	[accounting.banks.physics]          # jobs charged to a bank
//	max-running-jobs = 4
//	[accounting.users.alice]            # a user (name or uid), any bank
//	max-running-jobs = 20
//	[accounting.users."alice:physics"]  # one association
//	max-nodes = 32
//
// 0 (or no key) is no limit. A submission that would exceed
// max-active-jobs, or that asks for more nodes or cores than its
// association may ever hold, is refused. A job that would exceed
// max-running-jobs, max-nodes or max-cores now waits in DEPEND with the
// dependency flux-accounting uses (max-running-jobs-user-limit or
// max-resources-user-limit) and is released, in submission order, as
// the association's jobs end. The limits hold for the instance owner
// too. flux jobtap query .accounting-limits shows each association's use.
//
// Exempt jobs (seed 003: "allow jobs to be modified to exceed system and
// accounting limits"): attributes.system.exempt, which only the instance
// owner may set (at submission, or later with flux update ID exempt=1),
// takes a job out of every limit: these and the policy limits.
type AccountLimits struct {
	h     jobtap.Host
	cfg   acctConfig
	db    *accounting.Index // the accounting database (acctdb.go)
	assoc map[assocKey]*assocUse
	jobs  map[jobid.ID]*acctJob
}

type assocKey struct {
	uid  uint32
	bank string
}

type acctLimits struct {
	MaxActive  *int `json:"max-active-jobs"`
	MaxRunning *int `json:"max-running-jobs"`
	MaxNodes   *int `json:"max-nodes"`
	MaxCores   *int `json:"max-cores"`
	// privileges, applied by the job manager (policy.Config.Privileges)
	Exempt   *bool `json:"exempt"`
	Expedite *bool `json:"expedite"`
}

type acctConfig struct {
	def   acctLimits
	banks map[string]acctLimits
	users map[string]acctLimits // "UID" or "UID:bank"
}

type assocUse struct {
	Active, Running, Nodes, Cores int
	Held                          []jobid.ID // waiting in DEPEND, in order
}

type acctJob struct {
	key          assocKey
	nodes, cores int
	released     bool   // counted in Running, Nodes, Cores
	held         string // the dependency holding it ("" if none)
	awaiting     bool   // other dependencies hold it: judged when they are gone
}

const (
	depRunning   = "max-running-jobs-user-limit"
	depResources = "max-resources-user-limit"
)

var (
	_ jobtap.UpdateHook      = (*AccountLimits)(nil)
	_ jobtap.Validator       = (*AccountLimits)(nil)
	_ jobtap.NewHook         = (*AccountLimits)(nil)
	_ jobtap.DependHook      = (*AccountLimits)(nil)
	_ jobtap.StateHook       = (*AccountLimits)(nil)
	_ jobtap.EventHook       = (*AccountLimits)(nil)
	_ jobtap.ConfigUpdater   = (*AccountLimits)(nil)
	_ jobtap.Servicer        = (*AccountLimits)(nil)
	_ jobtap.PrivilegeSource = (*AccountLimits)(nil)
)

func newAccountLimits() *AccountLimits {
	return &AccountLimits{assoc: map[assocKey]*assocUse{}, jobs: map[jobid.ID]*acctJob{}}
}

// Name implements jobtap.Plugin.
func (*AccountLimits) Name() string { return ".accounting-limits" }

// Load implements jobtap.Loader.
func (a *AccountLimits) Load(h jobtap.Host, _ json.RawMessage) error {
	a.h = h
	return nil
}

func (l *acctLimits) check(path string) error {
	for name, v := range map[string]*int{"max-active-jobs": l.MaxActive, "max-running-jobs": l.MaxRunning, "max-nodes": l.MaxNodes, "max-cores": l.MaxCores} {
		if v != nil && *v < 0 {
			return fmt.Errorf("%s.%s=%d: must be 0 (no limit) or more: %w", path, name, *v, syscall.EINVAL)
		}
	}
	return nil
}

// ConfigUpdate implements jobtap.ConfigUpdater.
func (a *AccountLimits) ConfigUpdate(conf json.RawMessage) (func(), error) {
	var top struct {
		Accounting json.RawMessage `json:"accounting"`
	}
	if len(conf) > 0 {
		if err := json.Unmarshal(conf, &top); err != nil {
			return nil, fmt.Errorf("[accounting]: %v: %w", err, syscall.EINVAL)
		}
	}
	cfg := acctConfig{banks: map[string]acctLimits{}, users: map[string]acctLimits{}}
	if len(top.Accounting) > 0 {
		var t struct {
			acctLimits
			Banks map[string]acctLimits `json:"banks"`
			Users map[string]acctLimits `json:"users"`
			// the mf-priority plugin's and the accounting module's
			Priority  json.RawMessage `json:"priority"`
			FairShare json.RawMessage `json:"fairshare"`
			// the accounting module's PostgreSQL server
			Database json.RawMessage `json:"database"`
			Cluster  json.RawMessage `json:"cluster"`
		}
		dec := json.NewDecoder(strings.NewReader(string(top.Accounting)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("[accounting]: %v (keys: max-active-jobs, max-running-jobs, max-nodes, max-cores, exempt, expedite, banks, users, priority, fairshare, database, cluster): %w", err, syscall.EINVAL)
		}
		cfg.def = t.acctLimits
		if err := cfg.def.check("accounting"); err != nil {
			return nil, err
		}
		for b, l := range t.Banks {
			if err := l.check("accounting.banks." + b); err != nil {
				return nil, err
			}
			cfg.banks[b] = l
		}
		for name, l := range t.Users {
			path := "accounting.users." + name
			if err := l.check(path); err != nil {
				return nil, err
			}
			u, bank, hasBank := strings.Cut(name, ":")
			uid, err := policy.LookupUID(u)
			if err != nil {
				return nil, fmt.Errorf("%s: %v: %w", path, err, syscall.EINVAL)
			}
			key := strconv.FormatUint(uint64(uid), 10)
			if hasBank {
				key += ":" + bank
			}
			cfg.users[key] = l
		}
	}
	return func() {
		a.cfg = cfg
		for k := range a.assoc {
			a.release(k)
		}
	}, nil
}

// limits merges the settings for an association.
func (a *AccountLimits) limits(k assocKey) (active, running, nodes, cores int) {
	uid := strconv.FormatUint(uint64(k.uid), 10)
	layers := []acctLimits{a.cfg.def, a.cfg.banks[k.bank], a.cfg.users[uid], a.cfg.users[uid+":"+k.bank], a.dbLimits(k)}
	for _, l := range layers {
		for _, kv := range []struct {
			src *int
			dst *int
		}{{l.MaxActive, &active}, {l.MaxRunning, &running}, {l.MaxNodes, &nodes}, {l.MaxCores, &cores}} {
			if kv.src != nil {
				*kv.dst = *kv.src
			}
		}
	}
	return
}

func (k assocKey) String() string {
	name := strconv.FormatUint(uint64(k.uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	if k.bank == "" {
		return "user " + name
	}
	return fmt.Sprintf("user %s (bank %s)", name, k.bank)
}

// jobUse is what a job asks for: its association, nodes and cores.
func jobUse(j *jobtap.Job) (assocKey, int, int) {
	k := assocKey{uid: j.Userid}
	if j.Jobspec == nil {
		return k, 0, 0
	}
	if v, ok := j.Jobspec.Attribute("system.bank"); ok {
		k.bank, _ = v.(string)
	}
	return k, j.Jobspec.NNodes(), j.Jobspec.NSlots() * j.Jobspec.CoresPerSlot()
}

func (a *AccountLimits) use(k assocKey) *assocUse {
	u := a.assoc[k]
	if u == nil {
		u = &assocUse{}
		a.assoc[k] = u
	}
	return u
}

// exemptKey is the jobspec attribute that exempts a job from limits.
const exemptKey = "attributes.system.exempt"

// ExemptValue reads an exempt setting: true/false or 1/0 (and whether
// it is one of those).
func ExemptValue(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case float64:
		return x == 1, x == 0 || x == 1
	case int64:
		return x == 1, x == 0 || x == 1
	case int:
		return x == 1, x == 0 || x == 1
	case json.Number:
		return x == "1", x == "0" || x == "1"
	}
	return false, false
}

// Validate implements jobtap.Validator.
func (a *AccountLimits) Validate(j *jobtap.Job, owner bool) error {
	if j.Jobspec != nil {
		if v, ok := j.Jobspec.Attribute("system.exempt"); ok {
			yes, valid := ExemptValue(v)
			switch {
			case !valid:
				return fmt.Errorf("%s=%v: want true, false, 1 or 0", exemptKey, v)
			case yes && !owner:
				return fmt.Errorf("only the instance owner may exempt a job from limits (%s)", exemptKey)
			}
		}
	}
	if j.Exempt {
		return nil
	}
	k, nodes, cores := jobUse(j)
	maxActive, _, maxNodes, maxCores := a.limits(k)
	u := a.assoc[k]
	switch {
	case maxNodes > 0 && nodes > maxNodes:
		return fmt.Errorf("job asks for %d nodes: max-nodes for %s is %d", nodes, k, maxNodes)
	case maxCores > 0 && cores > maxCores:
		return fmt.Errorf("job asks for %d cores: max-cores for %s is %d", cores, k, maxCores)
	case maxActive > 0 && u != nil && u.Active >= maxActive:
		return fmt.Errorf("%s has %d active jobs: max-active-jobs is %d", k, u.Active, maxActive)
	}
	return nil
}

// JobNew implements jobtap.NewHook (new and restored jobs).
func (a *AccountLimits) JobNew(j *jobtap.Job) {
	if j.State == jobtap.StateInactive || j.Exempt {
		return
	}
	k, nodes, cores := jobUse(j)
	aj := &acctJob{key: k, nodes: nodes, cores: cores}
	a.jobs[j.ID] = aj
	u := a.use(k)
	u.Active++
	if j.State&(jobtap.StatePriority|jobtap.StateSched|jobtap.StateRunning) != 0 {
		a.admit(aj) // restored past DEPEND: it holds its share
	}
}

func (a *AccountLimits) admit(aj *acctJob) {
	u := a.use(aj.key)
	aj.released = true
	u.Running++
	u.Nodes += aj.nodes
	u.Cores += aj.cores
}

// fits reports why aj cannot be released now ("" if it can).
func (a *AccountLimits) fits(aj *acctJob) string {
	_, maxRunning, maxNodes, maxCores := a.limits(aj.key)
	u := a.use(aj.key)
	switch {
	case maxRunning > 0 && u.Running+1 > maxRunning:
		return depRunning
	case maxNodes > 0 && u.Nodes+aj.nodes > maxNodes, maxCores > 0 && u.Cores+aj.cores > maxCores:
		return depResources
	}
	return ""
}

// JobDepend implements jobtap.DependHook.
func (a *AccountLimits) JobDepend(j *jobtap.Job) error {
	aj := a.jobs[j.ID]
	if aj == nil || aj.released || aj.held != "" {
		return nil
	}
	if len(j.Dependencies) > 0 {
		// it waits for something else first (a job, a begin time): it
		// counts, or waits its turn, only once that is over (JobEvent)
		aj.awaiting = true
		return nil
	}
	return a.judge(j.ID, aj)
}

// JobEvent implements jobtap.EventHook: a job whose other dependencies
// are all gone is judged now, before it leaves DEPEND.
func (a *AccountLimits) JobEvent(j *jobtap.Job, name string, _ map[string]any) {
	if name != "dependency-remove" || len(j.Dependencies) > 0 {
		return
	}
	aj := a.jobs[j.ID]
	if aj == nil || !aj.awaiting {
		return
	}
	aj.awaiting = false
	if err := a.judge(j.ID, aj); err != nil {
		a.h.Log().Error("accounting-limits: holding job", "id", j.ID.String(), "err", err)
	}
}

// judge counts a job leaving DEPEND, or holds it with a dependency
// while its association is at a limit (or others of it wait before it).
func (a *AccountLimits) judge(id jobid.ID, aj *acctJob) error {
	u := a.use(aj.key)
	if dep := a.fits(aj); dep != "" || len(u.Held) > 0 {
		if dep == "" {
			dep = depRunning // others of the association wait before it
		}
		aj.held = dep
		u.Held = append(u.Held, id)
		return a.h.AddDependency(id, dep)
	}
	a.admit(aj)
	return nil
}

// JobState implements jobtap.StateHook.
func (a *AccountLimits) JobState(j *jobtap.Job, _ jobtap.State) {
	if j.State != jobtap.StateInactive {
		return
	}
	aj := a.jobs[j.ID]
	if aj == nil {
		return
	}
	u := a.forget(j.ID, aj)
	a.release(aj.key)
	if u.Active == 0 && len(u.Held) == 0 {
		delete(a.assoc, aj.key)
	}
}

// forget stops tracking a job (it ended, or was exempted): it no longer
// counts as active or running, nor waits among the held. It returns the
// association's use.
func (a *AccountLimits) forget(id jobid.ID, aj *acctJob) *assocUse {
	delete(a.jobs, id)
	u := a.use(aj.key)
	u.Active--
	if aj.released {
		u.Running--
		u.Nodes -= aj.nodes
		u.Cores -= aj.cores
	}
	if aj.held != "" {
		u.Held = slices.DeleteFunc(u.Held, func(h jobid.ID) bool { return h == id })
	}
	return u
}

// release lets the association's held jobs go, in order, while they fit.
func (a *AccountLimits) release(k assocKey) {
	u := a.assoc[k]
	for u != nil && len(u.Held) > 0 {
		aj := a.jobs[u.Held[0]]
		if aj == nil {
			u.Held = u.Held[1:]
			continue
		}
		if why := a.fits(aj); why != "" {
			a.relabel(u.Held[0], aj, why)
			return
		}
		id, dep := u.Held[0], aj.held
		u.Held = u.Held[1:]
		aj.held = ""
		a.admit(aj)
		if err := a.h.RemoveDependency(id, dep); err != nil {
			a.h.Log().Error("accounting-limits: releasing job", "id", id.String(), "err", err)
		}
	}
}

// relabel keeps a held job's dependency true to what holds it now: a
// job held on max-running-jobs whose limit was raised, but that still
// does not fit max-cores, says max-resources-user-limit from now on.
// The new dependency is added before the old one goes, so the job
// never has none.
func (a *AccountLimits) relabel(id jobid.ID, aj *acctJob, why string) {
	if why == aj.held {
		return
	}
	if err := a.h.AddDependency(id, why); err != nil {
		a.h.Log().Error("accounting-limits: relabelling held job", "id", id.String(), "err", err)
		return
	}
	old := aj.held
	aj.held = why
	if err := a.h.RemoveDependency(id, old); err != nil {
		a.h.Log().Error("accounting-limits: relabelling held job", "id", id.String(), "err", err)
	}
}

// UpdateKeys implements jobtap.UpdateHook.
func (*AccountLimits) UpdateKeys() []string { return []string{exemptKey} }

// Update implements jobtap.UpdateHook: the instance owner exempts a
// pending job from limits; a job held by them is released at once, and
// one counted no longer counts.
func (a *AccountLimits) Update(j *jobtap.Job, _ string, v any, owner bool) (any, error) {
	yes, valid := ExemptValue(v)
	switch {
	case !valid:
		return nil, fmt.Errorf("%s=%v: want true, false, 1 or 0: %w", exemptKey, v, syscall.EINVAL)
	case !owner:
		return nil, fmt.Errorf("only the instance owner may exempt a job from limits: %w", syscall.EPERM)
	case !yes && j.Exempt:
		return nil, fmt.Errorf("a job's exemption cannot be withdrawn: %w", syscall.EINVAL)
	}
	aj := a.jobs[j.ID]
	if !yes || aj == nil {
		return yes, nil
	}
	a.forget(j.ID, aj)
	if aj.held != "" {
		if err := a.h.RemoveDependency(j.ID, aj.held); err != nil {
			return nil, err
		}
	}
	a.release(aj.key)
	return true, nil
}

// Query implements jobtap.Querier.
func (a *AccountLimits) Query() any {
	type row struct {
		Association string   `json:"association"`
		Active      int      `json:"active"`
		Running     int      `json:"running"`
		Nodes       int      `json:"nodes"`
		Cores       int      `json:"cores"`
		Held        []string `json:"held"`
	}
	out := []row{}
	for k, u := range a.assoc {
		held := make([]string, len(u.Held))
		for i, id := range u.Held {
			held[i] = id.String()
		}
		out = append(out, row{k.String(), u.Active, u.Running, u.Nodes, u.Cores, held})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Association < out[j].Association })
	// database: how many associations the accounting module has sent
	// (0 before it has, or with no database)
	return map[string]any{"associations": out, "database": map[string]int{"associations": a.db.Len()}}
}

// ReallocCheck implements jobtap.ReallocHook: growth counts against the
// association's max-nodes and max-cores as the job's own size does, both
// for the job alone and for everything the association runs.
func (a *AccountLimits) ReallocCheck(j *jobtap.Job, cur, add jobtap.Size) error {
	aj := a.jobs[j.ID]
	if aj == nil || j.Exempt {
		return nil
	}
	_, _, maxNodes, maxCores := a.limits(aj.key)
	u := a.use(aj.key)
	for _, c := range []struct {
		what            string
		job, total, add int
		max             int
	}{
		{"nodes", cur.Nodes, u.Nodes, add.Nodes, maxNodes},
		{"cores", cur.Cores, u.Cores, add.Cores, maxCores},
	} {
		switch {
		case c.max <= 0 || c.add <= 0:
		case c.job+c.add > c.max:
			return fmt.Errorf("growing the job to %d %s exceeds max-%s for %s (%d)", c.job+c.add, c.what, c.what, aj.key, c.max)
		case c.total+c.add > c.max:
			return fmt.Errorf("%s runs %d %s: %d more exceeds max-%s (%d)", aj.key, c.total, c.what, c.add, c.what, c.max)
		}
	}
	return nil
}

// Resized implements jobtap.ReallocHook: the job counts at its new size.
func (a *AccountLimits) Resized(j *jobtap.Job, d jobtap.Size) {
	aj := a.jobs[j.ID]
	if aj == nil {
		return
	}
	aj.nodes += d.Nodes
	aj.cores += d.Cores
	if aj.released {
		u := a.use(aj.key)
		u.Nodes += d.Nodes
		u.Cores += d.Cores
		if d.Nodes < 0 || d.Cores < 0 {
			a.release(aj.key) // room for the association's held jobs
		}
	}
}
