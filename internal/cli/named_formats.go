package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"
)

// Named output formats of flux jobs, flux pgrep, flux resource and flux
// queue: each command's built-in ones, plus those users and sites
// register in configuration files (flux-jobs(1) CONFIGURATION). A
// command PROG reads PROG.json, PROG.toml and PROG.yaml (in that order)
// from each of, in increasing precedence, the flux directories of
// $XDG_CONFIG_DIRS (last entry first; /etc/xdg when unset) and of
// $XDG_CONFIG_HOME ($HOME/.config when unset). Formats sit in a
// "formats" table, of the subcommand's table for commands with several
// listings (flux-resource: [list.formats.NAME]); each has a required
// "format" and an optional "description". A later file's format replaces
// an earlier one of the same name; redefining a built-in is an error.

// namedFormat is one named output format.
type namedFormat struct{ name, desc, format string }

// formatSet is the named formats of one listing.
type formatSet struct {
	prog    string // config file base name, e.g. "flux-jobs"
	table   string // the listing's table in the file ("" for the top)
	env     string // variable naming the default format
	builtin []namedFormat
}

// formatConfigDirs returns the directories searched, lowest precedence
// first.
func formatConfigDirs() []string {
	var dirs []string
	sys := os.Getenv("XDG_CONFIG_DIRS")
	if sys == "" {
		sys = "/etc/xdg"
	}
	list := strings.Split(sys, ":")
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] != "" {
			dirs = append(dirs, filepath.Join(list[i], "flux"))
		}
	}
	home := os.Getenv("XDG_CONFIG_HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".config")
		}
	}
	if home != "" {
		dirs = append(dirs, filepath.Join(home, "flux"))
	}
	return dirs
}

// formats returns the built-in formats followed by the configured ones.
func (s *formatSet) formats() ([]namedFormat, error) {
	all := slices.Clone(s.builtin)
	for _, dir := range formatConfigDirs() {
		for _, ext := range []string{"json", "toml", "yaml"} {
			path := filepath.Join(dir, s.prog+"."+ext)
			data, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			found, err := s.parseConfig(path, ext, data)
			if err != nil {
				return nil, err
			}
			for _, f := range found {
				i := slices.IndexFunc(all, func(g namedFormat) bool { return g.name == f.name })
				switch {
				case i < 0:
					all = append(all, f)
				case i < len(s.builtin):
					return nil, fmt.Errorf("%s: format %q: a built-in format cannot be redefined (choose another name)", path, f.name)
				default:
					all[i] = f
				}
			}
		}
	}
	return all, nil
}

// parseConfig reads the formats of one configuration file, in name order.
func (s *formatSet) parseConfig(path, ext string, data []byte) ([]namedFormat, error) {
	var doc map[string]any
	var err error
	switch ext {
	case "json":
		err = json.Unmarshal(data, &doc)
	case "toml":
		_, err = toml.Decode(string(data), &doc)
	case "yaml":
		err = yaml.Unmarshal(data, &doc)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	where := "formats"
	tbl := doc
	if s.table != "" {
		where = s.table + ".formats"
		sub, ok := doc[s.table]
		if !ok {
			return nil, nil
		}
		if tbl, ok = sub.(map[string]any); !ok {
			return nil, fmt.Errorf("%s: %s must be a table", path, s.table)
		}
	}
	raw, ok := tbl["formats"]
	if !ok {
		return nil, nil
	}
	formats, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %s must be a table of named formats", path, where)
	}
	names := make([]string, 0, len(formats))
	for name := range formats {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]namedFormat, 0, len(names))
	for _, name := range names {
		entry, ok := formats[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %s.%s must be a table with a format key", path, where, name)
		}
		f := namedFormat{name: name}
		if f.format, ok = entry["format"].(string); !ok || f.format == "" {
			return nil, fmt.Errorf("%s: %s.%s: format is required and must be a string", path, where, name)
		}
		if d, present := entry["description"]; present {
			if f.desc, ok = d.(string); !ok {
				return nil, fmt.Errorf("%s: %s.%s: description must be a string", path, where, name)
			}
		}
		for key := range entry {
			if key != "format" && key != "description" {
				return nil, fmt.Errorf("%s: %s.%s: unknown key %q (want format, description)", path, where, name, key)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// resolve turns a --format argument into a format string: "" or
// "default" is the format the env variable names (or the built-in
// default), a registered name its format, anything else is the format
// itself.
func (s *formatSet) resolve(arg string) (string, error) {
	if arg == "" || arg == "default" {
		arg = "default"
		if v := os.Getenv(s.env); v != "" && s.env != "" {
			arg = v
		}
	}
	if !isFormatName(arg) {
		return arg, nil
	}
	all, err := s.formats()
	if err != nil {
		return "", err
	}
	for _, f := range all {
		if f.name == arg {
			return f.format, nil
		}
	}
	return "", fmt.Errorf("--format: no format named %q (-o help lists them; a format string has {fields})", arg)
}

// isFormatName tells a name from a format string (which has fields).
func isFormatName(s string) bool { return !strings.ContainsAny(s, "{}") }

// printHelp lists the named formats (--format=help).
func (s *formatSet) printHelp(w io.Writer) error {
	all, err := s.formats()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Configured %s output formats:\n", s.prog)
	for _, f := range all {
		desc := f.desc
		if desc == "" {
			desc = f.format
		}
		fmt.Fprintf(w, "  %-12s %s\n", f.name, desc)
	}
	return nil
}

// getConfig prints a configuration snippet defining format name as it
// is now (--format=get-config=NAME), to copy into a config file under
// another name.
func (s *formatSet) getConfig(w io.Writer, name string) error {
	all, err := s.formats()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(all, func(f namedFormat) bool { return f.name == name })
	if i < 0 {
		names := make([]string, len(all))
		for j, f := range all {
			names[j] = f.name
		}
		return fmt.Errorf("--format=get-config=%s: no format named %q (formats: %s)", name, name, strings.Join(names, ", "))
	}
	header := "formats." + tomlKey(name)
	if s.table != "" {
		header = tomlKey(s.table) + "." + header
	}
	fmt.Fprintf(w, "[%s]\n", header)
	if all[i].desc != "" {
		fmt.Fprintf(w, "description = %s\n", tomlString(all[i].desc))
	}
	_, err = fmt.Fprintf(w, "format = %s\n", tomlString(all[i].format))
	return err
}

// tomlKey quotes a TOML key unless it is a bare key.
func tomlKey(k string) string {
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return tomlString(k)
		}
	}
	return k
}

// tomlString writes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// special handles the --format values that are not formats: help and
// get-config=NAME. It reports whether arg was one of them.
func (s *formatSet) special(w io.Writer, arg string) (bool, error) {
	if arg == "help" {
		return true, s.printHelp(w)
	}
	if name, ok := strings.CutPrefix(arg, "get-config="); ok {
		return true, s.getConfig(w, name)
	}
	return false, nil
}
