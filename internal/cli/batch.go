package cli

// flux batch and flux alloc submit a job that runs a Flux instance: one
// broker per node of the allocation (the job's single task per node is
// "flux broker"). The brokers bootstrap from the job shell's PMI and the
// instance's resources are exactly the job's R (the resource module
// fetches it from the enclosing instance). Rank 0 runs the initial
// program: the batch script, the alloc command or an interactive shell.
//
// The batch script travels in the jobspec as an RFC 37 file archive
// entry, attributes.system.files.script; the initial program of a batch
// job is the hidden command "flux batch-exec ARGS...", which fetches the
// script from the enclosing instance, writes it to the rank 0 broker's
// rundir and executes it.
//
// Both commands set the shell options per-resource.type=node (one broker
// per node) and exit-timeout=none (a broker exiting early does not end
// the job); the nested instance also tells the enclosing job-exec which
// of its brokers are critical, so a lost non-critical broker (or node)
// raises a non-fatal exception and the instance carries on without it.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// instanceOptions are the options of flux batch and flux alloc.
type instanceOptions struct {
	submitOptions
	brokerOpts []string
	conf       []string // --conf: the new instance's configuration (batch_conf.go)
	wrap       bool     // batch: wrap the command (or stdin) in a /bin/sh script
	bg         bool     // alloc: do not attach; print the jobid once the instance is ready
}

// instanceFlags makes the flag set of flux batch (batch) or flux alloc,
// storing into o.
func instanceFlags(name string, o *instanceOptions, batch bool) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flux "+name, pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(io.Discard)
	addSubmitFlags(fs, &o.submitOptions, submitFlagSets{})
	fs.StringVarP(&o.ntasks, "nslots", "n", "", "Number of total resource slots `N` requested (required unless --nodes is given)")
	fs.StringVarP(&o.coresPerTask, "cores-per-slot", "c", "", "Number of cores `N` to allocate per slot (default 1)")
	fs.StringVarP(&o.gpusPerTask, "gpus-per-slot", "g", "", "Number of GPUs `N` to allocate per slot")
	fs.StringVarP(&o.nodes, "nodes", "N", "", "Distribute allocated resource slots across `N` individual nodes")
	fs.BoolVarP(&o.exclusive, "exclusive", "x", false, "With --nodes, allocate nodes exclusively")
	fs.StringArrayVarP(&o.brokerOpts, "broker-opts", "B", nil, "Pass `OPT` to the brokers of the new instance (multiple use OK)")
	fs.StringArrayVar(&o.conf, "conf", nil, "Configure the new instance with `FILE|KEY=VAL|TEXT`: a .toml or .json file, a dotted KEY=VAL (VAL is JSON if it parses), or TOML/JSON text; merged in order (multiple use OK)")
	if batch {
		fs.BoolVar(&o.wrap, "wrap", false, "Wrap COMMAND and ARGS (or standard input) in a /bin/sh script")
		fs.BoolVar(&o.quiet, "quiet", false, "Do not print the jobid to stdout on submission")
	} else {
		fs.BoolVar(&o.bg, "bg", false, "Do not attach: print the jobid once the instance is ready to accept jobs")
	}
	return fs
}

// newInstanceOptions returns the defaults of a fresh command line.
func newInstanceOptions(name string) *instanceOptions {
	return &instanceOptions{submitOptions: submitOptions{urgency: "16", cmdName: name, proc: defaultProcessEnv()}}
}

// instanceCommand wires a command whose options are parsed by
// instanceFlags (so that batch directives and the command line can be
// parsed in turn into one option set).
func instanceCommand(use, short, long, name string, batch bool, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:                use,
		Short:              short,
		Long:               long,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if errors.Is(err, pflag.ErrHelp) {
				return cmd.Help()
			}
			return err
		},
	}
	cmd.Flags().AddFlagSet(instanceFlags(name, newInstanceOptions(name), batch))
	return cmd
}

func newBatchCmd() *cobra.Command {
	return instanceCommand("batch [OPTIONS...] [SCRIPT [ARGS...]]",
		"Submit a batch script to run as the initial program of a new Flux instance",
		`Submit SCRIPT (read from standard input if not given) to run as the
initial program of a new Flux instance on the allocated resources, with
ARGS as its arguments, and print the jobid. The instance exits when
SCRIPT does. Options may also come from "# flux:" directives in the
script (RFC 36); the command line overrides them.

Resources are slots (-n, default 1 core each, -c cores per slot, -g
GPUs per slot) spread over -N nodes; one broker runs per node. Output goes
to flux-{{id}}.out unless --output says otherwise (none or kvs: the
job's output eventlog).`,
		"batch", true, func(cmd *cobra.Command, args []string) error {
			return runBatch(args, cmd.InOrStdin(), cmd.OutOrStdout())
		})
}

