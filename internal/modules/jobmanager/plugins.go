package jobmanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/jobtap/builtin"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// pluginSet holds the loaded jobtap plugins in load order and implements
// jobtap.Host for them.
type pluginSet struct {
	m       *manager
	loaded  []jobtap.Plugin
	methods map[string]jobtap.Method
	// loadedAs is the name a plugin was loaded by when it differs from
	// its own ("alloc-bypass.so"): flux jobtap list shows that name, as
	// flux-core shows the file a plugin came from.
	loadedAs map[jobtap.Plugin]string
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
		return noPlugin(name)
	}
	for _, p := range ps.loaded {
		if p.Name() == cname {
			return fmt.Errorf("jobtap: plugin %s is already loaded: %w", cname, syscall.EEXIST)
		}
	}
	p, err := ps.instantiate(factory, cname, conf)
	if err != nil {
		return err
	}
	ps.loaded = append(ps.loaded, p)
	if base := path.Base(name); base != cname {
		if ps.loadedAs == nil {
			ps.loadedAs = make(map[jobtap.Plugin]string)
		}
		ps.loadedAs[p] = base
	}
	ps.attach(p)
	return nil
}

// noPlugin is the error for a plugin name that names none.
func noPlugin(name string) error {
	return fmt.Errorf("jobtap: no plugin named %q (built-in plugins: %s): %w",
		name, strings.Join(builtin.Names(), ", "), syscall.ENOENT)
}

// instantiate makes a plugin and gives it its configuration, and the
// instance's if it reads that.
func (ps *pluginSet) instantiate(factory builtin.Factory, name string, conf json.RawMessage) (jobtap.Plugin, error) {
	p := factory()
	if l, ok := p.(jobtap.Loader); ok {
		if err := l.Load(ps, conf); err != nil {
			return nil, fmt.Errorf("jobtap: %s: %w", name, err)
		}
	}
	if cu, ok := p.(jobtap.ConfigUpdater); ok {
		apply, err := cu.ConfigUpdate(ps.m.conf)
		if err != nil {
			return nil, fmt.Errorf("jobtap: %s: %w", name, err)
		}
		apply()
	}
	return p, nil
}

// prepareConfigUpdate shows a new instance configuration to the loaded
// plugins that read it, and returns what makes it theirs; nothing
// changes if any refuses it.
func (ps *pluginSet) prepareConfigUpdate(conf json.RawMessage) (func(), error) {
	var applies []func()
	for _, p := range ps.loaded {
		if cu, ok := p.(jobtap.ConfigUpdater); ok {
			apply, err := cu.ConfigUpdate(conf)
			if err != nil {
				return nil, fmt.Errorf("jobtap: %s: %w", p.Name(), err)
			}
			applies = append(applies, apply)
		}
	}
	return func() {
		for _, apply := range applies {
			apply()
		}
	}, nil
}

// attach registers a loaded plugin's methods and shows it the active
// jobs.
func (ps *pluginSet) attach(p jobtap.Plugin) {
	if s, ok := p.(jobtap.Servicer); ok {
		for _, meth := range s.Methods() {
			ps.methods[meth.Topic] = meth
		}
	}
	if nh, ok := p.(jobtap.NewHook); ok {
		for _, j := range ps.m.jobs {
			if j.State != jobtap.StateInactive {
				nh.JobNew(j.view())
			}
		}
	}
}

// detach unloads a plugin and forgets its methods.
func (ps *pluginSet) detach(p jobtap.Plugin) {
	if u, ok := p.(jobtap.Unloader); ok {
		u.Unload()
	}
	if s, ok := p.(jobtap.Servicer); ok {
		for _, meth := range s.Methods() {
			delete(ps.methods, meth.Topic)
		}
	}
}

// prepareReload makes a new instance of the loaded plugin name with conf
// (a changed configuration), and returns what puts it in the old one's
// place. It returns nil and no error when the plugin is not loaded.
func (ps *pluginSet) prepareReload(name string, conf json.RawMessage) (func(), error) {
	i := slices.IndexFunc(ps.loaded, func(p jobtap.Plugin) bool { return p.Name() == name })
	if i < 0 {
		return nil, nil
	}
	factory, ok := builtin.Lookup(name)
	if !ok {
		return nil, nil
	}
	p, err := ps.instantiate(factory, name, conf)
	if err != nil {
		return nil, err
	}
	return func() {
		old := ps.loaded[i]
		ps.detach(old)
		if as, ok := ps.loadedAs[old]; ok {
			delete(ps.loadedAs, old)
			ps.loadedAs[p] = as
		}
		ps.loaded[i] = p
		ps.attach(p)
	}, nil
}

