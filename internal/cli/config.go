package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/boot"
	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage/query Flux configuration",
		Long: `Query and change the TOML configuration of the local broker (its
--config-path). A new configuration is checked, then offered to every
module of the broker: the job manager takes new [policy] limits, [queues]
and [job-manager] purge limits, job-ingest new queues and jobspec
defaults, sched-simple the nodes queues require. If a module refuses it,
nothing changes. Tables read only at start ([bootstrap], [resource])
take effect at the next start. The configuration changes on rank 0 only
(set, unset, load, reload): every other broker takes rank 0's when it
joins and follows each change.`,
	}
	cmd.AddCommand(newConfigGetCmd(), newConfigSetCmd(), newConfigUnsetCmd(), newConfigReloadCmd(), newConfigLoadCmd(), newConfigBuiltinCmd())
	return cmd
}

func newConfigReloadCmd() *cobra.Command {
	var followerNoop bool
	cmd := &cobra.Command{
		Use:   "reload [OPTIONS]",
		Short: "Reload broker configuration from files",
		Long: `Read the broker's configuration path again and offer the result to its
modules (instance owner only, rank 0 only: the other brokers follow).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if followerNoop {
					rank, err := h.Attr(ctx, "rank")
					if err != nil {
						return err
					}
					if rank != "0" {
						return nil
					}
				}
				if err := h.Call(ctx, "config.reload", flux.NodeidAny, nil, nil); err != nil {
					return fmt.Errorf("reload: %s", flux.ErrorText(err))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&followerNoop, "follower-noop", false, "Do nothing if run on a non-leader broker (for systemd use)")
	return cmd
}

func newConfigLoadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "load [PATH]",
		Short: "Load broker configuration from stdin or PATH",
		Long: `Replace the broker's configuration with the *.toml files of directory
PATH, the TOML file PATH, or, without PATH, a JSON object or TOML text read
from standard input.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var table map[string]any
			var err error
			if len(args) == 1 {
				var c *boot.Config
				if c, err = boot.LoadConfig(args[0]); err == nil {
					table = c.Table
				}
			} else {
				table, err = readConfigText(cmd.InOrStdin())
			}
			if err != nil {
				return err
			}
			payload, err := broker.ConfigJSON(table) // TOML floats stay reals
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if err := h.Call(ctx, "config.load", flux.NodeidAny, json.RawMessage(payload), nil); err != nil {
					return fmt.Errorf("load: %s", flux.ErrorText(err))
				}
				return nil
			})
		},
	}
}

// builtinKeys are flux-core's compiled-in configuration keys
// (flux-config(1), BUILTIN VALUES), in its order. Most name paths that
// fluxgo does not have: its modules, rc1/rc3, jobtap plugins, connectors
// and shell are built into the one binary, and there is no Lua, PMI
// library or man pages. Those keys print an empty value.
var builtinKeys = []string{
	"rc1_path", "rc3_path", "shell_path", "shell_pluginpath", "shell_initrc",
	"jobtap_pluginpath", "rundir", "confdir", "libexecdir", "bindir", "lua_cpath_add", "lua_path_add",
	"python_path", "man_path", "exec_path", "connector_path", "module_path",
	"pmi_library_path", "cmdhelp_pattern", "no_docs_path",
}

// fluxExecutable returns the path of the running flux binary, symlinks
// resolved ("" if it cannot be found).
func fluxExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe
}

// builtinValue returns the value of a builtin key for the flux binary
// exe.
func builtinValue(name, exe string) string {
	switch name {
	case "shell_path": // flux shell, and the job-shell module in the broker
		return exe
	case "confdir": // where a system instance keeps its configuration
		return "/etc/flux"
	case "bindir", "exec_path", "libexecdir":
		if exe == "" {
			return ""
		}
		return filepath.Dir(exe)
	case "rundir": // where flux start makes its brokers' rundirs
		return os.TempDir()
	case "python_path":
		dir, _ := pythonPackageDir()
		return dir
	}
	return ""
}

func newConfigBuiltinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "builtin NAME",
		Short: "Print compiled-in Flux configuration values",
		Long: `Print the compiled-in value of NAME. The keys are
flux-core's (flux-config(1)): ` + strings.Join(builtinKeys, ", ") + `.
fluxgo builds its modules, rc1/rc3, jobtap plugins, connectors and job
shell into the one flux binary, so the paths for them print empty;
shell_path is the flux binary, bindir, libexecdir and exec_path its
directory, rundir where flux start puts its brokers' run directories,
confdir /etc/flux, python_path the flux Python package (as flux python
finds it). Available to all users.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("installed") && cmd.Flags().Changed("intree") {
				return usageError{errors.New("--installed and --intree: give one")}
			}
			if !slices.Contains(builtinKeys, args[0]) {
				return fmt.Errorf("%s is invalid (valid: %s)", args[0], strings.Join(builtinKeys, ", "))
			}
			fmt.Fprintln(cmd.OutOrStdout(), builtinValue(args[0], fluxExecutable()))
			return nil
		},
	}
	// flux-core's: the installed or the build tree's value; fluxgo has
	// one layout, so both give the same
	cmd.Flags().Bool("installed", false, "print the installed value (fluxgo's only one)")
	cmd.Flags().Bool("intree", false, "print the build tree's value (the same in fluxgo)")
	return cmd
}

// configPathShorthand are the names flux config get -c takes for the
// configuration directories of a system instance (flux-config(1)): the
// broker's, and flux-security's signing library's and IMP's, which
// fluxgo does not use but a site may keep.
var configPathShorthand = map[string]string{
	"system":   "/etc/flux/system/conf.d",
	"security": "/etc/flux/security/conf.d",
	"imp":      "/etc/flux/imp/conf.d",
}

// readConfigJSONObject decodes one JSON object from r, named name in
// errors.
func readConfigJSONObject(name string, r io.Reader) (map[string]any, error) {
	var table map[string]any
	dec := json.NewDecoder(r)
	dec.UseNumber() // 3.0 stays a real, 3 an integer
	if err := dec.Decode(&table); err != nil {
		return nil, fmt.Errorf("%s: JSON: %w", name, err)
	}
	return table, nil
}

// readConfigText reads a configuration object from r: JSON when it
// starts with '{', TOML otherwise.
func readConfigText(r io.Reader) (map[string]any, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return readConfigJSONObject("standard input", bytes.NewReader(data))
	}
	c, err := boot.ParseConfig("standard input", data)
	if err != nil {
		return nil, err
	}
	return c.Table, nil
}

// configTypes are the types flux config get --type checks.
var configTypes = []string{"any", "string", "integer", "real", "boolean", "object", "array", "fsd", "fsd-integer", "fsd-real"}

func newConfigGetCmd() *cobra.Command {
	var def, typ, path string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "get [OPTIONS] [NAME]",
		Short: "Query broker configuration values",
		Long: `Query broker configuration values.

Print the whole configuration as a JSON object, or the value of NAME, a
period-delimited TOML key (policy.limits.duration). Strings print without
quotes, other values as JSON. A NAME that is not set is an error, unless
--default is given.

