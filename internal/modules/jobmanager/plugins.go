package jobmanager

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/jobtap/builtin"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// pluginSet holds the loaded jobtap plugins in load order and implements
// jobtap.Host for them.
type pluginSet struct {
	m       *manager
	loaded  []jobtap.Plugin
	methods map[string]jobtap.Method
}

var _ jobtap.Host = (*pluginSet)(nil)

func newPluginSet(m *manager) *pluginSet {
	return &pluginSet{m: m, methods: make(map[string]jobtap.Method)}
}

// canonicalName maps "alloc-bypass.so" and "./x.so" to the built-in name.
func canonicalName(name string) string {
	name = strings.TrimSuffix(name, ".so")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// load instantiates and loads a built-in plugin by name.
func (ps *pluginSet) load(name string, conf json.RawMessage) error {
	cname := canonicalName(name)
	factory, ok := builtin.Lookup(cname)
	if !ok {
		return fmt.Errorf("jobtap: no plugin named %q (built-in plugins: %s): %w",
			name, strings.Join(builtin.Names(), ", "), syscall.ENOENT)
	}
	for _, p := range ps.loaded {
		if p.Name() == cname {
			return fmt.Errorf("jobtap: plugin %s is already loaded: %w", cname, syscall.EEXIST)
		}
	}
	p := factory()
	if l, ok := p.(jobtap.Loader); ok {
		if err := l.Load(ps, conf); err != nil {
			return fmt.Errorf("jobtap: %s: %w", cname, err)
		}
	}
	if s, ok := p.(jobtap.Servicer); ok {
		for _, meth := range s.Methods() {
			ps.methods[meth.Topic] = meth
		}
	}
	ps.loaded = append(ps.loaded, p)
	if nh, ok := p.(jobtap.NewHook); ok {
		for _, j := range ps.m.jobs {
			if j.State != jobtap.StateInactive {
				nh.JobNew(j.view())
			}
		}
	}
	return nil
}

func (ps *pluginSet) remove(name string) error {
	cname := canonicalName(name)
	for i, p := range ps.loaded {
		if p.Name() == cname || name == "all" {
			if strings.HasPrefix(p.Name(), ".") && name == "all" {
				continue
			}
			if u, ok := p.(jobtap.Unloader); ok {
				u.Unload()
			}
			if s, ok := p.(jobtap.Servicer); ok {
				for _, meth := range s.Methods() {
					delete(ps.methods, meth.Topic)
				}
			}
			ps.loaded = append(ps.loaded[:i], ps.loaded[i+1:]...)
			if name != "all" {
				return nil
			}
			return ps.remove(name)
		}
	}
	if name == "all" {
		return nil
	}
	return fmt.Errorf("jobtap: plugin %q is not loaded: %w", name, syscall.ENOENT)
}

func (ps *pluginSet) names() []string {
	out := make([]string, 0, len(ps.loaded))
	for _, p := range ps.loaded {
		out = append(out, p.Name())
	}
	return out
}

func (ps *pluginSet) find(name string) jobtap.Plugin {
	cname := canonicalName(name)
	for _, p := range ps.loaded {
		if p.Name() == cname {
			return p
		}
	}
	return nil
}

// hook dispatch

func (ps *pluginSet) validate(j *job, owner bool) error {
	for _, p := range ps.loaded {
		if v, ok := p.(jobtap.Validator); ok {
			if err := v.Validate(j.view(), owner); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ps *pluginSet) newJob(j *job) {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.NewHook); ok {
			h.JobNew(j.view())
		}
	}
}

func (ps *pluginSet) depend(j *job) error {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.DependHook); ok {
			if err := h.JobDepend(j.view()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ps *pluginSet) priority(j *job) (int64, bool) {
	for i := len(ps.loaded) - 1; i >= 0; i-- {
		if h, ok := ps.loaded[i].(jobtap.PriorityHook); ok {
			return h.Priority(j.view())
		}
	}
	// no priority plugin: priority is the urgency
	return int64(j.Urgency), true
}

func (ps *pluginSet) state(j *job, prev jobtap.State) {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.StateHook); ok {
			h.JobState(j.view(), prev)
		}
	}
}