// remove unloads the plugins NAME matches: a plugin name (with or
// without ".so"), a glob(7) pattern, or "all". Patterns match builtin
// plugins (".name") only when they start with "." themselves.
func (ps *pluginSet) remove(name string) error {
	pattern := canonicalName(name)
	glob := strings.ContainsAny(pattern, "*?[")
	if name == "all" {
		pattern, glob = "*", true
	}
	kept := ps.loaded[:0]
	removed := 0
	for _, p := range ps.loaded {
		match := p.Name() == pattern || ps.loadedAs[p] == path.Base(name)
		if !match && glob && (strings.HasPrefix(pattern, ".") || !strings.HasPrefix(p.Name(), ".")) {
			match, _ = path.Match(pattern, p.Name())
		}
		if !match {
			kept = append(kept, p)
			continue
		}
		ps.detach(p)
		delete(ps.loadedAs, p)
		removed++
	}
	ps.loaded = kept
	if removed == 0 && name != "all" {
		return fmt.Errorf("jobtap: %q matches no loaded plugin: %w", name, syscall.ENOENT)
	}
	return nil
}

// has reports whether the plugin called name is loaded.
func (ps *pluginSet) has(name string) bool {
	for _, p := range ps.loaded {
		if p.Name() == name {
			return true
		}
	}
	return false
}

func (ps *pluginSet) names() []string {
	out := make([]string, 0, len(ps.loaded))
	for _, p := range ps.loaded {
		if as, ok := ps.loadedAs[p]; ok {
			out = append(out, as)
			continue
		}
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
	if _, ok := j.Jobspec.Attribute("system.alloc-bypass.R"); ok && !ps.has("alloc-bypass") {
		// scheduled as usual, the job would run elsewhere than its R says
		return fmt.Errorf("attributes.system.alloc-bypass.R: the alloc-bypass jobtap plugin is not loaded (flux jobtap load alloc-bypass.so)")
	}
	return ps.validateView(j.view(), owner)
}

// validateView runs the validators on v: a submitted job, or one as an
// update would leave it.
func (ps *pluginSet) validateView(v *jobtap.Job, owner bool) error {
	for _, p := range ps.loaded {
		if val, ok := p.(jobtap.Validator); ok {
			if err := val.Validate(v, owner); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ps *pluginSet) inactiveAdd(j *job) { ps.inactiveAddView(j.view()) }

func (ps *pluginSet) inactiveAddView(v *jobtap.Job) {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.InactiveAddHook); ok {
			h.JobInactiveAdd(v)
		}
	}
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

// queueUpdate asks the plugins whether j may move to queue.
func (ps *pluginSet) queueUpdate(j *job, queue string, owner bool) error {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.QueueUpdateHook); ok {
			if err := h.QueueUpdate(j.view(), queue, owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// reallocCheck asks the plugins whether j may grow by add (RFC 51).
func (ps *pluginSet) reallocCheck(j *job, cur, add jobtap.Size) error {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.ReallocHook); ok {
			if err := h.ReallocCheck(j.view(), cur, add); err != nil {
				return err
			}
		}
	}
	return nil
}

// resized tells the plugins that j's resources changed by delta.
func (ps *pluginSet) resized(j *job, delta jobtap.Size) {
	for _, p := range ps.loaded {
		if h, ok := p.(jobtap.ReallocHook); ok {
			h.Resized(j.view(), delta)
		}
	}
}

// privileges asks the plugins that grant privileges (jobtap.PrivilegeSource).
func (ps *pluginSet) privileges(uid uint32, bank string) (exempt, expedite bool) {
	for _, p := range ps.loaded {
		if src, ok := p.(jobtap.PrivilegeSource); ok {
			e, x := src.Privileges(uid, bank)
			exempt, expedite = exempt || e, expedite || x
		}
	}
	return exempt, expedite
}

// jobtap.Host

func (ps *pluginSet) get(id jobid.ID) (*job, error) {
	j, ok := ps.m.job(id)
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
	j, ok := ps.m.job(id)
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

func (ps *pluginSet) R(id jobid.ID) json.RawMessage {
	if j, ok := ps.m.job(id); ok {
		return j.R
	}
	return nil
}

func (ps *pluginSet) Hostname(rank uint) string {
	if ps.m.hosts != nil {
		if h, err := ps.m.hosts.Nth(int(rank)); err == nil {
			return h
		}
	}
	return strconv.FormatUint(uint64(rank), 10)
}

func (ps *pluginSet) Exec(rank uint, argv []string, env map[string]string, ev jobtap.ExecEvents) (jobtap.Proc, error) {
	out := func(stream string) io.Writer {
		if ev.Output == nil {
			return nil
		}
		return &lineWriter{emit: func(line string) { ev.Output(stream, line) }}
	}
	stdout, stderr := out("stdout"), out("stderr")
	p, err := subprocess.Start(ps.m.h, uint32(rank), subprocess.Command{
		Args: argv, Env: env, Stdout: stdout, Stderr: stderr,
	}, subprocess.Events{
		Done: func(_ *subprocess.Process, status subprocess.Status, err error) {
			for _, w := range []io.Writer{stdout, stderr} {
				if lw, ok := w.(*lineWriter); ok {
					lw.flush()
				}
			}
			if ev.Done != nil {
				ev.Done(int(status), err)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (ps *pluginSet) Drain(ranks, reason string, done func(error)) {
	f, err := ps.m.h.RPC("resource.drain", 0, map[string]any{"targets": ranks, "reason": reason, "mode": "update"}, 0)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		f.Close()
		done(err)
	})
}

// lineWriter hands output on to emit a line at a time.
type lineWriter struct {
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(b), nil
}

// flush emits a last line that had no newline.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}
