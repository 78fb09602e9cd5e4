// Package builtin holds the jobtap plugins compiled into the job
// manager, and the list loaded by default.
package builtin

import (
	"sort"

	"github.com/fluxgo/fluxgo/internal/jobtap"
)

// Factory makes a plugin instance.
type Factory func() jobtap.Plugin

// plugins lists every built-in plugin by name. Names starting with "."
// are loaded by default and hidden from `flux jobtap list` unless -a.
var plugins = map[string]Factory{
	".priority-default":     func() jobtap.Plugin { return &PriorityDefault{} },
	".dependency-after":     func() jobtap.Plugin { return newDependencyAfter() },
	".dependency-singleton": func() jobtap.Plugin { return newSingleton() },
	".begin-time":           func() jobtap.Plugin { return &BeginTime{} },
	".limit-job-size":       func() jobtap.Plugin { return &LimitJobSize{} },
	".limit-duration":       func() jobtap.Plugin { return &LimitDuration{} },
	".update-duration":      func() jobtap.Plugin { return &UpdateDuration{ownerAllowAny: true} },
	".history":              func() jobtap.Plugin { return newHistory() },
	".mail":                 func() jobtap.Plugin { return &Mail{} },
	".accounting-limits":    func() jobtap.Plugin { return newAccountLimits() },
	"alloc-bypass":          func() jobtap.Plugin { return &AllocBypass{} },
	"perilog":               func() jobtap.Plugin { return &Perilog{} },
	"mf-priority":           func() jobtap.Plugin { return newMFPriority() },
}

// defaults is the load order at job manager start.
var defaults = []string{
	".priority-default",
	".limit-job-size",
	".limit-duration",
	".update-duration",
	".dependency-after",
	".dependency-singleton",
	".begin-time",
	".history",
	".mail",
	".accounting-limits",
}

// Lookup returns the factory for a plugin name ("x" finds ".x" too).
func Lookup(name string) (Factory, bool) {
	if f, ok := plugins[name]; ok {
		return f, true
	}
	f, ok := plugins["."+name]
	return f, ok
}

// Names lists the built-in plugins.
func Names() []string {
	out := make([]string, 0, len(plugins))
	for n := range plugins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Defaults lists the plugins loaded at start, in order.
func Defaults() []string { return append([]string(nil), defaults...) }
