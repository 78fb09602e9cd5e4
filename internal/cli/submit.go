package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"
	"unicode/utf8"

	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"

	"github.com/spf13/cobra"
)

func newSubmitCmd() *cobra.Command {
	o := &submitOptions{cmdName: "submit", proc: defaultProcessEnv()}
	cmd := &cobra.Command{
		Use:   "submit [OPTIONS...] COMMAND [ARGS...]",
		Short: "Submit a job to a Flux instance",
		Long: `Submit a job to run COMMAND with ARGS and print its jobid.

Resources are requested per task (-n, -c, -g, with -N to spread the tasks
over nodes) or per resource (--cores, --tasks-per-node, --tasks-per-core,
--gpus-per-node). Options after COMMAND belong to COMMAND.

With --dry-run, print the jobspec (one line of JSON per job) instead of
submitting it.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(o, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().SetInterspersed(false)
	addSubmitFlags(cmd.Flags(), o, submitFlagSets{perTask: true, bulk: true})
	return cmd
}

func newRunCmd() *cobra.Command {
	o := &submitOptions{cmdName: "run", proc: defaultProcessEnv()}
	cmd := &cobra.Command{
		Use:   "run [OPTIONS...] COMMAND [ARGS...]",
		Short: "Run a job interactively",
		Long: `Submit a job to run COMMAND with ARGS, then follow it: copy its
standard input and output and exit with its exit status.

Takes the options of flux submit except those that submit copies or wait
for several jobs. With --dry-run, print the jobspec instead.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(o, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().SetInterspersed(false)
	addSubmitFlags(cmd.Flags(), o, submitFlagSets{perTask: true, run: true})
	return cmd
}

// noInstance is the error of a submission with nowhere to go: FLUX_URI
// unset (in the environment the job would take) and no system instance.
func noInstance(env []string) error {
	if _, ok := envMap(env)["FLUX_URI"]; ok {
		return nil
	}
	if _, err := enclosingURI(); err != nil {
		return fmt.Errorf("cannot submit: no Flux instance (FLUX_URI not set, and no system instance at %s)", systemSocket)
	}
	return nil
}

// runSubmit builds the jobspecs for args and, with --dry-run, prints them
// to out, one line of JSON each.
func runSubmit(o *submitOptions, args []string, out io.Writer) error {
	specs, err := buildJobspecs(o, args)
	if err != nil {
		return err
	}
	if o.dryRun {
		for _, js := range specs {
			b, err := js.MarshalJSON()
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
				return err
			}
		}
		return nil
	}
	if err := noInstance(o.proc.environ()); err != nil {
		return err
	}
	return submitSpecs(o, specs, o.cmdName == "submit", out, os.Stderr)
}

// submitSpecs submits specs with a progress bar when asked, printing
// each new job's ID to out when printIDs, then follows the jobs as the
// options say (flux run always does). A job refused is reported on errw
// and makes the exit code 1; the others are submitted all the same.
func submitSpecs(o *submitOptions, specs []*jobspec.Jobspec, printIDs bool, out, errw io.Writer) error {
	// --log FILE takes the program's messages (job IDs, errors),
	// --log-stderr FILE its error messages; the jobs' output (--watch)
	// stays on the terminal
	logOut, logErr := out, errw
	for _, l := range []struct {
		opt, path string
		w         *io.Writer
		also      bool // --log takes the error messages too, unless --log-stderr
	}{{"--log", o.logFile, &logOut, o.logStderr == ""}, {"--log-stderr", o.logStderr, &logErr, false}} {
		if l.path == "" {
			continue
		}
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("%s: %w", l.opt, err)
		}
		defer f.Close()
		*l.w = f
		if l.also {
			logErr = f
		}
	}
	urgency, err := urgencyValue(o.urgency)
	if err != nil {
		return fmt.Errorf("--urgency: %w", err)
	}
	flags, err := flagsValue(o.flags)
	if err != nil {
		return err
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		started := time.Now()
		var bar *progressBar
		if o.progress {
			bar = &progressBar{w: errw, total: len(specs), start: started}
		}
		failed := 0
		ids := make([]jobid.ID, 0, len(specs))
		err = submitJobs(ctx, h, specs, urgency, flags, func(i int, r submitResult) {
			if r.err != nil {
				failed++
				fmt.Fprintf(logErr, "flux-%s: %v\n", o.cmdName, r.err)
				return
			}
			ids = append(ids, r.id)
			if !o.quiet && printIDs {
				fmt.Fprintln(logOut, r.id.String())
			}
			if bar != nil {
				bar.update(len(ids), false)
			}
		})
		if bar != nil {
			bar.update(len(ids), true)
		}
		if o.jps {
			fmt.Fprintf(logErr, "%.1f jps\n", float64(len(ids))/time.Since(started).Seconds())
		}
		if err != nil {
			return err
		}
		if o.cmdName == "run" || o.wait || o.watch || o.waitEvent != "" {
			code, err := followJobs(ctx, h, o, ids, out)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
		}
		if failed > 0 {
			return exitCode(1)
		}
		return nil
	})
}

