package cli

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// fakeProc is a fixed process environment for building jobspecs.
func fakeProc() processEnv {
	files := map[string]string{
		"/home/u/envfile": "-*\nOMP*\nFOO=bar\nBAR=${FOO}/baz\n",
		"/tmp/attr.json":  `{"a": [1, 2.5]}`,
	}
	limits := map[string]int64{"cpu": -1, "core": 0, "stack": 8388608, "nofile": 1024, "memlock": 65536, "nice": 0}
	return processEnv{
		environ: func() []string {
			return []string{"HOME=/home/u", "PATH=/bin", "OMP_NUM_THREADS=4", "OMP_PLACES=cores", "FOO=orig"}
		},
		getwd: func() (string, error) { return "/work", nil },
		now:   func() time.Time { return time.Unix(1700000000, 0) },
		home:  func() (string, error) { return "/home/u", nil },
		readFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, errors.New("open " + name + ": no such file or directory")
		},
		rlimit: func(name string) (int64, bool) {
			v, ok := limits[name]
			return v, ok
		},
	}
}

// parseSubmit parses a flux submit (or run) command line into options
// and the job command.
func parseSubmit(t *testing.T, cmdName string, args ...string) (*submitOptions, []string) {
	t.Helper()
	o := &submitOptions{cmdName: cmdName, proc: fakeProc()}
	fs := pflag.NewFlagSet(cmdName, pflag.ContinueOnError)
	fs.SetInterspersed(false)
	sets := submitFlagSets{perTask: true, bulk: cmdName == "submit", run: cmdName == "run"}
	addSubmitFlags(fs, o, sets)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o, fs.Args()
}

func build(t *testing.T, args ...string) ([]*jobspec.Jobspec, error) {
	t.Helper()
	o, cmd := parseSubmit(t, "submit", args...)
	return buildJobspecs(o, cmd)
}

func buildOne(t *testing.T, args ...string) *jobspec.Jobspec {
	t.Helper()
	specs, err := build(t, args...)
	if err != nil {
		t.Fatalf("buildJobspecs(%q): %v", args, err)
	}
	if len(specs) != 1 {
		t.Fatalf("got %d jobspecs", len(specs))
	}
	return specs[0]
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuildJobspecDefault(t *testing.T) {
	js := buildOne(t, "hostname")
	b, err := js.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1}],"label":"task"}],` +
		`"tasks":[{"command":["hostname"],"slot":"task","count":{"per_slot":1}}],` +
		`"attributes":{"system":{"cwd":"/work","duration":0,"environment":{"FOO":"orig","HOME":"/home/u",` +
		`"OMP_NUM_THREADS":"4","OMP_PLACES":"cores","PATH":"/bin"},` +
		`"shell":{"options":{"rlimit":{"core":0,"cpu":-1,"nofile":1024,"stack":8388608}}}}},"version":1}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

func TestBuildJobspecResources(t *testing.T) {
	tests := []struct {
		args                              []string
		nodes, slots, cores, gpus, ntasks int
		exclusive                         bool
		perResource                       string
	}{
		{[]string{"app"}, 0, 1, 1, 0, 1, false, ""},
		{[]string{"-n4", "-c2", "-g1", "app"}, 0, 4, 2, 1, 4, false, ""},
		{[]string{"-N2", "app"}, 2, 2, 1, 0, 2, true, ""},
		{[]string{"-N2", "-n4", "app"}, 2, 4, 1, 0, 4, false, ""},
		{[]string{"-N2", "-n5", "app"}, 2, 6, 1, 0, 5, false, ""},
		{[]string{"-N2", "-n4", "-x", "app"}, 2, 4, 1, 0, 4, true, ""},
		{[]string{"--nodes=2", "--ntasks=2", "--cores-per-task=3", "--gpus-per-task=0", "app"}, 2, 2, 3, 0, 2, false, ""},
		{[]string{"--cores=8", "--tasks-per-core=2", "app"}, 0, 8, 1, 0, 8, false, `{"count":2,"type":"core"}`},
		{[]string{"-N2", "--tasks-per-node=3", "app"}, 2, 2, 1, 0, 2, true, `{"count":3,"type":"node"}`},
		{[]string{"-N2", "--cores=8", "--gpus-per-node=1", "app"}, 2, 2, 4, 1, 2, false, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			js := buildOne(t, tt.args...)
			got := []int{js.NNodes(), js.NSlots(), js.CoresPerSlot(), js.GPUsPerSlot(), js.NTasks()}
			want := []int{tt.nodes, tt.slots, tt.cores, tt.gpus, tt.ntasks}
			if !reflect.DeepEqual(got, want) || js.NodeExclusive() != tt.exclusive {
				t.Errorf("nodes,slots,cores/slot,gpus/slot,ntasks = %v exclusive %v, want %v %v",
					got, js.NodeExclusive(), want, tt.exclusive)
			}
			pr, _ := js.ShellOptions()["per-resource"]
			if tt.perResource == "" && pr != nil || tt.perResource != "" && jsonOf(t, pr) != tt.perResource {
				t.Errorf("per-resource = %v, want %s", pr, tt.perResource)
			}
		})
	}
}

