package cli

// The option set shared by the job submission commands (flux submit, run,
// and later bulksubmit, batch and alloc), and the code that turns those
// options and a command line into jobspecs. Option names, defaults and
// meanings follow flux-core's flux-submit(1) and flux-run(1).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/taskmap"
)

// submitOptions holds the parsed submission options. Numeric options stay
// text until buildJobspecs, because --cc/--bcc may substitute {cc} in them
// (flux submit --cc=1-4 -n {cc} ...).
type submitOptions struct {
	// Per-task resources (-n, -c, -g) and common ones (-N, -x).
	ntasks, nodes, coresPerTask, gpusPerTask string
	exclusive                                bool
	// Per-resource placement (--cores, --tasks-per-node, --tasks-per-core,
	// --gpus-per-node); not to be mixed with the per-task options.
	cores, tasksPerNode, tasksPerCore, gpusPerNode string

	timeLimit  string   // -t: minutes, or an FSD with units
	urgency    string   // --urgency: 0-31, hold, default, expedite
	jobName    string   // --job-name
	queue      string   // -q
	deps       []depArg // --dependency and --begin-time, in command line order
	requires   []string // --requires, RFC 35 queries joined by spaces
	setattr    []string // -S/--setattr KEY[=VAL]
	setopt     []string // -o/--setopt KEY[=VAL]
	taskmap    string   // --taskmap SCHEME[:VALUE]
	addFiles   []string // --add-file [NAME=]PATH|TEXT
	bank       string   // -B/--bank NAME
	project    string   // --project NAME
	mailType   string   // --mail-type begin,end,fail|all|none
	mailUser   string   // --mail-user ADDR
	signal     string   // --signal=SIG@TIME
	env        []string // --env, --env-remove (as -PATTERN), --env-file (as ^FILE), in order
	rlimit     []string // --rlimit rules
	cwd        string
	input      string // file name, or (flux run) an idset of task ranks
	output     string // file name template
	errorPath  string // file name template
	unbuffered bool
	labelIO    bool
	flags      []string // --flags: debug, waitable, novalidate

	// Replication and submission behaviour (flux submit).
	cc, bcc   string
	wait      bool
	waitEvent string
	watch     bool
	quiet     bool
	progress  bool
	jps       bool
	logFile   string
	logStderr string
	verbose   int
	dryRun    bool

	// cmdName is the command for messages ("submit", "run").
	cmdName string
	// proc is where the options read the process environment, working
	// directory, clock and resource limits (tests replace it).
	proc processEnv
}

// depArg is one --dependency URI or --begin-time value.
type depArg struct {
	uri       string
	beginTime string // set for --begin-time instead of uri
}

// processEnv is the part of the calling process the options read.
type processEnv struct {
	environ  func() []string
	getwd    func() (string, error)
	now      func() time.Time
	home     func() (string, error)
	readFile func(string) ([]byte, error)
	// rlimit returns the soft limit of the named resource (-1 for
	// unlimited), and false if the system does not have that limit.
	rlimit func(name string) (int64, bool)
}

func defaultProcessEnv() processEnv {
	return processEnv{
		environ:  os.Environ,
		getwd:    os.Getwd,
		now:      time.Now,
		home:     os.UserHomeDir,
		readFile: os.ReadFile,
		rlimit:   getRlimit,
	}
}

// submitFlagSets says which groups of options a command has.
type submitFlagSets struct {
	perTask bool // -n, -c, -g, -N, -x and the per-resource options
	bulk    bool // --cc, --bcc, --wait, --watch, --progress, --jps, --log, --quiet
	run     bool // flux run's --wait-event (passed to attach)
}

