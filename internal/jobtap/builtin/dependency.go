package builtin

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// afterPrefix maps each after* scheme (RFC 26, flux-submit(1)) to the
// description flux-core gives its dependency-add event ("after-finish=
// ƒ...", as flux jobs {dependencies} shows). afterstart and afterfinish
// are accepted as aliases of after and afterany.
var afterPrefix = map[string]string{
	"after":       "after-start",
	"afterstart":  "after-start",
	"afterany":    "after-finish",
	"afterfinish": "after-finish",
	"afterok":     "after-success",
	"afternotok":  "after-failure",
	"afterexcept": "after-except",
}

// knownScheme reports whether a built-in plugin handles an RFC 26
// dependency scheme; a job naming any other is rejected at submission.
func knownScheme(scheme string) bool {
	_, after := afterPrefix[scheme]
	return after || scheme == "begin-time" || scheme == "singleton"
}

// DependencyAfter implements the after* schemes: a job waits for another
// job to start (after), end (afterany), succeed (afterok), fail
// (afternotok) or end with a fatal exception (afterexcept). All but
// afterany need the target to have run. A submission naming an unknown
// scheme or target, or an inactive target that cannot satisfy it, is
// rejected (as flux-core does); a dependency that can no longer be
// satisfied later raises a fatal dependency exception on the waiting job.
type DependencyAfter struct {
	h jobtap.Host
	// waiting maps a target job to the jobs waiting on it, and waitsOn a
	// waiting job to its targets (its entries go when it ends first)
	waiting map[jobid.ID][]afterDep
	waitsOn map[jobid.ID][]jobid.ID
}

type afterDep struct {
	job    jobid.ID
	scheme string
	desc   string
}

func newDependencyAfter() *DependencyAfter {
	return &DependencyAfter{waiting: make(map[jobid.ID][]afterDep), waitsOn: make(map[jobid.ID][]jobid.ID)}
}

var (
	_ jobtap.Loader     = (*DependencyAfter)(nil)
	_ jobtap.Validator  = (*DependencyAfter)(nil)
	_ jobtap.DependHook = (*DependencyAfter)(nil)
	_ jobtap.StateHook  = (*DependencyAfter)(nil)
	_ jobtap.EventHook  = (*DependencyAfter)(nil)
)

// Name implements jobtap.Plugin.
func (*DependencyAfter) Name() string { return ".dependency-after" }

// Load implements jobtap.Loader.
func (d *DependencyAfter) Load(h jobtap.Host, _ json.RawMessage) error {
	d.h = h
	return nil
}

// satisfied reports whether target in its current state satisfies scheme
// (ok) or never can (never).
func satisfied(scheme string, t *jobtap.Job) (ok, never bool) {
	inactive := t.State == jobtap.StateInactive
	switch scheme {
	case "after", "afterstart":
		return t.Started, inactive && !t.Started
	case "afterany", "afterfinish":
		return inactive, false
	case "afterok":
		if !inactive {
			return false, false
		}
		return t.Result == "COMPLETED", t.Result != "COMPLETED"
	case "afternotok":
		if !inactive {
			return false, false
		}
		ok = t.Ran && t.Result != "COMPLETED"
		return ok, !ok
	case "afterexcept":
		if !inactive {
			return false, false
		}
		ok = t.Ran && t.Exception != ""
		return ok, !ok
	}
	return false, true
}

// target resolves the job an after* dependency names, or says why the
// submission is refused.
func (d *DependencyAfter) target(j *jobtap.Job, owner bool, scheme, value string) (*jobtap.Job, error) {
	id, err := jobid.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("dependency: %s: %q is not a valid jobid", scheme, value)
	}
	t, ok := d.h.Job(id)
	if !ok {
		return nil, fmt.Errorf("dependency: %s: id %s: job not found", scheme, value)
	}
	if t.Userid != j.Userid && !owner {
		return nil, fmt.Errorf("dependency: %s: job %s belongs to another user: Permission denied", scheme, value)
	}
	return t, nil
}

