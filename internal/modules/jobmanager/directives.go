package jobmanager

import (
	"encoding/json"
	"fmt"
	"sort"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/jobtap/builtin"
)

// pluginDirective is one entry of [job-manager] plugins
// (flux-config-job-manager(5)): remove plugins matching a name or glob
// ("all": every non-builtin one, no error when none match), then load
// one with an optional configuration.
type pluginDirective struct {
	Load   string          `json:"load"`
	Remove string          `json:"remove"`
	Conf   json.RawMessage `json:"conf"`
}

// parseDirectives reads [job-manager] plugins from the instance
// configuration, checking every directive (and the configuration of
// the plugins they load) so a broker refuses a bad one at start.
func parseDirectives(conf json.RawMessage) ([]pluginDirective, error) {
	var top struct {
		JM struct {
			Plugins json.RawMessage `json:"plugins"`
		} `json:"job-manager"`
	}
	if len(conf) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(conf, &top); err != nil {
		return nil, fmt.Errorf("[job-manager]: %v: %w", err, syscall.EINVAL)
	}
	if len(top.JM.Plugins) == 0 || string(top.JM.Plugins) == "null" {
		return nil, nil
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(top.JM.Plugins, &entries); err != nil {
		return nil, fmt.Errorf("[job-manager] plugins must be an array of tables: %w", syscall.EINVAL)
	}
	out := make([]pluginDirective, 0, len(entries))
	for i, e := range entries {
		where := fmt.Sprintf("[job-manager] plugins[%d]", i)
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var d pluginDirective
		for _, k := range keys {
			v := e[k]
			switch k {
			case "load", "remove":
				var s string
				if json.Unmarshal(v, &s) != nil || s == "" {
					return nil, fmt.Errorf("%s: %s must be a non-empty string, not %s: %w", where, k, v, syscall.EINVAL)
				}
				if k == "load" {
					d.Load = s
				} else {
					d.Remove = s
				}
			case "conf":
				var obj map[string]any
				if json.Unmarshal(v, &obj) != nil {
					return nil, fmt.Errorf("%s: conf must be a table, not %s: %w", where, v, syscall.EINVAL)
				}
				d.Conf = v
			default:
				return nil, fmt.Errorf("%s: unknown key %q (load, remove or conf): %w", where, k, syscall.EINVAL)
			}
		}
		switch {
		case d.Load == "" && d.Remove == "":
			return nil, fmt.Errorf("%s: load or remove is required: %w", where, syscall.EINVAL)
		case d.Conf != nil && d.Load == "":
			return nil, fmt.Errorf("%s: conf is only valid with load: %w", where, syscall.EINVAL)
		}
		if d.Load != "" {
			if err := checkLoad(d.Load, d.Conf, conf); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// checkLoad checks that name is a plugin that accepts conf and the
// instance configuration.
func checkLoad(name string, conf, instance json.RawMessage) error {
	factory, ok := builtin.Lookup(canonicalName(name))
	if !ok {
		return noPlugin(name)
	}
	p := factory()
	if cu, ok := p.(jobtap.ConfigUpdater); ok && len(conf) == 0 {
		if _, err := cu.ConfigUpdate(instance); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// applyDirectives carries out the directives in order, each removal
// before its load.
func (ps *pluginSet) applyDirectives(dirs []pluginDirective) error {
	for _, d := range dirs {
		if d.Remove != "" {
			if err := ps.remove(d.Remove); err != nil {
				return fmt.Errorf("[job-manager] plugins: remove %s: %w", d.Remove, err)
			}
		}
		if d.Load != "" {
			if err := ps.load(d.Load, d.Conf); err != nil {
				return fmt.Errorf("[job-manager] plugins: load %s: %w", d.Load, err)
			}
		}
	}
	return nil
}
