package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/valuekind"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func newModuleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "module",
		Short: "Load, remove and list broker modules",
		Long: `flux module manages the modules of a broker: the local one, or the broker
of rank N with --rank=N.`,
	}
	cmd.AddCommand(newModuleListCmd(), newModuleLoadCmd(), newModuleRemoveCmd(),
		newModuleReloadCmd(), newModuleStatsCmd(), newModuleDebugCmd())
	return cmd
}

// moduleRankFlag adds -r/--rank to a module subcommand.
func moduleRankFlag(cmd *cobra.Command, rank *string) {
	cmd.Flags().StringVarP(rank, "rank", "r", "any", "act on the broker of rank `N` (default: the local broker)")
}

// withModuleHandle parses the rank, connects and runs fn.
func withModuleHandle(rank string, fn func(ctx context.Context, h *flux.Handle, nodeid uint32) error) error {
	nodeid, err := parseNodeid(rank, nil)
	if err != nil {
		return fmt.Errorf("--rank: %w", err)
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		return fn(ctx, h, nodeid)
	})
}

func newModuleListCmd() *cobra.Command {
	var long, all bool
	var rank string
	cmd := &cobra.Command{
		Use:   "list [-l] [-a]",
		Short: "List loaded modules",
		Long: `List the broker's loaded modules: name, seconds since the module last sent
a message (Idle), state (S: I initializing, R running, F finalizing, X
exited) and the services it registered besides its own name. --long adds
each module's path; --all lists the compiled-in modules instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withModuleHandle(rank, func(ctx context.Context, h *flux.Handle, nodeid uint32) error {
				var resp flux.ModuleList
				if err := h.Call(ctx, "module.list", nodeid, nil, &resp); err != nil {
					return fmt.Errorf("module.list: %w", err)
				}
				if all {
					names := append([]string(nil), resp.Available...)
					sort.Strings(names)
					for _, n := range names {
						fmt.Fprintln(cmd.OutOrStdout(), n)
					}
					return nil
				}
				writeModuleList(cmd.OutOrStdout(), resp.Mods, long)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "include each module's path")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "list the modules compiled into this broker, loaded or not")
	moduleRankFlag(cmd, &rank)
	return cmd
}

// moduleStateChar is the S column. The values are those the broker
// reports in module.list (modhost.go: 2 is running).
func moduleStateChar(status int) byte {
	switch status {
	case 0:
		return 'I'
	case 1:
		return 'S'
	case 2:
		return 'R'
	case 3:
		return 'F'
	case 4:
		return 'X'
	}
	return '?'
}

// writeModuleList prints module list output:
//
//	Module                   Idle  S Service
//	kvs                         0  R kvs-watch
func writeModuleList(w io.Writer, mods []flux.ModuleInfo, long bool) {
	sort.Slice(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
	header := fmt.Sprintf("%-24s %4s  %c %s", "Module", "Idle", 'S', "Service")
	if long {
		header = fmt.Sprintf("%-24s %4s  %c %-24s %s", "Module", "Idle", 'S', "Service", "Path")
	}
	fmt.Fprintln(w, header)
	for _, m := range mods {
		var extra []string
		for _, s := range m.Services {
			if s != m.Name {
				extra = append(extra, s)
			}
		}
		sort.Strings(extra)
		idle := strconv.Itoa(m.Idle)
		if m.Idle > 9999 {
			idle = "idle"
		}
		line := fmt.Sprintf("%-24s %4s  %c %s", m.Name, idle, moduleStateChar(m.Status), strings.Join(extra, ","))
		if long {
			line = fmt.Sprintf("%-24s %4s  %c %-24s %s", m.Name, idle, moduleStateChar(m.Status), strings.Join(extra, ","), m.Path)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

func newModuleLoadCmd() *cobra.Command {
	var rank string
	cmd := &cobra.Command{
		Use:   "load [-r N] NAME [ARGS...]",
		Short: "Load a module",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withModuleHandle(rank, func(ctx context.Context, h *flux.Handle, nodeid uint32) error {
				return moduleLoad(ctx, h, nodeid, args[0], args[1:])
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	moduleRankFlag(cmd, &rank)
	return cmd
}

func moduleLoad(ctx context.Context, h *flux.Handle, nodeid uint32, name string, args []string) error {
	if args == nil {
		args = []string{}
	}
	req := map[string]any{"name": name, "args": args}
	if err := h.Call(ctx, "module.load", nodeid, req, nil); err != nil {
		return fmt.Errorf("load %s: %w", name, err)
	}
	return nil
}

func newModuleRemoveCmd() *cobra.Command {
	var rank string
	var force bool
	cmd := &cobra.Command{
		Use:     "remove [-f] [-r N] NAME",
		Aliases: []string{"unload", "rm"},
		Short:   "Remove a module",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withModuleHandle(rank, func(ctx context.Context, h *flux.Handle, nodeid uint32) error {
				return moduleRemove(ctx, h, nodeid, args[0], force)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "succeed even if the module is not loaded")
	moduleRankFlag(cmd, &rank)
	return cmd
}

func moduleRemove(ctx context.Context, h *flux.Handle, nodeid uint32, name string, force bool) error {
	err := h.Call(ctx, "module.remove", nodeid, map[string]string{"name": name}, nil)
	if err != nil && !(force && errors.Is(err, syscall.ENOENT)) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

func newModuleReloadCmd() *cobra.Command {
	var rank string
	var force bool
	cmd := &cobra.Command{
		Use:   "reload [-f] [-r N] NAME [ARGS...]",
		Short: "Remove a module and load it again",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withModuleHandle(rank, func(ctx context.Context, h *flux.Handle, nodeid uint32) error {
				if err := moduleRemove(ctx, h, nodeid, args[0], force); err != nil {
					return err
				}
				return moduleLoad(ctx, h, nodeid, args[0], args[1:])
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "load the module even if it was not loaded")
	moduleRankFlag(cmd, &rank)
	return cmd
}

func newModuleDebugCmd() *cobra.Command {
	var rank, set, setbit, clearbit string
	var clr bool
	cmd := &cobra.Command{
		Use:   "debug [--clear | --set=MASK | --setbit=BIT | --clearbit=BIT] NAME",
		Short: "Get or set a module's debug flags",
		Long: `Get or change the debug flags of module NAME (the NAME.debug service every
module answers) and print them as hexadecimal. What each bit does is the
module's own: sched-simple's 0x1 denies every allocation, 0x2 annotates
pending jobs with sched.reason_pending and sched.jobs_ahead, 0x4 refuses
expiration updates. MASK and BIT are numbers as C reads them: 0x for
hexadecimal, a leading 0 for octal.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op, flags, err := moduleDebugOp(cmd, clr, set, setbit, clearbit)
			if err != nil {
				return err
			}
			return withModuleHandle(rank, func(ctx context.Context, h *flux.Handle, nodeid uint32) error {
				topic := args[0] + ".debug"
				var resp struct {
					Flags int `json:"flags"`
				}
				if err := h.Call(ctx, topic, nodeid, map[string]any{"op": op, "flags": flags}, &resp); err != nil {
					return fmt.Errorf("%s: %w", topic, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "0x%x\n", resp.Flags)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&clr, "clear", "C", false, "set the debug flags to 0")
	f.StringVarP(&set, "set", "S", "", "set the debug flags to `MASK`")
	f.StringVarP(&setbit, "setbit", "s", "", "set the debug flag(s) `BIT`")
	f.StringVarP(&clearbit, "clearbit", "c", "", "clear the debug flag(s) `BIT`")
	moduleRankFlag(cmd, &rank)
	return cmd
}

// moduleDebugOp is the NAME.debug request of the flux module debug
// options: the first of --clear, --set, --clearbit, --setbit given (as
// flux-core's), else setbit 0, which reads the flags.
func moduleDebugOp(cmd *cobra.Command, clr bool, set, setbit, clearbit string) (string, int, error) {
	num := func(opt, v string) (int, error) {
		n, err := strconv.ParseUint(v, 0, 32)
		if err != nil {
			return 0, fmt.Errorf("--%s=%q: want a number (0x for hexadecimal)", opt, v)
		}
		return int(n), nil
	}
	changed := cmd.Flags().Changed
	switch {
	case clr:
		return "clr", 0, nil
	case changed("set"):
		n, err := num("set", set)
		return "set", n, err
	case changed("clearbit"):
		n, err := num("clearbit", clearbit)
		return "clrbit", n, err
	case changed("setbit"):
		n, err := num("setbit", setbit)
		return "setbit", n, err
	}
	return "setbit", 0, nil
}

// moduleStatsOptions are the flux module stats flags.
type moduleStatsOptions struct {
	parse  string
	typ    string
	scale  float64
	rusage bool
}

func newModuleStatsCmd() *cobra.Command {
	var rank string
	var o moduleStatsOptions
	cmd := &cobra.Command{
		Use:   "stats [OPTIONS] NAME",
		Short: "Print a module's statistics as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.typ != "" && o.typ != "int" && o.typ != "double" {
				return fmt.Errorf("--type=%q: must be int or double", o.typ)
			}
			return withModuleHandle(rank, func(ctx context.Context, h *flux.Handle, nodeid uint32) error {
				return moduleStats(ctx, h, nodeid, args[0], o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.parse, "parse", "p", "", "print only the value at `OBJNAME` (fields separated by periods)")
	f.StringVarP(&o.typ, "type", "t", "", "convert the value to `int` or double")
	f.Float64VarP(&o.scale, "scale", "s", 1, "multiply the value by `N`")
	f.BoolVarP(&o.rusage, "rusage", "R", false, "print the broker's resource usage (getrusage) instead")
	moduleRankFlag(cmd, &rank)
	return cmd
}

func moduleStats(ctx context.Context, h *flux.Handle, nodeid uint32, name string, o moduleStatsOptions, w io.Writer) error {
	topic, req := "module.stats", any(map[string]string{"name": name})
	if o.rusage {
		// Modules run inside the broker process: its usage is theirs.
		topic, req = "broker.rusage", nil
	}
	var m *flux.Message
	if !o.rusage && name != "overlay" && name != "log" {
		// the module's own statistics (NAME.stats-get, as flux-core
		// asks), else the broker's view of the module
		f, err := h.RPC(name+".stats-get", nodeid, nil, 0)
		if err != nil {
			return err
		}
		if m, err = f.Get(ctx); err != nil {
			if !errors.Is(err, syscall.ENOSYS) {
				return fmt.Errorf("%s.stats-get: %w", name, err)
			}
			m = nil
		}
	}
	if m == nil {
		f, err := h.RPC(topic, nodeid, req, 0)
		if err != nil {
			return err
		}
		if m, err = f.Get(ctx); err != nil {
			return fmt.Errorf("%s %s: %w", topic, name, err)
		}
	}
	out, err := selectStat(m.JSON(), o)
	if err != nil {
		return fmt.Errorf("stats %s: %w", name, err)
	}
	fmt.Fprintln(w, out)
	return nil
}

// selectStat applies --parse, --type and --scale to a stats object and
// renders the result.
func selectStat(payload []byte, o moduleStatsOptions) (string, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("response is not JSON: %v", err)
	}
	if o.parse != "" {
		for _, field := range strings.Split(o.parse, ".") {
			obj, ok := v.(map[string]any)
			if !ok {
				return "", fmt.Errorf("--parse=%s: %q is not inside an object", o.parse, field)
			}
			if v, ok = obj[field]; !ok {
				return "", fmt.Errorf("--parse=%s: no field %q", o.parse, field)
			}
		}
	}
	num, isNum := v.(json.Number)
	if !isNum {
		if o.typ != "" || o.scale != 1 {
			return "", fmt.Errorf("--type/--scale need a number, not %s", valuekind.Of(v))
		}
		b, err := json.Marshal(v)
		return string(b), err
	}
	x, err := num.Float64()
	if err != nil {
		return "", err
	}
	x *= o.scale
	isInt := !strings.ContainsAny(num.String(), ".eE") && o.scale == 1
	switch o.typ {
	case "int":
		return strconv.FormatInt(int64(x), 10), nil
	case "double":
		return strconv.FormatFloat(x, 'f', 6, 64), nil
	}
	if isInt {
		return num.String(), nil
	}
	return strconv.FormatFloat(x, 'g', -1, 64), nil
}
