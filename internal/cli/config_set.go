package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// setTypes are the types flux config set takes (flux-config(1)).
var setTypes = []string{"string", "integer", "real", "boolean", "object", "array", "fsd"}

func newConfigSetCmd() *cobra.Command {
	var typ string
	cmd := &cobra.Command{
		Use:   "set [OPTIONS] NAME VALUE",
		Short: "Set broker configuration value",
		Long: `Set NAME, a period-delimited TOML key (tbon.torpid_min), to VALUE in the
instance's configuration, creating the tables on its path. VALUE is read
as --type says, or, without --type, as the type of NAME's current value
(an error when NAME is not set). The new configuration is offered to the
modules like flux config load (instance owner only, rank 0 only).`,
		Args: exactArgsUsage(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if typ != "" && !slices.Contains(configTypes, typ) {
				return fmt.Errorf("Unknown type: %s (valid: %s)", typ, strings.Join(setTypes, ", "))
			}
			if typ == "fsd-integer" || typ == "fsd-real" || typ == "any" {
				return fmt.Errorf("Invalid type for the set subcommand: %s (valid: %s)", typ, strings.Join(setTypes, ", "))
			}
			name, text := args[0], args[1]
			if err := checkConfigKey(name); err != nil {
				return err
			}
			return updateConfig(func(conf map[string]any) error {
				t := typ
				if t == "" {
					old, ok := lookupConfig(conf, name)
					if !ok {
						return errors.New("Type is unknown, please specify --type")
					}
					t = configTypeOf(old)
				}
				v, err := parseConfigValue(text, t)
				if err != nil {
					return err
				}
				return setConfigPath(conf, name, v)
			})
		},
	}
	cmd.Flags().StringVarP(&typ, "type", "t", "", "Specify `TYPE` ("+strings.Join(setTypes, ", ")+")")
	return cmd
}

func newConfigUnsetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unset NAME",
		Short: "Unset broker configuration value",
		Long: `Remove NAME, a period-delimited TOML key, from the instance's
configuration (not an error when it is not set) and offer the result to
the modules (instance owner only, rank 0 only).`,
		Args: exactArgsUsage(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkConfigKey(name); err != nil {
				return err
			}
			return updateConfig(func(conf map[string]any) error {
				parts := strings.Split(name, ".")
				t := conf
				for _, p := range parts[:len(parts)-1] {
					next, ok := t[p].(map[string]any)
					if !ok {
						return nil
					}
					t = next
				}
				delete(t, parts[len(parts)-1])
				return nil
			})
		},
	}
}

// exactArgsUsage is cobra.ExactArgs as a usage error.
func exactArgsUsage(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("expected %d argument(s), got %d", n, len(args))}
		}
		return nil
	}
}

// checkConfigKey refuses a key with an empty part ("a..b", ".a").
func checkConfigKey(name string) error {
	if slices.Contains(strings.Split(name, "."), "") {
		return fmt.Errorf("%q: a key is period-delimited names, none empty", name)
	}
	return nil
}

// updateConfig fetches the configuration, lets change edit it, and
// loads the result.
func updateConfig(change func(conf map[string]any) error) error {
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		f, err := h.RPCRaw("config.get", flux.NodeidAny, nil, 0)
		if err != nil {
			return err
		}
		m, err := f.Get(ctx)
		if err != nil {
			return fmt.Errorf("Error fetching config object: %s", flux.ErrorText(err))
		}
		var conf map[string]any
		dec := json.NewDecoder(bytes.NewReader(m.JSON()))
		dec.UseNumber() // reals stay reals: 5.0 is not 5
		if err := dec.Decode(&conf); err != nil || conf == nil {
			return fmt.Errorf("Error fetching config object: the answer is not a JSON object")
		}
		if err := change(conf); err != nil {
			return err
		}
		payload, err := json.Marshal(conf)
		if err != nil {
			return err
		}
		if err := h.Call(ctx, "config.load", flux.NodeidAny, json.RawMessage(payload), nil); err != nil {
			return fmt.Errorf("Error updating config object: %s", flux.ErrorText(err))
		}
		return nil
	})
}

// configTypeOf is the flux config set type of a value as config.get
// answers it (numbers as json.Number).
func configTypeOf(v any) string {
	switch x := v.(type) {
	case bool:
		return "boolean"
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return "real"
		}
		return "integer"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "string"
}

// parseConfigValue reads text as a value of type typ.
func parseConfigValue(text, typ string) (any, error) {
	switch typ {
	case "boolean":
		switch strings.ToLower(text) {
		case "true", "1", "yes":
			return true, nil
		case "false", "0", "no":
			return false, nil
		}
		return nil, fmt.Errorf("Error parsing boolean value: %q is not true or false", text)
	case "real":
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("Error parsing real value: %q", text)
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0" // stays a real
		}
		return json.Number(s), nil
	case "integer":
		n, err := strconv.ParseInt(text, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("Error parsing integer value: %q", text)
		}
		return json.Number(strconv.FormatInt(n, 10)), nil
	case "object", "array":
		var v any
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		err := dec.Decode(&v)
		if err == nil && dec.More() {
			err = errors.New("text after the value")
		}
		_, isObj := v.(map[string]any)
		_, isArr := v.([]any)
		if err != nil || (typ == "object" && !isObj) || (typ == "array" && !isArr) {
			return nil, fmt.Errorf("Error parsing json %s: %q", typ, text)
		}
		return v, nil
	case "fsd":
		if _, err := fsd.Parse(text); err != nil {
			return nil, fmt.Errorf("Error parsing Flux Standard Duration: %q: %v", text, err)
		}
		return text, nil
	}
	if strings.HasPrefix(text, `"`) {
		var s string
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			return nil, fmt.Errorf("Error parsing string: %s is not a JSON string", text)
		}
		return s, nil
	}
	return text, nil
}

// setConfigPath sets the period-delimited key name in conf to v,
// creating the tables on its path.
func setConfigPath(conf map[string]any, name string, v any) error {
	parts := strings.Split(name, ".")
	t := conf
	for i, p := range parts[:len(parts)-1] {
		switch next := t[p].(type) {
		case map[string]any:
			t = next
		case nil:
			m := map[string]any{}
			t[p] = m
			t = m
		default:
			return fmt.Errorf("Error updating config object: %s is not a table", strings.Join(parts[:i+1], "."))
		}
	}
	t[parts[len(parts)-1]] = v
	return nil
}
