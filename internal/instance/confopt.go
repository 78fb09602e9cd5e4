package instance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/fluxgo/fluxgo/internal/broker"
)

// The broker's --conf=VALUE (flux-broker(1)): configuration applied over
// the configuration files, in order. VALUE is KEY=VAL (a dotted key set
// to VAL as JSON, or as a string if it is not JSON), an inline JSON
// object ({...}), an inline TOML string (it holds a newline), a .json
// file, or else a TOML file.

// maxConfSize bounds a --conf file.
const maxConfSize = 4 << 20

// applyConf merges one --conf VALUE into table.
func applyConf(table map[string]any, value string) error {
	switch {
	case strings.HasPrefix(value, "{"):
		return mergeJSONConf(table, []byte(value))
	case strings.Contains(value, "\n"):
		return mergeTOMLConf(table, value)
	case strings.Contains(value, "="):
		key, val, _ := strings.Cut(value, "=")
		if key == "" {
			return errors.New("empty key")
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(val))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || dec.More() {
			v = val
		}
		return setDotted(table, strings.Split(key, "."), broker.TypedNumbers(v))
	}
	data, err := readConfFile(value)
	if err != nil {
		return err
	}
	if strings.HasSuffix(value, ".json") {
		return mergeJSONConf(table, data)
	}
	return mergeTOMLConf(table, string(data))
}

func readConfFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxConfSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfSize)
	}
	return os.ReadFile(path)
}

func mergeJSONConf(table map[string]any, data []byte) error {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	mergeConf(table, broker.TypedNumbers(m).(map[string]any))
	return nil
}

func mergeTOMLConf(table map[string]any, text string) error {
	var m map[string]any
	if _, err := toml.Decode(text, &m); err != nil {
		return fmt.Errorf("TOML: %w", err)
	}
	mergeConf(table, m)
	return nil
}

// mergeConf merges src into dst: tables merge key by key, anything else
// replaces.
func mergeConf(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeConf(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// setDotted sets table[a][b]...[z] = v, making the tables on the way.
func setDotted(table map[string]any, path []string, v any) error {
	for i, k := range path {
		if k == "" {
			return fmt.Errorf("empty key component in %q", strings.Join(path, "."))
		}
		if i == len(path)-1 {
			table[k] = v
			return nil
		}
		next, ok := table[k].(map[string]any)
		if !ok {
			if _, exists := table[k]; exists {
				return fmt.Errorf("%s is not a table", strings.Join(path[:i+1], "."))
			}
			next = map[string]any{}
			table[k] = next
		}
		table = next
	}
	return nil
}