// The process-derived parts of a jobspec: the environment (--env rules),
// the resource limits (--rlimit) and the --cc/--bcc copies.

// environment applies the --env rules to the process environment.
func (o *submitOptions) environment() (map[string]string, error) {
	proc := envMap(o.proc.environ())
	env := make(map[string]string, len(proc))
	for k, v := range proc {
		env[k] = v
	}
	if err := o.applyEnvRules(env, proc, o.env, 0); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !utf8.ValidString(k) || !utf8.ValidString(env[k]) {
			return nil, fmt.Errorf("environment variable %q is not valid UTF-8 (value %q) and a jobspec holds text only: unset it or pass --env=-%s", k, env[k], k)
		}
	}
	return env, nil
}

func envMap(list []string) map[string]string {
	m := make(map[string]string, len(list))
	for _, kv := range list {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

func (o *submitOptions) applyEnvRules(env, proc map[string]string, rules []string, depth int) error {
	if depth > 10 {
		return errors.New("--env-file: files include each other too deeply")
	}
	for _, rule := range rules {
		switch {
		case strings.HasPrefix(rule, "-"):
			match, err := envPattern(rule[1:])
			if err != nil {
				return fmt.Errorf("--env=%s: %w", rule, err)
			}
			for k := range env {
				if match(k) {
					delete(env, k)
				}
			}
		case strings.HasPrefix(rule, "^"):
			name := rule[1:]
			if rest, ok := strings.CutPrefix(name, "~"); ok {
				home, err := o.proc.home()
				if err != nil {
					return fmt.Errorf("--env-file=%s: %w", name, err)
				}
				name = home + rest
			}
			data, err := o.proc.readFile(name)
			if err != nil {
				return fmt.Errorf("--env-file: %w", err)
			}
			var sub []string
			for _, line := range strings.Split(string(data), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					sub = append(sub, line)
				}
			}
			if err := o.applyEnvRules(env, proc, sub, depth+1); err != nil {
				return err
			}
		default:
			name, val, isSet := strings.Cut(rule, "=")
			if !isSet {
				match, err := envPattern(name)
				if err != nil {
					return fmt.Errorf("--env=%s: %w", rule, err)
				}
				for k, v := range proc {
					if _, ok := env[k]; !ok && match(k) {
						env[k] = v
					}
				}
				continue
			}
			v, err := expandEnvTemplate(val, env, proc)
			var nf envVarNotFound
			switch {
			case errors.As(err, &nf): // flux-core's words
				return fmt.Errorf("--env: Variable '%s' not found in %s", string(nf), rule)
			case err != nil:
				return fmt.Errorf("--env: Unable to substitute %s (%v)", rule, err)
			}
			env[name] = v
		}
	}
	return nil
}

// envPattern compiles an environment variable pattern: a regular
// expression between slashes (/RE/, the closing slash optional, matched
// at the start of the name) or a shell glob matched against the whole
// name.
func envPattern(pat string) (func(string) bool, error) {
	if re, ok := strings.CutPrefix(pat, "/"); ok {
		r, err := regexp.Compile("^(?:" + strings.TrimSuffix(re, "/") + ")")
		if err != nil {
			return nil, fmt.Errorf("invalid regex: %w", err)
		}
		return r.MatchString, nil
	}
	if _, err := filepath.Match(pat, ""); err != nil {
		return nil, fmt.Errorf("invalid pattern %q", pat)
	}
	return func(name string) bool {
		ok, _ := filepath.Match(pat, name)
		return ok
	}, nil
}

// envVarNotFound is expandEnvTemplate's error for a variable set nowhere.
type envVarNotFound string

func (e envVarNotFound) Error() string { return fmt.Sprintf("variable %q not found", string(e)) }

// expandEnvTemplate substitutes $VAR and ${VAR} in s from env, falling
// back to the process environment; $$ is a literal $.
func expandEnvTemplate(s string, env, proc map[string]string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		var name string
		if i+1 < len(s) && s[i+1] == '{' {
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("invalid placeholder at position %d", i)
			}
			name = s[i+2 : i+2+end]
			if !isIdentifier(name) {
				return "", fmt.Errorf("invalid placeholder ${%s}", name)
			}
			i += 2 + end
		} else {
			j := i + 1
			for j < len(s) && (s[j] == '_' || isAlnum(s[j], j > i+1)) {
				j++
			}
			name = s[i+1 : j]
			if name == "" {
				return "", fmt.Errorf("invalid placeholder at position %d", i)
			}
			i = j - 1
		}
		v, ok := env[name]
		if !ok {
			if v, ok = proc[name]; !ok {
				return "", envVarNotFound(name)
			}
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func isAlnum(c byte, digitOK bool) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (digitOK && c >= '0' && c <= '9')
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '_' && !isAlnum(s[i], i > 0) {
			return false
		}
	}
	return true
}

