package builtin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// knownSchemes are the RFC 26 dependency schemes some built-in plugin
// handles; a jobspec naming any other scheme is refused at DEPEND.
var knownSchemes = map[string]bool{
	"afterany": true, "afterok": true, "afternotok": true, "afterstart": true,
	"afterfinish": true, "begin-time": true, "singleton": true,
}

// DependencyAfter implements RFC 26's after* schemes: a job waits for
// another job to start (afterstart), finish (afterany / afterfinish),
// succeed (afterok) or fail (afternotok). A dependency that can no longer
// be satisfied raises a fatal dependency exception on the waiting job.
type DependencyAfter struct {
	h jobtap.Host
	// waiting maps a target job to the jobs waiting on it.
	waiting map[jobid.ID][]afterDep
}

type afterDep struct {
	job    jobid.ID
	scheme string
	desc   string
}

func newDependencyAfter() *DependencyAfter {
	return &DependencyAfter{waiting: make(map[jobid.ID][]afterDep)}
}

var (
	_ jobtap.Loader     = (*DependencyAfter)(nil)
	_ jobtap.DependHook = (*DependencyAfter)(nil)
	_ jobtap.StateHook  = (*DependencyAfter)(nil)
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
	case "afterstart":
		return t.State >= jobtap.StateRun, false
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
		return t.Result != "COMPLETED", t.Result == "COMPLETED"
	}
	return false, true
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
		if !knownSchemes[dep.Scheme] {
			return fmt.Errorf("dependency scheme %q is not supported", dep.Scheme)
		}
		if !strings.HasPrefix(dep.Scheme, "after") {
			continue
		}
		target, err := jobid.Parse(dep.Value)
		if err != nil {
			return fmt.Errorf("%s: invalid job id %q", dep.Scheme, dep.Value)
		}
		t, ok := d.h.Job(target)
		if !ok {
			return fmt.Errorf("%s: job %s not found", dep.Scheme, dep.Value)
		}
		if t.Userid != j.Userid && j.Userid != d.h.Owner() {
			return fmt.Errorf("%s: job %s belongs to another user", dep.Scheme, dep.Value)
		}
		ok, never := satisfied(dep.Scheme, t)
		if never {
			return fmt.Errorf("%s: job %s can never satisfy this dependency (result %s)", dep.Scheme, target.String(), t.Result)
		}
		if ok {
			continue
		}
		desc := dep.Scheme + "=" + target.String()
		if err := d.h.AddDependency(j.ID, desc); err != nil {
			return err
		}
		d.waiting[target] = append(d.waiting[target], afterDep{job: j.ID, scheme: dep.Scheme, desc: desc})
	}
	return nil
}

// JobState implements jobtap.StateHook: release or fail jobs waiting on
// a job that just changed state.
func (d *DependencyAfter) JobState(t *jobtap.Job, _ jobtap.State) {
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
				fmt.Sprintf("dependency %s can never be satisfied: job %s result %s", w.desc, t.ID.String(), t.Result))
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

// Singleton implements the "singleton" dependency: a job waits while
// another active job of the same user with the same name was submitted
// before it.
type Singleton struct {
	h jobtap.Host
	// active jobs by user+name, in submit order
	active map[string][]jobid.ID
	// held jobs wait for the ones ahead of them
	held map[jobid.ID]string
}

func newSingleton() *Singleton {
	return &Singleton{active: make(map[string][]jobid.ID), held: make(map[jobid.ID]string)}
}

var (
	_ jobtap.Loader     = (*Singleton)(nil)
	_ jobtap.DependHook = (*Singleton)(nil)
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

// JobDepend implements jobtap.DependHook.
func (s *Singleton) JobDepend(j *jobtap.Job) error {
	if j.Jobspec == nil {
		return nil
	}
	key := singletonKey(j)
	deps, _ := j.Jobspec.Dependencies()
	isSingleton := false
	for _, d := range deps {
		if d.Scheme == "singleton" {
			isSingleton = true
		}
	}
	s.active[key] = append(s.active[key], j.ID)
	if !isSingleton {
		return nil
	}
	if len(s.active[key]) > 1 {
		s.held[j.ID] = key
		return s.h.AddDependency(j.ID, "singleton")
	}
	return nil
}

// JobState implements jobtap.StateHook.
func (s *Singleton) JobState(j *jobtap.Job, _ jobtap.State) {
	if j.State != jobtap.StateInactive {
		return
	}
	delete(s.held, j.ID)
	for key, list := range s.active {
		for i, id := range list {
			if id != j.ID {
				continue
			}
			list = append(list[:i], list[i+1:]...)
			if len(list) == 0 {
				delete(s.active, key)
			} else {
				s.active[key] = list
				// the oldest remaining job may go if it is held
				if _, ok := s.held[list[0]]; ok {
					delete(s.held, list[0])
					s.h.RemoveDependency(list[0], "singleton")
				}
			}
			return
		}
	}
}
