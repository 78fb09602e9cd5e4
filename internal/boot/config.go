package boot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Config is a broker's configuration: one file, or every *.toml and
// *.json file of a directory merged into one set of tables.
type Config struct {
	// Table holds the merged tables: nested tables are map[string]any,
	// integers int64, arrays []any or []map[string]any.
	Table map[string]any
	// Dir is the directory relative paths in the configuration (such as
	// bootstrap.curve_cert) are resolved against: the directory itself,
	// or the directory holding the file.
	Dir string
	// origin records which file set each leaf key ("bootstrap.hosts").
	origin map[string]string
}

// LoadConfig reads PATH: a TOML or .json file, or a directory whose
// *.toml and *.json files are read in name order and merged. Tables with the same name merge key
// by key, recursively; a key set by two files is an error naming both.
// An empty directory is an empty configuration.
func LoadConfig(path string) (*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: config path: %w", ErrConfig, err)
	}
	c := &Config{Table: make(map[string]any), origin: make(map[string]string)}
	var files []string
	if st.IsDir() {
		c.Dir = path
		for _, pat := range []string{"*.toml", "*.json"} {
			m, err := filepath.Glob(filepath.Join(path, pat))
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
			}
			files = append(files, m...)
		}
		sort.Strings(files)
	} else {
		c.Dir = filepath.Dir(path)
		files = []string{path}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ParseConfig parses TOML text (name says where it came from, in
// errors).
func ParseConfig(name string, data []byte) (*Config, error) {
	c := &Config{Table: make(map[string]any), origin: make(map[string]string)}
	if err := c.add(name, data); err != nil {
		return nil, err
	}
	return c, nil
}

// add parses one file's text (JSON when its name ends in .json, else
// TOML) and merges it in.
func (c *Config) add(name string, data []byte) error {
	if strings.HasSuffix(name, ".json") {
		t, err := decodeJSON(name, data)
		if err != nil {
			return err
		}
		return c.merge(c.Table, t, "", name)
	}
	var t map[string]any
	if _, err := toml.Decode(string(data), &t); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return fmt.Errorf("%w: %s: line %d: %s", ErrConfig, name, perr.Position.Line, perr.Message)
		}
		return fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
	}
	return c.merge(c.Table, t, "", name)
}

func (c *Config) merge(dst, src map[string]any, prefix, file string) error {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := src[k]
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		old, exists := dst[k]
		if !exists {
			dst[k] = v
			c.record(path, v, file)
			continue
		}
		ot, ok1 := old.(map[string]any)
		nt, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			if err := c.merge(ot, nt, path, file); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("%w: %s: %s is already set in %s", ErrConfig, file, path, c.originOf(path))
	}
	return nil
}

// record notes the file that set path (and everything under it).
func (c *Config) record(path string, v any, file string) {
	c.origin[path] = file
	if t, ok := v.(map[string]any); ok {
		for k, sub := range t {
			c.record(path+"."+k, sub, file)
		}
	}
}

func (c *Config) originOf(path string) string {
	for p := path; p != ""; {
		if f, ok := c.origin[p]; ok {
			return f
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return "another file"
}

// Section returns the named top-level table and whether it is present.
func (c *Config) Section(name string) (map[string]any, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	v, ok := c.Table[name]
	if !ok {
		return nil, false, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s: want a table, got %s", ErrConfig, name, typeName(v))
	}
	return t, true, nil
}

// Resolve makes a relative path from the configuration absolute.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) || c == nil {
		return p
	}
	return filepath.Join(c.Dir, p)
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// fields reads a table's keys strictly: every key must be known.
type fields struct {
	prefix string
	t      map[string]any
	used   map[string]bool
}

func newFields(prefix string, t map[string]any) *fields {
	return &fields{prefix: prefix, t: t, used: make(map[string]bool)}
}

func (f *fields) key(k string) string { return f.prefix + "." + k }

func (f *fields) str(k string) (string, bool, error) {
	f.used[k] = true
	v, ok := f.t[k]
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, fmt.Errorf("%w: %s: want a string, got %s", ErrConfig, f.key(k), typeName(v))
	}
	return s, true, nil
}

func (f *fields) integer(k string) (int64, bool, error) {
	f.used[k] = true
	v, ok := f.t[k]
	if !ok {
		return 0, false, nil
	}
	n, ok := v.(int64)
	if !ok {
		return 0, false, fmt.Errorf("%w: %s: want an integer, got %s", ErrConfig, f.key(k), typeName(v))
	}
	return n, true, nil
}

func (f *fields) boolean(k string) (bool, error) {
	f.used[k] = true
	v, ok := f.t[k]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%w: %s: want a boolean, got %s", ErrConfig, f.key(k), typeName(v))
	}
	return b, nil
}

// tables reads an array of tables.
func (f *fields) tables(k string) ([]map[string]any, bool, error) {
	f.used[k] = true
	v, ok := f.t[k]
	if !ok {
		return nil, false, nil
	}
	switch a := v.(type) {
	case []map[string]any:
		return a, true, nil
	case []any:
		out := make([]map[string]any, len(a))
		for i, e := range a {
			t, ok := e.(map[string]any)
			if !ok {
				return nil, false, fmt.Errorf("%w: %s[%d]: want a table, got %s", ErrConfig, f.key(k), i, typeName(e))
			}
			out[i] = t
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%w: %s: want an array of tables, got %s", ErrConfig, f.key(k), typeName(v))
}

// stringList reads an array of strings.
func (f *fields) stringList(k string) ([]string, bool, error) {
	f.used[k] = true
	v, ok := f.t[k]
	if !ok {
		return nil, false, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s: want an array of strings, got %s", ErrConfig, f.key(k), typeName(v))
	}
	out := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, false, fmt.Errorf("%w: %s[%d]: want a string, got %s", ErrConfig, f.key(k), i, typeName(e))
		}
		out[i] = s
	}
	return out, true, nil
}

// unknown reports the first key (in name order) that was never read.
func (f *fields) unknown(known string) error {
	var extra []string
	for k := range f.t {
		if !f.used[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return fmt.Errorf("%w: %s: unknown key (known keys: %s)", ErrConfig, f.key(extra[0]), known)
}

// Check validates the tables boot reads ([tbon], [bootstrap]) without
// deciding a plan: a test instance (flux start -s N), which boots its
// brokers itself, still refuses a configuration that a real one would.
func (c *Config) Check() error {
	t, _, err := c.Section("tbon")
	if err != nil {
		return err
	}
	if _, err := ParseTBON(t); err != nil {
		return err
	}
	bs, have, err := c.Section("bootstrap")
	if err != nil || !have {
		return err
	}
	_, err = ParseBootstrap(c, bs)
	return err
}