// addSubmitFlags registers the submission options on fs, storing into o.
func addSubmitFlags(fs *pflag.FlagSet, o *submitOptions, sets submitFlagSets) {
	fs.SortFlags = false
	fs.StringVarP(&o.queue, "queue", "q", "", "Submit a job to the queue named `NAME`")
	fs.StringVarP(&o.timeLimit, "time-limit", "t", "", "Time limit `MIN|FSD`: minutes when no units are given, otherwise a Flux standard duration, e.g. 30s, 2d, 1.5h")
	fs.StringVar(&o.urgency, "urgency", "16", "Set job urgency `N` (0-31), hold=0, default=16, expedite=31")
	fs.StringVar(&o.jobName, "job-name", "", "Set an optional `NAME` for the job")
	fs.StringVar(&o.signal, "signal", "", "Send signal `SIG@TIME` before the time limit (default SIGUSR1@60s)")
	fs.StringArrayVarP(&o.setopt, "setopt", "o", nil, "Set shell option `KEY[=VAL]` (VAL defaults to 1 and is parsed as JSON if it is JSON) (multiple use OK)")
	fs.StringArrayVar(&o.addFiles, "add-file", nil, "Add a file to the job, written into its FLUX_JOB_TMPDIR: `[NAME=]PATH`, or NAME=TEXT when the text holds a newline (multiple use OK)")
	fs.StringVar(&o.taskmap, "taskmap", "", "Map task IDs to nodes by `SCHEME[:VALUE]`: block, cyclic[:N] (N tasks at a time), manual:TASKMAP (RFC 34 JSON)")
	bankShort := "B"
	if !sets.perTask {
		bankShort = "" // flux batch and alloc: -B is --broker-opts
	}
	nameVarP(fs, &o.bank, "bank", bankShort, "Charge the job to bank `NAME` (attributes.system.bank)")
	nameVarP(fs, &o.project, "project", "", "Set the job's project `NAME` (attributes.system.project)")
	fs.StringVar(&o.mailType, "mail-type", "", "E-mail the submitter on job `EVENTS`: begin, end, fail (comma-separated), all or none (needs the instance's [mail] configuration)")
	fs.StringVar(&o.mailUser, "mail-user", "", "Send --mail-type messages to `ADDRESS` (default: the submitting user)")
	fs.StringArrayVarP(&o.setattr, "setattr", "S", nil, "Set job attribute `KEY[=VAL]` (system. is assumed without system., user. or .; VAL defaults to 1 and is parsed as JSON if it is JSON; ^KEY=FILE reads it from a JSON file) (multiple use OK)")
	fs.Var(&depFlag{o, false}, "dependency", "Set an RFC 26 dependency URI for this job (multiple use OK)")
	fs.StringArrayVar(&o.requires, "requires", nil, "Specify job constraints `CONSTRAINT` in RFC 35 syntax (multiple use OK)")
	fs.Var(&depFlag{o, true}, "begin-time", "Set the minimum start time: +FSD from now (+1h), or a date and/or time (2024-06-21 8am, tomorrow morning, 17:30, in 2 hours)")
	fs.Var(&envFlag{o, ""}, "env", "Control how environment variables are exported: -PATTERN removes, ^FILE reads rules from FILE, VAR=VAL sets, PATTERN copies from the current environment (multiple use OK)")
	fs.Var(&envFlag{o, "-"}, "env-remove", "Remove environment variables matching PATTERN (a glob, or a regex in /.../) (multiple use OK)")
	fs.Var(&envFlag{o, "^"}, "env-file", "Read a set of environment rules from FILE (multiple use OK)")
	fs.StringArrayVar(&o.rlimit, "rlimit", nil, "Control which soft resource limits propagate to the job by `RULE`: -NAME stops one (globs allowed), NAME propagates the current value, NAME=VAL sets one (multiple use OK)")
	fs.StringVar(&o.input, "input", "", "Redirect job stdin from `FILENAME`, bypassing KVS")
	fs.StringVar(&o.output, "output", "", "Redirect job stdout to `FILENAME`, bypassing KVS")
	fs.StringVar(&o.errorPath, "error", "", "Redirect job stderr to `FILENAME`, bypassing KVS")
	fs.BoolVarP(&o.unbuffered, "unbuffered", "u", false, "Disable buffering of input and output")
	fs.BoolVarP(&o.labelIO, "label-io", "l", false, "Add rank labels to stdout, stderr lines")
	fs.StringVar(&o.cwd, "cwd", "", "Set job working directory to `DIRECTORY`")
	fs.StringArrayVar(&o.flags, "flags", nil, "Set comma separated list of job submission `FLAGS`: debug, waitable, novalidate")
	fs.BoolVar(&o.dryRun, "dry-run", false, "Don't actually submit the job, just emit the jobspec")
	if sets.perTask {
		fs.StringVarP(&o.nodes, "nodes", "N", "", "Number of nodes `N` to allocate")
		fs.BoolVarP(&o.exclusive, "exclusive", "x", false, "With -N, --nodes, allocate nodes exclusively")
		fs.StringVarP(&o.ntasks, "ntasks", "n", "", "Number of tasks `N` to start")
		fs.StringVarP(&o.coresPerTask, "cores-per-task", "c", "", "Number of cores `N` to allocate per task")
		fs.StringVarP(&o.gpusPerTask, "gpus-per-task", "g", "", "Number of GPUs `N` to allocate per task")
		fs.StringVar(&o.cores, "cores", "", "Request a total number of cores `N`")
		fs.StringVar(&o.tasksPerNode, "tasks-per-node", "", "Force number of tasks `N` per node")
		fs.StringVar(&o.tasksPerCore, "tasks-per-core", "", "Force number of tasks `N` per core")
		fs.StringVar(&o.gpusPerNode, "gpus-per-node", "", "Request a number of GPUs `N` per node with --nodes")
		fs.CountVarP(&o.verbose, "verbose", "v", "Increase verbosity on stderr (multiple use OK)")
	}
	if sets.bulk {
		fs.BoolVar(&o.quiet, "quiet", false, "Do not print jobid to stdout on submission")
		fs.StringVar(&o.cc, "cc", "", "Replicate job for each ID in `IDSET` (FLUX_JOB_CC=ID will be set for each job submitted)")
		fs.StringVar(&o.bcc, "bcc", "", "Like --cc, but FLUX_JOB_CC is not set (`IDSET`)")
		fs.StringVar(&o.waitEvent, "wait-event", "", "Wait for event `NAME` for all jobs after submission")
		fs.BoolVar(&o.wait, "wait", false, "Wait for all jobs to complete after submission (same as --wait-event=clean)")
		fs.BoolVar(&o.watch, "watch", false, "Watch all job output (implies --wait)")
		fs.StringVar(&o.logFile, "log", "", "Print program log messages (e.g. submitted jobid) to `FILE` instead of terminal")
		fs.StringVar(&o.logStderr, "log-stderr", "", "Separate stderr messages into `FILE` instead of terminal or logfile destination")
		fs.BoolVar(&o.progress, "progress", false, "Show progress of job submission or completion (with --wait)")
		fs.BoolVar(&o.jps, "jps", false, "With --progress, show job throughput")
	}
	if sets.run {
		fs.StringVar(&o.waitEvent, "wait-event", "", "Pass --wait-event=`NAME` to flux-job attach")
	}
}

