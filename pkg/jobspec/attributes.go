package jobspec

import (
	"fmt"
	"math"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// Accessors for the system attributes Flux defines. On a jobspec that
// passed Validate they cannot fail, except where noted; on one edited
// since, a value of the wrong type makes them return the zero value (or an
// error, for those that return one).

func (js *Jobspec) sys(key string) (any, bool) {
	v, ok := js.Attributes.System[key]
	return v, ok
}

func (js *Jobspec) sysString(key string) string {
	v, _ := js.sys(key)
	s, _ := v.(string)
	return s
}

// Duration returns attributes.system.duration in seconds; 0 means
// unlimited (or unset). A string value is read as an RFC 23 duration.
func (js *Jobspec) Duration() (float64, error) {
	v, ok := js.sys("duration")
	if !ok {
		return 0, nil
	}
	p := (*path)(nil).child("attributes").child("system").child("duration")
	if s, ok := v.(string); ok {
		d, err := fsd.Parse(s)
		if err != nil {
			return 0, p.errf("%v", err)
		}
		if math.IsInf(d, 1) {
			return 0, nil
		}
		return d, nil
	}
	return seconds(v, p)
}

// SetDuration sets attributes.system.duration to sec seconds (0 for
// unlimited). sec must be finite and not negative.
func (js *Jobspec) SetDuration(sec float64) error {
	if !fsd.Valid(sec) || math.IsInf(sec, 0) {
		return (*path)(nil).child("attributes").child("system").child("duration").
			errf("must be a finite number >= 0, not %v", sec)
	}
	js.setSystem("duration", sec)
	return nil
}

// Cwd returns attributes.system.cwd, the working directory of the tasks.
func (js *Jobspec) Cwd() string { return js.sysString("cwd") }

// SetCwd sets attributes.system.cwd.
func (js *Jobspec) SetCwd(dir string) { js.setSystem("cwd", dir) }

// Queue returns attributes.system.queue ("" for the default queue).
func (js *Jobspec) Queue() string { return js.sysString("queue") }

// SetQueue sets attributes.system.queue.
func (js *Jobspec) SetQueue(q string) { js.setSystem("queue", q) }

// JobName returns attributes.system.job.name, or "" if the job has no
// explicit name (Flux then shows the base name of the command).
func (js *Jobspec) JobName() string {
	v, _ := js.sys("job")
	m, _ := v.(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// SetJobName sets attributes.system.job.name.
func (js *Jobspec) SetJobName(name string) error {
	return js.SetAttribute("system.job.name", name)
}

// Environment returns the variables attributes.system.environment sets.
// Variables it unsets (null values) are left out.
func (js *Jobspec) Environment() map[string]string {
	v, _ := js.sys("environment")
	m, _ := v.(map[string]any)
	if m == nil {
		return nil
	}
	env := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			env[k] = s
		}
	}
	return env
}

// SetEnvironment replaces attributes.system.environment by env.
func (js *Jobspec) SetEnvironment(env map[string]string) {
	m := make(map[string]any, len(env))
	for k, v := range env {
		m[k] = v
	}
	js.setSystem("environment", m)
}

// ShellOptions returns attributes.system.shell.options, the job shell
// options (nil if there are none). The map is the jobspec's own.
func (js *Jobspec) ShellOptions() map[string]any {
	v, _ := js.sys("shell")
	m, _ := v.(map[string]any)
	o, _ := m["options"].(map[string]any)
	return o
}

// SetShellOption sets the shell option at the dotted key (e.g.
// "output.stdout.path") to val, as flux submit -o KEY=VAL does.
func (js *Jobspec) SetShellOption(key string, val any) error {
	return js.SetAttribute("system.shell.options."+key, val)
}

// Constraints returns attributes.system.constraints parsed as an RFC 31
// constraint, or nil if there is none.
func (js *Jobspec) Constraints() (*Constraint, error) {
	v, ok := js.sys("constraints")
	if !ok {
		return nil, nil
	}
	return constraintFrom(v, (*path)(nil).child("attributes").child("system").child("constraints"), 0)
}

// SetConstraints sets attributes.system.constraints to c (removes it if
// c is nil).
func (js *Jobspec) SetConstraints(c *Constraint) {
	if c == nil {
		delete(js.Attributes.System, "constraints")
		return
	}
	js.setSystem("constraints", c.Object())
}

// Dependencies returns attributes.system.dependencies (RFC 26).
func (js *Jobspec) Dependencies() ([]Dependency, error) {
	v, ok := js.sys("dependencies")
	if !ok {
		return nil, nil
	}
	return dependenciesFrom(v, (*path)(nil).child("attributes").child("system").child("dependencies"))
}

// SetDependencies sets attributes.system.dependencies (removes it if deps
// is empty, as RFC 26 asks).
func (js *Jobspec) SetDependencies(deps []Dependency) {
	if len(deps) == 0 {
		delete(js.Attributes.System, "dependencies")
		return
	}
	l := make([]any, len(deps))
	for i, d := range deps {
		l[i] = d.Object()
	}
	js.setSystem("dependencies", l)
}

func (js *Jobspec) setSystem(key string, v any) {
	if js.Attributes.System == nil {
		js.Attributes.System = make(map[string]any)
	}
	js.Attributes.System[key] = v
}

// Attribute returns the attribute at a dotted key under attributes, e.g.
// "system.shell.options.cpu-affinity" or "user.project.name".
func (js *Jobspec) Attribute(key string) (any, bool) {
	parts := strings.Split(key, ".")
	if len(parts) < 2 {
		return nil, false
	}
	var cur any
	switch parts[0] {
	case "system":
		cur = js.Attributes.System
	case "user":
		cur = js.Attributes.User
	default:
		return nil, false
	}
	for _, k := range parts[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// SetAttribute sets the attribute at a dotted key under attributes, which
// must start with "system." or "user.", creating intermediate mappings.
// val must be a JSON-like value: nil, bool, string, an integer or float
// type, []any, []string, map[string]any or map[string]string (numbers are
// stored as int64 or float64).
func (js *Jobspec) SetAttribute(key string, val any) error {
	p := (*path)(nil).child("attributes").child(key)
	parts := strings.Split(key, ".")
	if len(parts) < 2 || (parts[0] != "system" && parts[0] != "user") {
		return p.errf(`attribute key must start with "system." or "user."`)
	}
	for _, k := range parts[1:] {
		if k == "" {
			return p.errf("attribute key has an empty component")
		}
	}
	v, err := normalize(val, 0)
	if err != nil {
		return p.errf("%v", err)
	}
	var m *map[string]any
	if parts[0] == "system" {
		m = &js.Attributes.System
	} else {
		m = &js.Attributes.User
	}
	if *m == nil {
		*m = make(map[string]any)
	}
	cur := *m
	for i, k := range parts[1 : len(parts)-1] {
		next, ok := cur[k]
		if !ok || next == nil {
			nm := make(map[string]any)
			cur[k] = nm
			cur = nm
			continue
		}
		nm, ok := next.(map[string]any)
		if !ok {
			return p.errf("cannot set: attributes.%s is %s, not a mapping",
				strings.Join(parts[:i+2], "."), typeName(next))
		}
		cur = nm
	}
	cur[parts[len(parts)-1]] = v
	return nil
}

// normalize converts a Go value into the generic value types.
func normalize(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested too deeply")
	}
	switch t := v.(type) {
	case nil, bool, string, int64:
		return v, nil
	case int:
		return int64(t), nil
	case int32:
		return int64(t), nil
	case uint32:
		return int64(t), nil
	case float32:
		return normalize(float64(t), depth)
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("%v is not a finite number", t)
		}
		return t, nil
	case []string:
		l := make([]any, len(t))
		for i, s := range t {
			l[i] = s
		}
		return l, nil
	case map[string]string:
		m := make(map[string]any, len(t))
		for k, s := range t {
			m[k] = s
		}
		return m, nil
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			y, err := normalize(x, depth+1)
			if err != nil {
				return nil, err
			}
			l[i] = y
		}
		return l, nil
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			y, err := normalize(x, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = y
		}
		return m, nil
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// ParseValue decodes a JSON value (as given to flux submit --setattr and
// --setopt) into the generic types attribute values use, keeping integers
// and floating point numbers apart.
func ParseValue(data []byte) (any, error) {
	return decodeJSON(data)
}