func TestBuildJobspecAttributes(t *testing.T) {
	js := buildOne(t, "-t", "30", "--job-name=sim", "-q", "batch", "--cwd=/scratch",
		"--urgency=hold", "--setattr=foo=1", "-S", "user.tag=abc", "--setattr", ".system.x={\"y\":true}",
		"--setattr=^bar=/tmp/attr.json", "--setattr=flag", "-o", "cpu-affinity=off", "--setopt=verbose",
		"--setopt=gpu-affinity=\"per-task\"", "--requires=a b", "--requires=host:n[1-2]",
		"--dependency=afterok:123", "--begin-time=+1h", "--dependency=string:foo?type=out",
		"--output=out.{{id}}", "--error=err.txt", "--input=in.txt", "-l", "-u", "app", "--arg")
	if d, _ := js.Duration(); d != 1800 {
		t.Errorf("duration = %v, want 1800 (30 minutes)", d)
	}
	if js.JobName() != "sim" || js.Queue() != "batch" || js.Cwd() != "/scratch" {
		t.Errorf("name %q queue %q cwd %q", js.JobName(), js.Queue(), js.Cwd())
	}
	if !reflect.DeepEqual(js.Tasks[0].Command, []string{"app", "--arg"}) {
		t.Errorf("command = %q", js.Tasks[0].Command)
	}
	sys := js.Attributes.System
	checks := map[string]string{
		"foo":         `1`,
		"x":           `{"y":true}`,
		"bar":         `{"a":[1,2.5]}`,
		"flag":        `1`,
		"constraints": `{"and":[{"properties":["a","b"]},{"hostlist":["n[1-2]"]}]}`,
		"dependencies": `[{"scheme":"afterok","value":"123"},{"scheme":"begin-time","value":"1700003600"},` +
			`{"scheme":"string","type":"out","value":"foo"}]`,
	}
	for k, want := range checks {
		if got := jsonOf(t, sys[k]); got != want {
			t.Errorf("system.%s = %s, want %s", k, got, want)
		}
	}
	if got := jsonOf(t, js.Attributes.User); got != `{"tag":"abc"}` {
		t.Errorf("user = %s", got)
	}
	opts := js.ShellOptions()
	delete(opts, "rlimit")
	want := `{"cpu-affinity":"off","gpu-affinity":"per-task",` +
		`"input":{"stdin":{"path":"in.txt","type":"file"}},` +
		`"output":{"batch-timeout":0.05,"stderr":{"buffer":{"type":"none"},"label":true,"path":"err.txt","type":"file"},` +
		`"stdout":{"buffer":{"type":"none"},"label":true,"path":"out.{{id}}","type":"file"}},"verbose":1}`
	if got := jsonOf(t, opts); got != want {
		t.Errorf("shell options\n%s\nwant\n%s", got, want)
	}
}