// unsatisfiable says why an inactive target can never satisfy scheme.
func unsatisfiable(scheme string, t *jobtap.Job) error {
	id := t.ID.String()
	switch {
	case scheme == "afterany" || scheme == "afterfinish":
	case !t.Ran || ((scheme == "after" || scheme == "afterstart") && !t.Started):
		return fmt.Errorf("dependency: %s: job %s never started (result %s)", scheme, id, t.Result)
	case scheme == "afterok":
		return fmt.Errorf("dependency: %s: job %s did not succeed (result %s)", scheme, id, t.Result)
	case scheme == "afternotok":
		return fmt.Errorf("dependency: %s: job %s succeeded", scheme, id)
	case scheme == "afterexcept":
		return fmt.Errorf("dependency: %s: job %s ended without a fatal exception (result %s)", scheme, id, t.Result)
	}
	return fmt.Errorf("dependency: %s: job %s can never satisfy it (result %s)", scheme, id, resultOf(t))
}

// Validate implements jobtap.Validator: unknown schemes, malformed or
// unknown targets, other users' targets and inactive targets that can
// never satisfy the dependency are rejected at submission.
func (d *DependencyAfter) Validate(j *jobtap.Job, owner bool) error {
	if j.Jobspec == nil {
		return nil
	}
	deps, err := j.Jobspec.Dependencies()
	if err != nil {
		return err
	}
	for _, dep := range deps {
		if !knownScheme(dep.Scheme) {
			return fmt.Errorf("dependency scheme %q is not supported", dep.Scheme)
		}
		if _, ok := afterPrefix[dep.Scheme]; ok {
			t, err := d.target(j, owner, dep.Scheme, dep.Value)
			if err != nil {
				return err
			}
			if _, never := satisfied(dep.Scheme, t); never && t.State == jobtap.StateInactive {
				return unsatisfiable(dep.Scheme, t)
			}
		}
	}
	return nil
}

// JobDepend implements jobtap.DependHook.
func (d *DependencyAfter) JobDepend(j *jobtap.Job) error {
	if j.Jobspec == nil {
		return nil
	}
	deps, err := j.Jobspec.Dependencies()
	if err != nil {
		return err
	}
	for _, dep := range deps {
		if !knownScheme(dep.Scheme) {
			return fmt.Errorf("dependency scheme %q is not supported", dep.Scheme)
		}
		prefix, ok := afterPrefix[dep.Scheme]
		if !ok {
			continue
		}
		t, err := d.target(j, j.Userid == d.h.Owner(), dep.Scheme, dep.Value)
		if err != nil {
			return err
		}
		ok, never := satisfied(dep.Scheme, t)
		if never {
			return unsatisfiable(dep.Scheme, t)
		}
		if ok {
			continue
		}
		desc := prefix + "=" + t.ID.String()
		if err := d.h.AddDependency(j.ID, desc); err != nil {
			return err
		}
		d.waiting[t.ID] = append(d.waiting[t.ID], afterDep{job: j.ID, scheme: dep.Scheme, desc: desc})
		d.waitsOn[j.ID] = append(d.waitsOn[j.ID], t.ID)
	}
	return nil
}

func resultOf(t *jobtap.Job) string {
	if t.Result == "" {
		return "none: it never started"
	}
	return t.Result
}

// JobState implements jobtap.StateHook: release or fail jobs waiting on
// a job that just changed state; a waiting job that ended (canceled
// while it waited) is no longer waiting.
func (d *DependencyAfter) JobState(t *jobtap.Job, _ jobtap.State) {
	if t.State == jobtap.StateInactive {
		d.forgetWaiter(t.ID)
	}
	d.update(t)
}

// forgetWaiter drops what job id waited for.
func (d *DependencyAfter) forgetWaiter(id jobid.ID) {
	for _, tid := range d.waitsOn[id] {
		list := d.waiting[tid]
		kept := list[:0]
		for _, w := range list {
			if w.job != id {
				kept = append(kept, w)
			}
		}
		if len(kept) == 0 {
			delete(d.waiting, tid)
		} else {
			d.waiting[tid] = kept
		}
	}
	delete(d.waitsOn, id)
}

// JobEvent implements jobtap.EventHook: "after" is satisfied by the start
// event, which is no state change.
func (d *DependencyAfter) JobEvent(t *jobtap.Job, name string, _ map[string]any) {
	if name == "start" {
		d.update(t)
	}
}