// envFlag appends --env, --env-remove and --env-file values to one list
// so that rules apply in command line order.
type envFlag struct {
	o      *submitOptions
	prefix string
}

func (f *envFlag) String() string { return "" }
func (f *envFlag) Type() string {
	switch f.prefix {
	case "-":
		return "PATTERN"
	case "^":
		return "FILE"
	}
	return "RULE"
}
func (f *envFlag) Set(v string) error {
	f.o.env = append(f.o.env, f.prefix+v)
	return nil
}

// depFlag appends --dependency and --begin-time values to one list.
type depFlag struct {
	o         *submitOptions
	beginTime bool
}

func (f *depFlag) String() string { return "" }
func (f *depFlag) Type() string {
	if f.beginTime {
		return "+FSD|TIME"
	}
	return "URI"
}
func (f *depFlag) Set(v string) error {
	if f.beginTime {
		f.o.deps = append(f.o.deps, depArg{beginTime: v})
	} else {
		f.o.deps = append(f.o.deps, depArg{uri: v})
	}
	return nil
}

// buildJobspecs builds the jobspecs the options and command line args
// describe: one, or one per id of --cc/--bcc, with {cc} in the command and
// the text options replaced by the id (and, for --cc, FLUX_JOB_CC set in
// the job environment). Each is a valid version 1 jobspec.
func buildJobspecs(o *submitOptions, args []string) ([]*jobspec.Jobspec, error) {
	if len(args) == 0 {
		return nil, errors.New("job command and arguments are missing")
	}
	ids, err := o.ccIDs()
	if err != nil {
		return nil, err
	}
	if ids == nil {
		js, err := o.buildOne(args)
		if err != nil {
			return nil, err
		}
		return []*jobspec.Jobspec{js}, nil
	}
	out := make([]*jobspec.Jobspec, 0, len(ids))
	for _, id := range ids {
		js, err := o.buildCC(args, id)
		if err != nil {
			return nil, err
		}
		out = append(out, js)
	}
	return out, nil
}