Without --config-path the configuration is the local broker's as it is
now: its --config-path files merged, with its --conf values and every
change since (set, unset, load, reload); every broker of an instance
shows rank 0's. With --config-path it is what the files say (system is
/etc/flux/system/conf.d); the output, saved as a .json file, may be read
back with --config-path.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ = strings.ToLower(typ)
			if typ == "any" {
				typ = ""
			}
			if typ != "" && !slices.Contains(configTypes, typ) {
				return fmt.Errorf("Unknown type: %s (valid: %s)", typ, strings.Join(configTypes, ", "))
			}
			raw, err := readConfigJSON(path)
			if err != nil {
				return err
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				return fmt.Errorf("config.get: %w", err)
			}
			name, ok := "the configuration", true
			if len(args) == 1 {
				name = args[0]
				v, ok = lookupConfig(v, name)
			}
			switch {
			case !ok && cmd.Flags().Changed("default"):
				fmt.Fprintln(cmd.OutOrStdout(), def)
				return nil
			case !ok && quiet:
				return exitCode(1)
			case !ok:
				return fmt.Errorf("%s is not set", name)
			}
			out, err := formatConfigValue(v, typ)
			if err != nil {
				if len(args) == 0 {
					name = "value"
				}
				return fmt.Errorf("%s %w", name, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config-path", "c", "", "read the configuration from `PATH` (a TOML file, a directory of them, a .json file, or system, security or imp for /etc/flux/NAME/conf.d) instead of asking the broker")
	f.StringVarP(&def, "default", "d", "", "print `VALUE` when NAME is not set (and exit 0)")
	f.BoolVarP(&quiet, "quiet", "q", false, "print no error when NAME is not set")
	f.StringVarP(&typ, "type", "t", "", "require the value to be of `TYPE`: "+strings.Join(configTypes, ", "))
	return cmd
}

// readConfigJSON returns the configuration as a JSON object: the TOML
// at path, or (path "") the broker's (config.get).
func readConfigJSON(path string) ([]byte, error) {
	if dir, ok := configPathShorthand[path]; ok {
		path = dir
	}
	if strings.HasSuffix(path, ".json") {
		// flux config get's own output, read back (flux-config(5))
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		table, err := readConfigJSONObject(path, f)
		if err != nil {
			return nil, err
		}
		return broker.ConfigJSON(table)
	}
	if path != "" {
		c, err := boot.LoadConfig(path)
		if err != nil {
			return nil, err
		}
		return broker.ConfigJSON(c.Table)
	}
	var raw []byte
	err := withHandle(func(ctx context.Context, h *flux.Handle) error {
		f, err := h.RPCRaw("config.get", flux.NodeidAny, nil, 0)
		if err != nil {
			return err
		}
		m, err := f.Get(ctx)
		if err != nil {
			return err
		}
		raw = bytes.Clone(m.JSON())
		return nil
	})
	return raw, err
}

// lookupConfig finds the period-delimited key name in v.
func lookupConfig(v any, name string) (any, bool) {
	for _, part := range strings.Split(name, ".") {
		t, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = t[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// article returns "a TYPE" or "an TYPE".
func article(typ string) string {
	if strings.ContainsRune("aeiou", rune(typ[0])) {
		return "an " + typ
	}
	return "a " + typ
}

// formatConfigValue checks v against typ ("" for any) and formats it
// for printing.
func formatConfigValue(v any, typ string) (string, error) {
	wrong := func() (string, error) {
		b, _ := json.Marshal(v)
		return "", fmt.Errorf("does not have the requested type (%s is not %s)", b, article(typ))
	}
	switch typ {
	case "string":
		if _, ok := v.(string); !ok {
			return wrong()
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return wrong()
		}
		if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
			return wrong()
		}
	case "real":
		// strict, as in flux-core: 5 is an integer, 5.0 a real
		n, ok := v.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			return wrong()
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return wrong()
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return wrong()
		}
	case "array":
		if _, ok := v.([]any); !ok {
			return wrong()
		}
	case "fsd", "fsd-integer", "fsd-real":
		s, ok := v.(string)
		if !ok {
			return wrong()
		}
		sec, err := fsd.Parse(s)
		if err != nil {
			return "", fmt.Errorf("does not have the requested type (%q is not a valid Flux Standard Duration: %w)", s, err)
		}
		switch typ {
		case "fsd":
			return fsd.Format(sec), nil
		case "fsd-integer":
			return strconv.FormatInt(int64(sec), 10), nil
		default:
			return strconv.FormatFloat(sec, 'f', 6, 64), nil // %f
		}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}
