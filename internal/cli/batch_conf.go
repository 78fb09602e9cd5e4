package cli

// flux batch/alloc --conf: the configuration of the new instance. The
// --conf values are merged into one table, checked as the brokers will
// check it, and carried in the jobspec as the RFC 37 file
// attributes.system.files["conf.json"]; the instance's brokers get
// --job-config, which makes each fetch it from the enclosing instance
// before it starts (broker_nested.go).

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/fluxgo/fluxgo/internal/instance"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// parseConf merges --conf values, in order, into one table. A value is a
// FILE (.toml or .json), KEY=VAL (a dotted key; VAL is JSON if it parses
// as JSON, else a string), or a configuration text in JSON or TOML.
func parseConf(values []string) (map[string]any, error) {
	out := map[string]any{}
	for _, v := range values {
		t, err := confTable(v)
		if err != nil {
			return nil, fmt.Errorf("--conf=%s: %w", abbrevConf(v), err)
		}
		mergeTables(out, t)
	}
	return out, nil
}

func abbrevConf(v string) string {
	if len(v) > 40 || strings.Contains(v, "\n") {
		v, _, _ = strings.Cut(v, "\n")
		if len(v) > 40 {
			v = v[:40]
		}
		return v + "..."
	}
	return v
}

func confTable(v string) (map[string]any, error) {
	_, statErr := os.Stat(v)
	if (strings.HasSuffix(v, ".toml") || strings.HasSuffix(v, ".json")) && (statErr == nil || !isKeyValue(v)) {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(v, ".json") {
			return instance.JSONTable(b)
		}
		return tomlTable(string(b))
	}
	if isKeyValue(v) {
		return keyValueTable(v)
	}
	if s := strings.TrimSpace(v); strings.HasPrefix(s, "{") {
		return instance.JSONTable([]byte(s))
	}
	return tomlTable(v)
}

// keyValueTable makes a table of a dotted KEY=VAL: VAL is JSON if it
// parses as JSON, else a string.
func keyValueTable(v string) (map[string]any, error) {
	key, val, _ := strings.Cut(v, "=")
	var x any = val
	if json.Valid([]byte(val)) {
		json.Unmarshal([]byte(val), &x)
	}
	t := map[string]any{}
	parts := strings.Split(key, ".")
	m := t
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("empty component in key %q", key)
		}
		if i == len(parts)-1 {
			m[p] = x
			break
		}
		next := map[string]any{}
		m[p] = next
		m = next
	}
	return t, nil
}

// isKeyValue reports whether v is a dotted KEY=VAL (not TOML text).
func isKeyValue(v string) bool {
	key, _, ok := strings.Cut(v, "=")
	return ok && key != "" && !strings.ContainsAny(key, " \t\n[]{}\"'")
}

func tomlTable(s string) (map[string]any, error) {
	var t map[string]any
	if _, err := toml.Decode(s, &t); err != nil {
		return nil, fmt.Errorf("not a file, KEY=VAL or TOML/JSON text: %w", err)
	}
	return t, nil
}

// mergeTables merges src into dst: tables merge key by key, any other
// value replaces.
func mergeTables(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeTables(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// addJobConf puts the --conf table in the jobspec's files, after
// checking it as the brokers will.
func addJobConf(js *jobspec.Jobspec, values []string) error {
	t, err := parseConf(values)
	if err != nil {
		return err
	}
	if err := instance.CheckConfig(t); err != nil {
		return fmt.Errorf("--conf: %w", err)
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return js.AddFile(instance.JobConfFile, jobspec.FileEntry(b, 0o600))
}