// buildCC builds the jobspec of --cc/--bcc ID id ({cc} substituted,
// FLUX_JOB_CC set for --cc).
func (o *submitOptions) buildCC(args []string, id int) (*jobspec.Jobspec, error) {
	x, cmd, err := o.substituteCC(args, id)
	if err != nil {
		return nil, err
	}
	js, err := x.buildOne(cmd)
	if err != nil {
		return nil, fmt.Errorf("cc=%d: %w", id, err)
	}
	if o.cc != "" {
		env := js.Attributes.System["environment"].(map[string]any)
		env["FLUX_JOB_CC"] = strconv.Itoa(id)
	}
	if err := js.CheckText(); err != nil {
		return nil, fmt.Errorf("cc=%d: %w", id, err)
	}
	return js, nil
}

// buildOne builds a single jobspec, in the order flux-core applies the
// options (later ones override earlier ones).
func (o *submitOptions) buildOne(cmd []string) (*jobspec.Jobspec, error) {
	js, err := o.resources(cmd)
	if err != nil {
		return nil, err
	}
	env, err := o.environment()
	if err != nil {
		return nil, err
	}
	js.SetEnvironment(env)
	cwd := o.cwd
	if cwd == "" {
		if cwd, err = o.proc.getwd(); err != nil {
			return nil, fmt.Errorf("cannot get the working directory: %w", err)
		}
	}
	js.SetCwd(cwd)
	rl, err := o.rlimits()
	if err != nil {
		return nil, err
	}
	if len(rl) > 0 {
		if err := js.SetShellOption("rlimit", rl); err != nil {
			return nil, err
		}
	}
	if err := o.dependencies(js); err != nil {
		return nil, err
	}
	if len(o.requires) > 0 {
		q := strings.Join(o.requires, " ")
		c, err := jobspec.ParseConstraintQuery(q)
		if err != nil {
			return nil, fmt.Errorf("--requires: %w", err)
		}
		js.SetConstraints(c)
	}
	if o.timeLimit != "" {
		sec, err := parseTimeLimit(o.timeLimit)
		if err != nil {
			return nil, err
		}
		if err := js.SetDuration(sec); err != nil {
			return nil, fmt.Errorf("--time-limit: %w", err)
		}
	}
	if o.jobName != "" {
		if err := js.SetJobName(o.jobName); err != nil {
			return nil, err
		}
	}
	if err := o.stdio(js); err != nil {
		return nil, err
	}
	if o.signal != "" {
		sig, left, err := parseSignalOption(o.signal)
		if err != nil {
			return nil, err
		}
		if err := js.SetShellOption("signal", map[string]any{"signum": sig, "timeleft": left}); err != nil {
			return nil, err
		}
	}
	for _, kv := range o.setopt {
		key, val, err := o.keyVal("--setopt", kv)
		if err != nil {
			return nil, err
		}
		if err := js.SetShellOption(key, val); err != nil {
			return nil, fmt.Errorf("--setopt=%s: %w", kv, err)
		}
	}
	for _, f := range o.addFiles {
		name, entry, err := o.addFile(f)
		if err != nil {
			return nil, fmt.Errorf("--add-file=%s: %w", f, err)
		}
		if err := js.AddFile(name, entry); err != nil {
			return nil, err
		}
	}
	if o.taskmap != "" {
		tm, err := taskmapOption(o.taskmap)
		if err != nil {
			return nil, err
		}
		if err := js.SetShellOption("taskmap", tm); err != nil {
			return nil, err
		}
	}
	if o.queue != "" {
		js.SetQueue(o.queue)
	}
	for _, a := range []struct{ key, val string }{{"system.bank", o.bank}, {"system.project", o.project}} {
		if a.val != "" {
			if err := js.SetAttribute(a.key, a.val); err != nil {
				return nil, err
			}
		}
	}
	if err := o.mail(js); err != nil {
		return nil, err
	}
	for _, kv := range o.setattr {
		key, val, err := o.keyVal("--setattr", kv)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(key, "."):
			key = key[1:]
		case strings.HasPrefix(key, "system."), strings.HasPrefix(key, "user."):
		default:
			key = "system." + key
		}
		if err := js.SetAttribute(key, val); err != nil {
			return nil, fmt.Errorf("--setattr=%s: %w", kv, err)
		}
	}
	if _, err := urgencyValue(o.urgency); err != nil {
		return nil, fmt.Errorf("--urgency: %w", err)
	}
	if _, err := flagsValue(o.flags); err != nil {
		return nil, err
	}
	if err := js.ValidateV1(); err != nil {
		return nil, err
	}
	if err := js.CheckText(); err != nil { // every command that builds a jobspec comes here
		return nil, err
	}
	return js, nil
}