func (ps *pluginSet) event(j *job, name string, ctx map[string]any) {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.EventHook); ok {
			h.JobEvent(j.view(), name, ctx)
		}
	}
}

func (ps *pluginSet) alloc(j *job) (json.RawMessage, bool, error) {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.AllocHook); ok {
			R, handled, err := h.Alloc(j.view())
			if err != nil || handled {
				return R, handled, err
			}
		}
	}
	return nil, false, nil
}

func (ps *pluginSet) update(j *job, key string, value any, owner bool) (any, error) {
	for _, p := range ps.loaded {
		h, ok := p.(jobtap.UpdateHook)
		if !ok {
			continue
		}
		for _, k := range h.UpdateKeys() {
			if k == key {
				return h.Update(j.view(), key, value, owner)
			}
		}
	}
	return nil, fmt.Errorf("update of %q is not supported: %w", key, syscall.EINVAL)
}

// jobtap.Host

func (ps *pluginSet) get(id jobid.ID) (*job, error) {
	j, ok := ps.m.jobs[id]
	if !ok {
		return nil, fmt.Errorf("unknown job %s: %w", id.String(), syscall.ENOENT)
	}
	return j, nil
}

func (ps *pluginSet) PostEvent(id jobid.ID, name string, ctx map[string]any) error {
	j, err := ps.get(id)
	if err != nil {
		return err
	}
	ps.m.post(j, name, ctx)
	return nil
}

func (ps *pluginSet) RaiseException(id jobid.ID, typ string, severity int, note string) error {
	j, err := ps.get(id)
	if err != nil {
		return err
	}
	ps.m.raise(j, typ, severity, note, ps.m.owner)
	return nil
}

func (ps *pluginSet) AddDependency(id jobid.ID, desc string) error {
	j, err := ps.get(id)
	if err != nil {
		return err
	}
	if _, dup := j.deps[desc]; dup {
		return fmt.Errorf("dependency %q already exists: %w", desc, syscall.EEXIST)
	}
	ps.m.post(j, "dependency-add", map[string]any{"description": desc})
	return nil
}

func (ps *pluginSet) RemoveDependency(id jobid.ID, desc string) error {
	j, err := ps.get(id)
	if err != nil {
		return err
	}
	if _, ok := j.deps[desc]; !ok {
		return fmt.Errorf("dependency %q not found: %w", desc, syscall.ENOENT)
	}
	ps.m.post(j, "dependency-remove", map[string]any{"description": desc})
	ps.m.checkDepend(j)
	return nil
}

func (ps *pluginSet) Reprioritize(id jobid.ID) {
	if j, ok := ps.m.jobs[id]; ok {
		ps.m.computePriority(j)
	}
}

func (ps *pluginSet) Job(id jobid.ID) (*jobtap.Job, bool) {
	j, ok := ps.m.jobs[id]
	if !ok {
		return nil, false
	}
	return j.view(), true
}

func (ps *pluginSet) SetAux(id jobid.ID, key string, v any) {
	if j, ok := ps.m.jobs[id]; ok {
		if j.aux == nil {
			j.aux = make(map[string]any)
		}
		j.aux[key] = v
	}
}

func (ps *pluginSet) Aux(id jobid.ID, key string) any {
	if j, ok := ps.m.jobs[id]; ok {
		return j.aux[key]
	}
	return nil
}

func (ps *pluginSet) AfterFunc(d time.Duration, fn func()) func() bool {
	t := time.AfterFunc(d, func() { ps.m.h.Post(fn) })
	return t.Stop
}

func (ps *pluginSet) Owner() uint32 { return ps.m.owner }

func (ps *pluginSet) Log() *slog.Logger { return ps.m.log }