// readBatchScript returns the script and its arguments from the command
// line (or stdin), and the job name a script file gives.
func readBatchScript(o *instanceOptions, rest []string, stdin io.Reader) (script string, args []string, name string, err error) {
	switch {
	case o.wrap && len(rest) > 0:
		script = "#!/bin/sh\n" + shellJoin(rest) + "\n"
	case len(rest) > 0:
		data, err := os.ReadFile(rest[0])
		if err != nil {
			return "", nil, "", err
		}
		script, args, name = string(data), rest[1:], filepath.Base(rest[0])
	default:
		data, err := io.ReadAll(stdin)
		if err != nil {
			return "", nil, "", fmt.Errorf("reading the script from stdin: %w", err)
		}
		script = string(data)
		if o.wrap {
			script = "#!/bin/sh\n" + script
		}
	}
	if !strings.HasPrefix(script, "#!") {
		return "", nil, "", errors.New("the batch script must start with #! (use --wrap for a /bin/sh script)")
	}
	return script, args, name, nil
}

// shellJoin quotes words for /bin/sh.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%") == "" {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// parseBatchOptions parses the command line, then, if the script has
// directives, the directives followed by the command line again (so the
// command line wins).
func parseBatchOptions(args []string, stdin io.Reader) (o *instanceOptions, script string, scriptArgs []string, name string, err error) {
	o = newInstanceOptions("batch")
	fs := instanceFlags("batch", o, true)
	if err := fs.Parse(args); err != nil {
		return nil, "", nil, "", err
	}
	script, scriptArgs, name, err = readBatchScript(o, fs.Args(), stdin)
	if err != nil {
		return nil, "", nil, "", err
	}
	words, err := parseDirectives(script)
	if err != nil {
		return nil, "", nil, "", err
	}
	if len(words) == 0 {
		return o, script, scriptArgs, name, nil
	}
	o = newInstanceOptions("batch")
	fs = instanceFlags("batch", o, true)
	if err := fs.Parse(words); err != nil {
		return nil, "", nil, "", fmt.Errorf("%w: %v", ErrDirective, err)
	}
	if fs.NArg() > 0 {
		return nil, "", nil, "", fmt.Errorf("%w: %q is not an option (directives may only give options)", ErrDirective, fs.Arg(0))
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", nil, "", err
	}
	return o, script, scriptArgs, name, nil
}

func runBatch(args []string, stdin io.Reader, out io.Writer) error {
	o, script, scriptArgs, name, err := parseBatchOptions(args, stdin)
	if err != nil {
		return err
	}
	exe, err := selfExe()
	if err != nil {
		return err
	}
	if o.output == "" {
		o.output = "flux-{{id}}.out"
	}
	if o.output != "none" && o.output != "kvs" && o.errorPath == "" {
		o.errorPath = o.output // stderr goes with stdout
	}
	js, err := instanceJobspec(o, append([]string{exe, "batch-exec"}, scriptArgs...))
	if err != nil {
		return err
	}
	if err := js.AddFile("script", jobspec.FileEntry([]byte(script), 0o700)); err != nil {
		return err
	}
	if name != "" && o.jobName == "" {
		if err := js.SetJobName(name); err != nil {
			return err
		}
	}
	id, err := submitInstance(o, js, out)
	if err != nil || id == 0 {
		return err
	}
	if !o.quiet {
		fmt.Fprintln(out, id.String())
	}
	return nil
}