// intOpt parses a numeric option; "" means unset (0).
func intOpt(name, val string) (int, error) {
	if val == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(val)
	if err != nil {
		return 0, fmt.Errorf("--%s: invalid int value %q", name, val)
	}
	return n, nil
}

// intErr reports whether err is positiveOpt's range error (the value
// was an integer).
func intErr(err error) bool { return !strings.Contains(err.Error(), "invalid int value") }

// positiveOpt parses a numeric option that must be >= 1 when given.
func positiveOpt(name, val string) (int, error) {
	n, err := intOpt(name, val)
	if err == nil && val != "" && n < 1 {
		err = fmt.Errorf("--%s: must be >= 1, not %d", name, n)
	}
	return n, err
}

// resources builds the resource and task sections from the per-task or
// per-resource options.
func (o *submitOptions) resources(cmd []string) (*jobspec.Jobspec, error) {
	var n [8]int
	var err error
	for i, opt := range []struct{ name, val string }{
		{"ntasks", o.ntasks}, {"nodes", o.nodes}, {"cores-per-task", o.coresPerTask},
		{"cores", o.cores}, {"tasks-per-node", o.tasksPerNode}, {"tasks-per-core", o.tasksPerCore},
	} {
		if n[i], err = positiveOpt(opt.name, opt.val); err != nil {
			// flux-core's words for the per-resource counts
			switch opt.name {
			case "tasks-per-node", "tasks-per-core":
				if n[i] < 1 && intErr(err) {
					err = fmt.Errorf("--%s must be >= 1", opt.name)
				}
			case "cores":
				if n[i] < 1 && intErr(err) {
					err = errors.New("ncores must be an integer >= 1")
				}
			}
			return nil, err
		}
	}
	ntasks, nodes, cpt, cores, tpn, tpc := n[0], n[1], n[2], n[3], n[4], n[5]
	gpt, err := intOpt("gpus-per-task", o.gpusPerTask)
	if err == nil && gpt < 0 {
		err = fmt.Errorf("--gpus-per-task: must be >= 0, not %d", gpt)
	}
	if err != nil {
		return nil, err
	}
	gpn, err := intOpt("gpus-per-node", o.gpusPerNode)
	if err == nil && gpn < 0 {
		err = errors.New("gpus_per_node must be an integer >= 0")
	}
	if err != nil {
		return nil, err
	}
	if tpn > 0 && tpc > 0 {
		return nil, errors.New("Do not specify both the number of tasks per node and per core")
	}
	if gpn > 0 && nodes == 0 {
		return nil, errors.New("--gpus-per-node requires --nodes")
	}
	if tpn > 0 || tpc > 0 || o.gpusPerNode != "" || o.cores != "" {
		if o.ntasks != "" || o.coresPerTask != "" || gpt > 0 {
			return nil, errors.New("Per-resource options (--cores, --tasks-per-node, --tasks-per-core, --gpus-per-node) can't be used with per-task options (-n, -c, -g)")
		}
		pr := jobspec.PerResourceOptions{NCores: cores, NNodes: nodes, GPUsPerNode: gpn, Exclusive: o.exclusive}
		if nodes > 0 && cores == 0 {
			pr.Exclusive = true
		}
		if tpn > 0 {
			pr.Type, pr.Count = "node", tpn
		} else if tpc > 0 {
			pr.Type, pr.Count = "core", tpc
		}
		return jobspec.FromPerResource(cmd, pr)
	}
	co := jobspec.CommandOptions{NTasks: ntasks, CoresPerTask: cpt, GPUsPerTask: gpt, NNodes: nodes, Exclusive: o.exclusive}
	if ntasks == 0 && nodes > 0 {
		// -N alone: one task per node, nodes allocated exclusively.
		co.NTasks, co.Exclusive = nodes, true
	}
	if co.Exclusive && nodes == 0 {
		return nil, errors.New("--exclusive can only be used with --nodes")
	}
	if nodes > 0 && co.NTasks > 0 && nodes > co.NTasks {
		return nil, fmt.Errorf("node count must not be greater than task count (--nodes=%d, --ntasks=%d)", nodes, co.NTasks)
	}
	return jobspec.FromCommand(cmd, co)
}

