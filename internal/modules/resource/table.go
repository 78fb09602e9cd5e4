package resource

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxgo/fluxgo/internal/valuekind"
)

// tableKeys are the keys of the configuration's [resource] table
// (flux-config-resource(5)) and the broker attribute each becomes, ""
// for the keys accepted for compatibility that change nothing here:
// fluxgo discovers from /sys or hwloc XML without
// restricting to the broker's CPU affinity (norestrict), does not watch
// R for updates (no-update-watch), and discovers again at each start
// (rediscover).
var tableKeys = map[string]string{
	"config":          "resource.config",
	"path":            "resource.path",
	"exclude":         "resource.exclude",
	"scheduling":      "resource.scheduling",
	"hwloc-xml":       "resource.hwloc-xml",
	"noverify":        "resource.noverify",
	"verify":          "resource.verify",
	"norestrict":      "",
	"no-update-watch": "",
	"rediscover":      "",
}

// TableAttrs checks the [resource] table of a configuration (nil: none)
// and returns the broker attributes it sets for this module: an unknown
// key or a value of the wrong type is an error that names the key.
func TableAttrs(table map[string]any) (map[string]string, error) {
	raw, ok := table["resource"]
	if !ok {
		return nil, nil
	}
	t, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("resource: want a table, not %s", valuekind.Of(raw))
	}
	attrs := make(map[string]string)
	for k, v := range t {
		attr, known := tableKeys[k]
		switch {
		case !known:
			keys := make([]string, 0, len(tableKeys))
			for k := range tableKeys {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return nil, fmt.Errorf("resource.%s: unknown key (the [resource] table may hold %s)", k, strings.Join(keys, ", "))
		case k == "config":
			entries, ok := v.([]map[string]any)
			if list, isList := v.([]any); isList {
				// the same table read back as JSON (config.get)
				entries, ok = make([]map[string]any, 0, len(list)), true
				for _, e := range list {
					m, isMap := e.(map[string]any)
					if !isMap {
						ok = false
						break
					}
					entries = append(entries, m)
				}
			}
			if !ok {
				return nil, fmt.Errorf("resource.config: want an array of tables ([[resource.config]]), not %s", valuekind.Of(v))
			}
			b, err := json.Marshal(entries)
			if err != nil {
				return nil, fmt.Errorf("resource.config: %v", err)
			}
			if _, err := parseConfigJSON(b); err != nil {
				return nil, err
			}
			attrs[attr] = string(b)
		case k == "verify":
			switch x := v.(type) {
			case bool:
				attrs[attr] = fmt.Sprint(x)
			case map[string]any:
				if _, err := verifyTable(x); err != nil {
					return nil, err
				}
				b, _ := json.Marshal(x)
				attrs[attr] = string(b)
			default:
				return nil, fmt.Errorf("resource.verify: want true, false or a table, got %v", v)
			}
		case attr == "" || k == "noverify":
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("resource.%s: want true or false, got %v", k, v)
			}
			if attr != "" {
				attrs[attr] = fmt.Sprint(b)
			}
		default:
			s, ok := v.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("resource.%s: want a non-empty string, got %v", k, v)
			}
			attrs[attr] = s
		}
	}
	if nv, ok := attrs["resource.noverify"]; ok {
		if v, ok := attrs["resource.verify"]; ok && (nv == "true") != (v == "false") {
			return nil, fmt.Errorf("resource.verify = %s and resource.noverify = %s disagree: give one", v, nv)
		}
	}
	if attrs["resource.config"] != "" && attrs["resource.path"] != "" {
		return nil, fmt.Errorf("resource.config and resource.path: give one inventory, not both")
	}
	return attrs, nil
}