// rlimitNames are the resource limits flux submit knows, by the name the
// job shell's rlimit option uses, with their Linux resource numbers.
var rlimitNames = map[string]int{
	"cpu": 0, "fsize": 1, "data": 2, "stack": 3, "core": 4, "rss": 5, "nproc": 6,
	"nofile": 7, "memlock": 8, "as": 9, "locks": 10, "sigpending": 11,
	"msgqueue": 12, "nice": 13, "rtprio": 14, "rttime": 15,
}

// defaultRlimitRules are the limits flux submit does not propagate.
var defaultRlimitRules = []string{"-memlock", "-ofile", "-msgqueue", "-nice", "-rtprio", "-rttime", "-sigpending"}

// rlimits returns the resource limits to propagate: all of the current
// soft limits, less the defaults above, changed by the --rlimit rules.
func (o *submitOptions) rlimits() (map[string]any, error) {
	out := make(map[string]any)
	if o.proc.rlimit == nil {
		return out, nil
	}
	current := func(pattern string) (map[string]int64, error) {
		m := make(map[string]int64)
		for name := range rlimitNames {
			if ok, _ := filepath.Match(pattern, name); ok {
				if v, ok := o.proc.rlimit(name); ok {
					m[name] = v
				}
			}
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("--rlimit: no resource limit matches %q", pattern)
		}
		return m, nil
	}
	all, _ := current("*")
	for k, v := range all {
		out[k] = v
	}
	var rules []string
	for _, r := range o.rlimit {
		rules = append(rules, strings.Split(r, ",")...)
	}
	for _, rule := range append(append([]string(nil), defaultRlimitRules...), rules...) {
		rule = strings.ToLower(rule)
		if pat, ok := strings.CutPrefix(rule, "-"); ok {
			for k := range out {
				if m, _ := filepath.Match(pat, k); m {
					delete(out, k)
				}
			}
			continue
		}
		name, val, hasVal := strings.Cut(rule, "=")
		if !hasVal {
			m, err := current(name)
			if err != nil {
				return nil, err
			}
			for k, v := range m {
				out[k] = v
			}
			continue
		}
		if _, ok := rlimitNames[name]; !ok {
			return nil, fmt.Errorf("--rlimit: invalid resource limit %q", name)
		}
		switch val {
		case "unlimited", "infinity", "inf":
			out[name] = int64(-1)
		default:
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("--rlimit: invalid value in %s=%s", name, val)
			}
			out[name] = n
		}
	}
	return out, nil
}

// getRlimit reads a soft resource limit of this process (Linux numbering;
// elsewhere no limits are propagated).
func getRlimit(name string) (int64, bool) {
	res, ok := rlimitNames[name]
	if !ok || runtime.GOOS != "linux" {
		return 0, false
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(res, &rl); err != nil {
		return 0, false
	}
	if rl.Cur == ^uint64(0) || rl.Cur > 1<<62 {
		return -1, true
	}
	return int64(rl.Cur), true
}

// ccIDs returns the ids of --cc or --bcc, or nil if neither is given.
func (o *submitOptions) ccIDs() ([]int, error) {
	if o.cc != "" && o.bcc != "" {
		return nil, errors.New("specify only one of --cc or --bcc")
	}
	set, opt := o.cc, "--cc"
	if set == "" {
		set, opt = o.bcc, "--bcc"
	}
	if set == "" {
		return nil, nil
	}
	ids, err := parseIDs(set)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid idset %q: %w", opt, set, err)
	}
	return ids, nil
}