// parseTimeLimit reads -t: a bare number is minutes, otherwise an FSD.
func parseTimeLimit(s string) (float64, error) {
	if isPlainNumber(s) {
		m, err := strconv.ParseFloat(s, 64)
		if err == nil {
			if m < 0 {
				return 0, fmt.Errorf("--time-limit: %q: duration must not be negative", s)
			}
			return m * 60, nil
		}
	}
	sec, err := fsd.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("--time-limit: %w", err)
	}
	if sec > 1e300 { // infinity
		return 0, fmt.Errorf("--time-limit: %q: duration must be finite", s)
	}
	return sec, nil
}

// isPlainNumber reports whether s is a signed decimal number without
// units.
func isPlainNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	return s != "" && strings.Trim(s, "0123456789.eE+-") == "" && s[0] != 'e' && s[0] != 'E'
}

// addFile reads a --add-file value: NAME=TEXT when TEXT holds a newline,
// else [NAME=]PATH (NAME defaults to the file's base name, the mode is
// the file's).
func (o *submitOptions) addFile(v string) (string, map[string]any, error) {
	// a \n written on the command line is a newline (file text)
	v = strings.ReplaceAll(v, `\n`, "\n")
	name, arg, named := strings.Cut(v, "=")
	perm := os.FileMode(0)
	if !named {
		if strings.Contains(v, "\n") {
			return "", nil, fmt.Errorf("file name missing (NAME=TEXT for text)")
		}
		name, arg = filepath.Base(v), v
	} else if n, p, ok := strings.Cut(name, ":"); ok {
		// NAME:PERMS, octal; a colon before anything else is part of NAME
		if mode, err := strconv.ParseUint(p, 8, 32); err == nil && mode <= 0o7777 {
			name, perm = n, os.FileMode(mode)
		}
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return "", nil, fmt.Errorf("file name %q must be a plain name", name)
	}
	if strings.Contains(arg, "\n") {
		if perm == 0 {
			perm = 0o600
		}
		return name, jobspec.FileEntry([]byte(arg), perm), nil
	}
	data, err := o.proc.readFile(arg)
	if err != nil {
		return "", nil, err
	}
	if perm == 0 {
		perm = 0o600
		if fi, err := os.Stat(arg); err == nil {
			perm = fi.Mode().Perm()
		}
	}
	return name, jobspec.FileEntry(data, perm), nil
}

// taskmapOption checks a --taskmap SCHEME[:VALUE] and returns the
// taskmap shell option {scheme, value} it stands for.
func taskmapOption(s string) (map[string]any, error) {
	scheme, value, _ := strings.Cut(s, ":")
	switch scheme {
	case "block":
		if value != "" {
			return nil, fmt.Errorf("--taskmap=%s: block takes no value", s)
		}
	case "cyclic":
		if n, err := strconv.Atoi(value); value != "" && (err != nil || n < 1) {
			return nil, fmt.Errorf("--taskmap=%s: the cyclic stride must be a positive integer", s)
		}
	case "manual":
		if _, err := taskmap.Decode([]byte(value)); err != nil {
			return nil, fmt.Errorf("--taskmap=%s: %w", s, err)
		}
	default:
		return nil, fmt.Errorf("--taskmap=%s: unknown scheme %q (want block, cyclic[:N] or manual:TASKMAP)", s, scheme)
	}
	return map[string]any{"scheme": scheme, "value": value}, nil
}

// keyVal reads KEY[=VAL] for --setopt and --setattr: VAL is JSON if it
// parses as JSON and a string otherwise, 1 if absent; ^KEY=FILE reads the
// value from a JSON file.
func (o *submitOptions) keyVal(opt, kv string) (string, any, error) {
	key, val, hasVal := strings.Cut(kv, "=")
	if strings.HasPrefix(key, "^") {
		key = key[1:]
		if !hasVal {
			return "", nil, fmt.Errorf("%s=%s: a file name is required with ^KEY", opt, kv)
		}
		data, err := o.proc.readFile(val)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", opt, err)
		}
		v, err := jobspec.ParseValue(data)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %s: %w", opt, val, err)
		}
		return key, v, nil
	}
	if key == "" {
		return "", nil, fmt.Errorf("%s=%s: missing key", opt, kv)
	}
	if !hasVal {
		return key, int64(1), nil
	}
	if v, err := jobspec.ParseValue([]byte(val)); err == nil {
		return key, v, nil
	}
	return key, val, nil
}

