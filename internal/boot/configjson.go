package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeJSON parses a .json configuration file (flux-core reads .json
// files of a config directory beside .toml ones) into the same value
// types TOML decoding gives: integers int64, other numbers float64, an
// array whose elements are all objects []map[string]any. The top level
// must be an object.
func decodeJSON(name string, data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var serr *json.SyntaxError
		if errors.As(err, &serr) {
			return nil, fmt.Errorf("%w: %s: byte %d: %s", ErrConfig, name, serr.Offset, serr.Error())
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: text after the JSON object", ErrConfig, name)
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s: want a JSON object at the top, got %s", ErrConfig, name, jsonKind(v))
	}
	nv, err := tomlTyped(name, t)
	if err != nil {
		return nil, err
	}
	return nv.(map[string]any), nil
}

// tomlTyped converts decoded JSON to TOML's value types. A null has no
// TOML spelling, so it is an error naming the file.
func tomlTyped(name string, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("%w: %s: null has no TOML equivalent", ErrConfig, name)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: number %s: %w", ErrConfig, name, x, err)
		}
		return f, nil
	case map[string]any:
		for k, sub := range x {
			nv, err := tomlTyped(name, sub)
			if err != nil {
				return nil, err
			}
			x[k] = nv
		}
		return x, nil
	case []any:
		tables := len(x) > 0
		for i, sub := range x {
			nv, err := tomlTyped(name, sub)
			if err != nil {
				return nil, err
			}
			x[i] = nv
			if _, ok := nv.(map[string]any); !ok {
				tables = false
			}
		}
		if tables {
			out := make([]map[string]any, len(x))
			for i, sub := range x {
				out[i] = sub.(map[string]any)
			}
			return out, nil
		}
		return x, nil
	}
	return v, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}