func TestBuildJobspecEnvironment(t *testing.T) {
	tests := []struct {
		args []string
		want map[string]string
	}{
		{[]string{"--env-remove=*", "--env=PATH"}, map[string]string{"PATH": "/bin"}},
		{[]string{"--env=-*", "--env=PATH=/usr/bin", "--env=PATH=$PATH:/bin"}, map[string]string{"PATH": "/usr/bin:/bin"}},
		{[]string{"--env=-/^OMP/", "--env=X=$$HOME-${HOME}"},
			map[string]string{"HOME": "/home/u", "PATH": "/bin", "FOO": "orig", "X": "$HOME-/home/u"}},
		{[]string{"--env-remove=*", "--env=OMP*"}, map[string]string{"OMP_NUM_THREADS": "4", "OMP_PLACES": "cores"}},
		{[]string{"--env-file=~/envfile"},
			map[string]string{"OMP_NUM_THREADS": "4", "OMP_PLACES": "cores", "FOO": "bar", "BAR": "bar/baz"}},
		{[]string{"--env=-*", "--env=^/home/u/envfile", "--env=-OMP_P*"},
			map[string]string{"OMP_NUM_THREADS": "4", "FOO": "bar", "BAR": "bar/baz"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			js := buildOne(t, append(tt.args, "app")...)
			if got := js.Environment(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("environment = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuildJobspecRlimit(t *testing.T) {
	tests := []struct {
		rules []string
		want  string
	}{
		{nil, `{"core":0,"cpu":-1,"nofile":1024,"stack":8388608}`},
		{[]string{"-*"}, ``},
		{[]string{"-*,core"}, `{"core":0}`},
		{[]string{"-*", "nofile=4096", "core=unlimited"}, `{"core":-1,"nofile":4096}`},
		{[]string{"memlock"}, `{"core":0,"cpu":-1,"memlock":65536,"nofile":1024,"stack":8388608}`},
	}
	for _, tt := range tests {
		var args []string
		for _, r := range tt.rules {
			args = append(args, "--rlimit="+r)
		}
		js := buildOne(t, append(args, "app")...)
		got := ""
		if v, ok := js.ShellOptions()["rlimit"]; ok {
			got = jsonOf(t, v)
		}
		if got != tt.want {
			t.Errorf("--rlimit %v: rlimit = %s, want %s", tt.rules, got, tt.want)
		}
	}
}

func TestBuildJobspecsCC(t *testing.T) {
	specs, err := build(t, "--cc=1-3", "-n", "{cc}", "--output=log.{cc}.{{id}}", "--job-name=j{cc}", "app", "{cc}")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 {
		t.Fatalf("got %d jobspecs, want 3", len(specs))
	}
	for i, js := range specs {
		id := i + 1
		idStr := string(rune('0' + id))
		if js.NTasks() != id || js.JobName() != "j"+idStr || js.Tasks[0].Command[1] != idStr ||
			js.Environment()["FLUX_JOB_CC"] != idStr {
			t.Errorf("copy %d: ntasks %d name %q command %q FLUX_JOB_CC %q", id, js.NTasks(), js.JobName(),
				js.Tasks[0].Command, js.Environment()["FLUX_JOB_CC"])
		}
		out, _ := js.Attribute("system.shell.options.output.stdout.path")
		if out != "log."+idStr+".{{id}}" {
			t.Errorf("copy %d: output %v", id, out)
		}
	}
	specs, err = build(t, "--bcc=0,5", "app")
	if err != nil || len(specs) != 2 {
		t.Fatalf("--bcc: %d jobspecs, %v", len(specs), err)
	}
	if _, ok := specs[0].Environment()["FLUX_JOB_CC"]; ok {
		t.Error("--bcc set FLUX_JOB_CC")
	}
}

func TestBuildJobspecsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "job command and arguments are missing"},
		{[]string{"-t", "3x", "app"}, `--time-limit: invalid Flux standard duration "3x"`},
		{[]string{"-t", "-5", "app"}, `--time-limit: "-5": duration must not be negative`},
		{[]string{"-t", "inf", "app"}, `--time-limit: "inf": duration must be finite`},
		{[]string{"-n", "x", "app"}, `--ntasks: invalid int value "x"`},
		{[]string{"-n", "0", "app"}, `--ntasks: must be >= 1`},
		{[]string{"-g", "-1", "app"}, `--gpus-per-task: must be >= 0`},
		{[]string{"-N", "3", "-n", "2", "app"}, `node count must not be greater than task count (--nodes=3, --ntasks=2)`},
		{[]string{"-x", "app"}, `--exclusive can only be used with --nodes`},
		{[]string{"--cores=2", "-n2", "app"}, `Per-resource options`},
		{[]string{"--tasks-per-node=1", "--tasks-per-core=1", "--cores=1", "app"}, `per node and per core`},
		{[]string{"--gpus-per-node=1", "app"}, `--gpus-per-node requires --nodes`},
		{[]string{"--urgency=32", "app"}, `--urgency: invalid urgency "32"`},
		{[]string{"--flags=fast", "app"}, `--flags: unknown flag "fast"`},
		{[]string{"--dependency=:x", "app"}, `--dependency: invalid dependency URI ":x"`},
		{[]string{"--begin-time=someday soon", "app"}, `--begin-time: cannot parse "someday soon"`},
		{[]string{"--begin-time=+x", "app"}, `--begin-time: invalid Flux standard duration "x"`},
		{[]string{"--requires=(a", "app"}, `--requires: constraint "(a": unclosed '('`},
		{[]string{"--requires=color:red", "app"}, `attributes.system.constraints.color: unknown constraint operator "color"`},
		{[]string{"--setattr=duration=x", "app"}, `attributes.system.duration: must be a number of seconds, not a string`},
		{[]string{"--setattr=cwd.x=1", "--cwd=/a", "app"}, `--setattr=cwd.x=1: attributes.system.cwd.x: cannot set`},
		{[]string{"--setattr==1", "app"}, `--setattr==1: missing key`},
		{[]string{"--setattr=^x=/nope", "app"}, `--setattr: open /nope`},
		{[]string{"--setopt=^x", "app"}, `a file name is required`},
		{[]string{"--env=X=$NOPE", "app"}, `--env: Variable 'NOPE' not found in X=$NOPE`},
		{[]string{"--env=X=${A:-b}", "app"}, `invalid placeholder`},
		{[]string{"--env=X=$", "app"}, `invalid placeholder`},
		{[]string{"--env=-/(/", "app"}, `invalid regex`},
		{[]string{"--env-file=/nope", "app"}, `--env-file: open /nope`},
		{[]string{"--rlimit=bogus=1", "app"}, `--rlimit: invalid resource limit "bogus"`},
		{[]string{"--rlimit=core=x", "app"}, `--rlimit: invalid value in core=x`},
		{[]string{"--rlimit=bog*", "app"}, `--rlimit: no resource limit matches "bog*"`},
		{[]string{"--cc=1", "--bcc=2", "app"}, `specify only one of --cc or --bcc`},
		{[]string{"--cc=3-1", "app"}, `--cc: invalid idset "3-1"`},
		{[]string{"--cc=1-2", "--output={id}", "app"}, `--output={id}: replacement key {id} not found`},
		{[]string{"--cc=1-2", "app", "{"}, `single '{'`},
		{[]string{"--cc=1-2", "app", "}"}, `single '}'`},
		{[]string{"--input=0-3", "app"}, `per-task input is supported only by flux run`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := build(t, tt.args...)
			if err == nil {
				t.Fatal("buildJobspecs succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestRunAcceptsInputRanks(t *testing.T) {
	o, cmd := parseSubmit(t, "run", "--input=0", "app")
	specs, err := buildJobspecs(o, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := specs[0].ShellOptions()["input"]; ok {
		t.Error("--input=0 (ranks) set a shell input option")
	}
}

func TestCCTemplate(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"{cc}", "7"},
		{"a{cc}b{cc}", "a7b7"},
		{"{{id}}.{cc}", "{{id}}.7"},
		{"{{cc}}", "{{cc}}"},
	}
	for _, tt := range tests {
		if got, err := ccTemplate(tt.in, 7); err != nil || got != tt.want {
			t.Errorf("ccTemplate(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseIDs(t *testing.T) {
	ids, err := parseIDs("[0-2,5,7-8]")
	if err != nil || !reflect.DeepEqual(ids, []int{0, 1, 2, 5, 7, 8}) {
		t.Errorf("parseIDs = %v, %v", ids, err)
	}
	for _, s := range []string{"", "a", "1,1", "2,1", "01", "-1", "1-", "0-2000000"} {
		if _, err := parseIDs(s); err == nil {
			t.Errorf("parseIDs(%q) succeeded", s)
		}
	}
}

func TestParseBeginTime(t *testing.T) {
	now := time.Date(2024, 6, 20, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"+1h", now.Add(time.Hour)},
		{"+30", now.Add(30 * time.Second)},
		{"2024-06-21 08:00", time.Date(2024, 6, 21, 8, 0, 0, 0, time.UTC)},
		{"2024-06-21T08:00:30", time.Date(2024, 6, 21, 8, 0, 30, 0, time.UTC)},
		{"2024-06-21", time.Date(2024, 6, 21, 0, 0, 0, 0, time.UTC)},
		{"15:30", time.Date(2024, 6, 20, 15, 30, 0, 0, time.UTC)},
		// the forms flux-core reads with parsedatetime
		{"now", now},
		{"-90s", now.Add(-90 * time.Second)},
		{"2024-06-21 8am", time.Date(2024, 6, 21, 8, 0, 0, 0, time.UTC)},
		{"tomorrow", time.Date(2024, 6, 21, 0, 0, 0, 0, time.UTC)},
		{"Tomorrow Morning", time.Date(2024, 6, 21, 6, 0, 0, 0, time.UTC)},
		{"tomorrow at 5:30pm", time.Date(2024, 6, 21, 17, 30, 0, 0, time.UTC)},
		{"5 pm today", time.Date(2024, 6, 20, 17, 0, 0, 0, time.UTC)},
		{"12am", time.Date(2024, 6, 20, 0, 0, 0, 0, time.UTC)},
		{"12:15pm", time.Date(2024, 6, 20, 12, 15, 0, 0, time.UTC)},
		{"noon", time.Date(2024, 6, 20, 12, 0, 0, 0, time.UTC)},
		{"in an hour", now.Add(time.Hour)},
		{"in 90 minutes", now.Add(90 * time.Minute)},
		{"2 days from now", now.Add(48 * time.Hour)},
	}
	for _, tt := range tests {
		got, err := parseBeginTime(tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseBeginTime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "garbage", "13pm", "0am", "25:00", "8:5", "in", "in 3 fortnights",
		"tomorrow tomorrow", "8am 9am", "+", "-x", "+inf", "in -1 hours", "2024-13-01"} {
		if got, err := parseBeginTime(bad, now); err == nil {
			t.Errorf("parseBeginTime(%q) = %v, want an error", bad, got)
		}
	}
}

func FuzzParseBeginTime(f *testing.F) {
	for _, s := range []string{"+1h", "now", "tomorrow 8am", "in 2 hours", "2024-06-21 08:00", "12:15pm"} {
		f.Add(s)
	}
	now := time.Date(2024, 6, 20, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseBeginTime(s, now)
		if err == nil && got.IsZero() {
			t.Fatalf("parseBeginTime(%q) accepted with a zero time", s)
		}
	})
}

// TestSubmitRefusesInvalidUTF8: text that JSON cannot carry is refused,
// naming where it is, instead of being replaced with U+FFFD.
func TestSubmitRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--job-name", "a\xffb", "true"}, `attributes.system.job.name is not valid UTF-8 ("a\xffb")`},
		{[]string{"echo", "\xc3("}, `tasks[0].command[1] is not valid UTF-8`},
		{[]string{"--env=X=\xfe", "true"}, `environment variable "X" is not valid UTF-8`},
		{[]string{"--cc=1-2", "echo", "\xff"}, `cc=1: tasks[0].command[1] is not valid UTF-8`},
	} {
		_, err := build(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestBulksubmitRefusesInvalidUTF8: bulksubmit's inputs are checked as
// flux submit's arguments are.
func TestBulksubmitRefusesInvalidUTF8(t *testing.T) {
	o, cmd := parseSubmit(t, "submit", "echo", "{}")
	js, err := o.buildOne(append(cmd[:1:1], "\xff\xfe"))
	if err == nil || !strings.Contains(err.Error(), "tasks[0].command[1] is not valid UTF-8") {
		t.Fatalf("buildOne: %v, %v", js, err)
	}
}