// dependencies sets attributes.system.dependencies from --dependency and
// --begin-time.
func (o *submitOptions) dependencies(js *jobspec.Jobspec) error {
	if len(o.deps) == 0 {
		return nil
	}
	var deps []jobspec.Dependency
	for _, a := range o.deps {
		uri := a.uri
		if a.beginTime != "" {
			t, err := parseBeginTime(a.beginTime, o.proc.now())
			if err != nil {
				return err
			}
			uri = "begin-time:" + strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', -1, 64)
		}
		d, err := jobspec.ParseDependencyURI(uri)
		if err != nil {
			return fmt.Errorf("--dependency: %w", err)
		}
		deps = append(deps, d)
	}
	js.SetDependencies(deps)
	return nil
}

// stdio sets the shell options for --input, --output, --error,
// --label-io and --unbuffered.
func (o *submitOptions) stdio(js *jobspec.Jobspec) error {
	set := func(key string, val any) error { return js.SetShellOption(key, val) }
	var errs []error
	if o.input != "" {
		if _, err := parseIDs(o.input); err != nil {
			errs = append(errs, set("input.stdin.type", "file"), set("input.stdin.path", o.input))
		} else if o.cmdName != "run" {
			return fmt.Errorf("--input=%s: per-task input is supported only by flux run", o.input)
		}
	}
	if o.output != "" && o.output != "none" && o.output != "kvs" {
		errs = append(errs, set("output.stdout.type", "file"), set("output.stdout.path", o.output))
		if o.labelIO {
			errs = append(errs, set("output.stdout.label", true))
		}
	}
	if o.errorPath != "" {
		errs = append(errs, set("output.stderr.type", "file"), set("output.stderr.path", o.errorPath))
		if o.labelIO {
			errs = append(errs, set("output.stderr.label", true))
		}
	}
	if o.unbuffered {
		errs = append(errs, set("output.stdout.buffer.type", "none"),
			set("output.stderr.buffer.type", "none"), set("output.batch-timeout", 0.05))
	}
	return errors.Join(errs...)
}

// parseSignalOption reads --signal=SIG@TIME: SIG a name or number
// (default SIGUSR1), TIME an FSD before the time limit (default 60s).
func parseSignalOption(s string) (int, float64, error) {
	sigPart, timePart, _ := strings.Cut(s, "@")
	sig := int(syscall.SIGUSR1)
	if sigPart != "" {
		n, err := signalNumber(sigPart)
		if err != nil {
			return 0, 0, fmt.Errorf("--signal=%s: %w", s, err)
		}
		sig = n
	}
	left := 60.0
	if timePart != "" {
		d, err := fsd.Parse(timePart)
		if err != nil {
			return 0, 0, fmt.Errorf("--signal=%s: %w", s, err)
		}
		left = d
	}
	return sig, left, nil
}

// mail sets attributes.system.mail from --mail-type and --mail-user
// (Slurm's spellings: BEGIN, END, FAIL, ALL, NONE, any case).
func (o *submitOptions) mail(js *jobspec.Jobspec) error {
	if o.mailType == "" {
		if o.mailUser != "" {
			return fmt.Errorf("--mail-user=%s: give --mail-type to say which events to mail", o.mailUser)
		}
		return nil
	}
	var events []any
	seen := map[string]bool{}
	add := func(e string) {
		if !seen[e] {
			seen[e] = true
			events = append(events, e)
		}
	}
	for _, w := range strings.Split(strings.ToLower(o.mailType), ",") {
		switch strings.TrimSpace(w) {
		case "begin", "start":
			add("begin")
		case "end":
			add("end")
		case "fail":
			add("fail")
		case "all":
			add("begin")
			add("end")
			add("fail")
		case "none":
		default:
			return fmt.Errorf("--mail-type=%s: %q is not begin, end, fail, all or none", o.mailType, w)
		}
	}
	if len(events) == 0 {
		return nil
	}
	m := map[string]any{"events": events}
	if o.mailUser != "" {
		if strings.ContainsAny(o.mailUser, " \t\r\n") {
			return fmt.Errorf("--mail-user=%q: not an address", o.mailUser)
		}
		m["user"] = o.mailUser
	}
	return js.SetAttribute("system.mail", m)
}