// instanceJobspec builds the jobspec of an instance whose rank 0 runs
// initial (nothing: the instance runs until shut down or canceled).
func instanceJobspec(o *instanceOptions, initial []string) (*jobspec.Jobspec, error) {
	if o.ntasks == "" && o.nodes == "" {
		return nil, errors.New("the number of slots to allocate must be given (-n, --nslots) unless --nodes is")
	}
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	cmd := []string{exe, "broker"}
	if len(o.conf) > 0 {
		cmd = append(cmd, "--job-config")
	}
	for _, bo := range o.brokerOpts {
		cmd = append(cmd, strings.Fields(bo)...)
	}
	if len(initial) > 0 {
		cmd = append(cmd, "--")
		cmd = append(cmd, initial...)
	}
	// relative output paths are the job's working directory's
	cwd := o.cwd
	if cwd == "" {
		if cwd, err = o.proc.getwd(); err != nil {
			return nil, fmt.Errorf("cannot get the working directory: %w", err)
		}
	}
	for _, p := range []*string{&o.output, &o.errorPath} {
		if *p != "" && *p != "none" && *p != "kvs" && !filepath.IsAbs(*p) {
			*p = filepath.Join(cwd, *p)
		}
	}
	js, err := o.buildOne(cmd)
	if err != nil {
		return nil, err
	}
	if len(o.conf) > 0 {
		if err := addJobConf(js, o.conf); err != nil {
			return nil, err
		}
	}
	for k, v := range map[string]any{"per-resource.type": "node", "per-resource.count": int64(1), "exit-timeout": "none"} {
		if err := js.SetShellOption(k, v); err != nil {
			return nil, err
		}
	}
	return js, js.CheckText()
}

// submitInstance submits js (or prints it with --dry-run, returning 0).
func submitInstance(o *instanceOptions, js *jobspec.Jobspec, out io.Writer) (jobid.ID, error) {
	if o.dryRun {
		b, err := js.MarshalJSON()
		if err != nil {
			return 0, err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return 0, err
	}
	urgency, err := urgencyValue(o.urgency)
	if err != nil {
		return 0, fmt.Errorf("--urgency: %w", err)
	}
	flags, err := flagsValue(o.flags)
	if err != nil {
		return 0, err
	}
	h, err := openHandle()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	ctx, cancel := cmdContext()
	defer cancel()
	var res submitResult
	err = submitJobs(ctx, h, []*jobspec.Jobspec{js}, urgency, flags, func(_ int, r submitResult) { res = r })
	if err == nil {
		err = res.err
	}
	return res.id, err
}

// newBatchExecCmd is the initial program of a batch job: it fetches the
// script from the enclosing instance and executes it with args.
func newBatchExecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:                "batch-exec [ARGS...]",
		Short:              "Run the batch script of the enclosing job (the initial program of flux batch)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := fetchBatchScript()
			if err != nil {
				return err
			}
			argv := append([]string{path}, args...)
			if err := syscall.Exec(path, argv, os.Environ()); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			return nil
		},
	}
	return cmd
}

// fetchBatchScript writes the script of the job this instance runs as to
// the broker's rundir and returns its path.
func fetchBatchScript() (string, error) {
	h, err := openHandle()
	if err != nil {
		return "", err
	}
	defer h.Close()
	ctx, cancel := cmdContext()
	defer cancel()
	attr := func(name string) (string, error) {
		v, err := h.Attr(ctx, name)
		if err != nil {
			return "", fmt.Errorf("attribute %s: %w (is this instance a batch job?)", name, err)
		}
		return v, nil
	}
	parent, err := attr("parent-uri")
	if err != nil {
		return "", err
	}
	idStr, err := attr("jobid")
	if err != nil {
		return "", err
	}
	rundir, err := attr("rundir")
	if err != nil {
		return "", err
	}
	id, err := jobid.Parse(idStr)
	if err != nil {
		return "", fmt.Errorf("attribute jobid=%q: %w", idStr, err)
	}
	ph, err := flux.Open(parent)
	if err != nil {
		return "", fmt.Errorf("enclosing instance: %w", err)
	}
	defer ph.Close()
	var resp struct {
		Jobspec string `json:"jobspec"`
	}
	if err := ph.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"jobspec"}, "flags": 0}, &resp); err != nil {
		return "", fmt.Errorf("jobspec of job %s: %w", id.String(), err)
	}
	js, err := jobspec.Parse([]byte(resp.Jobspec))
	if err != nil {
		return "", fmt.Errorf("jobspec of job %s: %w", id.String(), err)
	}
	v, _ := js.Attribute("system.files.script")
	entry, _ := v.(map[string]any)
	if entry == nil {
		return "", fmt.Errorf("job %s has no batch script (attributes.system.files.script)", id.String())
	}
	data, mode, err := jobspec.DecodeFileEntry(entry)
	if err != nil {
		return "", fmt.Errorf("job %s batch script: %w", id.String(), err)
	}
	path := filepath.Join(rundir, "script")
	if err := os.WriteFile(path, data, mode|0o500); err != nil {
		return "", err
	}
	return path, nil
}