func (d *DependencyAfter) update(t *jobtap.Job) {
	list, ok := d.waiting[t.ID]
	if !ok {
		return
	}
	kept := list[:0]
	for _, w := range list {
		ok, never := satisfied(w.scheme, t)
		switch {
		case ok:
			d.h.RemoveDependency(w.job, w.desc)
		case never:
			d.h.RaiseException(w.job, "dependency", 0,
				fmt.Sprintf("dependency %s can never be satisfied: job %s result %s", w.desc, t.ID.String(), resultOf(t)))
		default:
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(d.waiting, t.ID)
	} else {
		d.waiting[t.ID] = kept
	}
}

// Singleton implements the "singleton" dependency (flux-submit(1)): a
// job is held while its user has another active job of the same name
// that is not itself held by a singleton dependency. When every active
// job of a user and name is a held singleton, the oldest is released,
// so such jobs run one at a time in submit order.
type Singleton struct {
	h jobtap.Host
	// count is the number of active named jobs by user+name
	count map[string]int
	keys  map[jobid.ID]string // the key of each counted job
	// held lists the held singletons by user+name, oldest first
	held map[string][]jobid.ID
}

func newSingleton() *Singleton {
	return &Singleton{count: make(map[string]int), keys: make(map[jobid.ID]string), held: make(map[string][]jobid.ID)}
}

var (
	_ jobtap.Loader     = (*Singleton)(nil)
	_ jobtap.Validator  = (*Singleton)(nil)
	_ jobtap.DependHook = (*Singleton)(nil)
	_ jobtap.NewHook    = (*Singleton)(nil)
	_ jobtap.StateHook  = (*Singleton)(nil)
)

// Name implements jobtap.Plugin.
func (*Singleton) Name() string { return ".dependency-singleton" }

// Load implements jobtap.Loader.
func (s *Singleton) Load(h jobtap.Host, _ json.RawMessage) error {
	s.h = h
	return nil
}

func singletonKey(j *jobtap.Job) string {
	return fmt.Sprintf("%d\x00%s", j.Userid, j.Jobspec.JobName())
}

func isSingleton(j *jobtap.Job) bool {
	deps, _ := j.Jobspec.Dependencies()
	for _, d := range deps {
		if d.Scheme == "singleton" {
			return true
		}
	}
	return false
}

// Validate implements jobtap.Validator: a singleton needs an explicit job
// name (flux-submit(1)).
func (s *Singleton) Validate(j *jobtap.Job, _ bool) error {
	if j.Jobspec != nil && isSingleton(j) && j.Jobspec.JobName() == "" {
		return fmt.Errorf("dependency: singleton requires an explicit job name (--job-name)")
	}
	return nil
}

// JobNew implements jobtap.NewHook: every active named job counts from
// its creation, as in flux-core (and so do the jobs a restarted job
// manager restores past DEPEND, and those active when the plugin loads,
// which it is shown this way).
func (s *Singleton) JobNew(j *jobtap.Job) { s.countJob(j) }

// countJob counts a named job once.
func (s *Singleton) countJob(j *jobtap.Job) {
	if j.Jobspec == nil || j.Jobspec.JobName() == "" || j.State == jobtap.StateInactive {
		return
	}
	if _, ok := s.keys[j.ID]; ok {
		return
	}
	key := singletonKey(j)
	s.count[key]++
	s.keys[j.ID] = key
}

// JobDepend implements jobtap.DependHook: a singleton waits while another
// active job of its user and name is counted. Jobs without an explicit
// name can never hold up a singleton, so they are not counted.
func (s *Singleton) JobDepend(j *jobtap.Job) error {
	if j.Jobspec == nil || j.Jobspec.JobName() == "" {
		return nil
	}
	s.countJob(j)
	key := singletonKey(j)
	hold := isSingleton(j) && s.count[key] > 1
	if !hold {
		return nil
	}
	s.held[key] = append(s.held[key], j.ID)
	return s.h.AddDependency(j.ID, "singleton")
}

// JobState implements jobtap.StateHook: when a counted job ends and only
// held singletons remain, the oldest of them goes.
func (s *Singleton) JobState(j *jobtap.Job, _ jobtap.State) {
	if j.State != jobtap.StateInactive {
		return
	}
	key, ok := s.keys[j.ID]
	if !ok {
		return
	}
	delete(s.keys, j.ID)
	held := s.held[key]
	for i, id := range held {
		if id == j.ID {
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	s.count[key]--
	if len(held) > 0 && s.count[key] == len(held) {
		s.h.RemoveDependency(held[0], "singleton")
		held = held[1:]
	}
	if len(held) == 0 {
		delete(s.held, key)
	} else {
		s.held[key] = held
	}
	if s.count[key] <= 0 {
		delete(s.count, key)
	}
}