// maxCC bounds the number of copies --cc/--bcc may ask for.
const maxCC = 1 << 20

// parseIDs expands an RFC 22 idset ("0-3,7", "[1-2]") into its ids.
func parseIDs(s string) ([]int, error) {
	body := s
	if strings.HasPrefix(body, "[") && strings.HasSuffix(body, "]") {
		body = body[1 : len(body)-1]
	}
	if body == "" {
		return nil, errors.New("empty idset")
	}
	var ids []int
	for _, item := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := idNumber(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = idNumber(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %q is not ascending", item)
			}
		}
		if len(ids) > 0 && a <= ids[len(ids)-1] {
			return nil, errors.New("ids must be unique and in ascending order")
		}
		if len(ids)+(b-a+1) > maxCC {
			return nil, fmt.Errorf("too many ids (more than %d)", maxCC)
		}
		for i := a; i <= b; i++ {
			ids = append(ids, i)
		}
	}
	return ids, nil
}

func idNumber(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// substituteCC returns a copy of o and args with {cc} replaced by id in
// the command and in the text options, as flux submit --cc does. Mustache
// templates ({{id}}) are left alone; any other {field} is an error.
func (o *submitOptions) substituteCC(args []string, id int) (*submitOptions, []string, error) {
	x := *o
	var firstErr error
	sub := func(opt, s string) string {
		r, err := ccTemplate(s, id)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s%s: %w", opt, s, err)
		}
		return r
	}
	subList := func(opt string, l []string) []string {
		if l == nil {
			return nil
		}
		out := make([]string, len(l))
		for i, s := range l {
			out[i] = sub(opt, s)
		}
		return out
	}
	cmd := subList("", args)
	for _, f := range []struct {
		p   *string
		opt string
	}{
		{&x.queue, "--queue="}, {&x.ntasks, "--ntasks="}, {&x.nodes, "--nodes="},
		{&x.coresPerTask, "--cores-per-task="}, {&x.gpusPerTask, "--gpus-per-task="},
		{&x.cores, "--cores="}, {&x.tasksPerNode, "--tasks-per-node="},
		{&x.tasksPerCore, "--tasks-per-core="}, {&x.gpusPerNode, "--gpus-per-node="},
		{&x.timeLimit, "--time-limit="}, {&x.urgency, "--urgency="}, {&x.jobName, "--job-name="},
		{&x.input, "--input="}, {&x.output, "--output="}, {&x.errorPath, "--error="},
		{&x.logFile, "--log="}, {&x.logStderr, "--log-stderr="}, {&x.waitEvent, "--wait-event="},
	} {
		*f.p = sub(f.opt, *f.p)
	}
	x.env = subList("--env=", o.env)
	x.setopt = subList("--setopt=", o.setopt)
	x.setattr = subList("--setattr=", o.setattr)
	x.requires = subList("--requires=", o.requires)
	if o.deps != nil {
		x.deps = make([]depArg, len(o.deps))
		for i, d := range o.deps {
			x.deps[i] = depArg{uri: sub("--dependency=", d.uri), beginTime: sub("--begin-time=", d.beginTime)}
		}
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return &x, cmd, nil
}

// ccTemplate replaces {cc} in s by id. "{{" and "}}" pass through.
func ccTemplate(s string, id int) (string, error) {
	if !strings.ContainsAny(s, "{}") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case (c == '{' || c == '}') && i+1 < len(s) && s[i+1] == c:
			b.WriteString(s[i : i+2])
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", errors.New("single '{' in replacement string")
			}
			field := s[i+1 : i+end]
			if field != "cc" {
				return "", fmt.Errorf("replacement key {%s} not found (only {cc} is defined)", field)
			}
			b.WriteString(strconv.Itoa(id))
			i += end
		case c == '}':
			return "", errors.New("single '}' in replacement string")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
