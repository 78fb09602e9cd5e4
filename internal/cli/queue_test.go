package cli

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
)

// queueTestPolicy: two queues over schedStatus4's nodes, gpu requiring
// the gpu property (nodes 2-3), batch any node; instance limits with a
// queue override.
const queueTestPolicy = `{
 "policy": {
  "limits": {"duration": "4h", "job-size": {"min": {"nnodes": 1}, "max": {"nnodes": 3, "ngpus": 8}}},
  "jobspec": {"defaults": {"system": {"queue": "batch", "duration": "1h"}}}
 },
 "queues": {
  "batch": {},
  "gpu": {"requires": ["gpu"], "policy": {"limits": {"duration": "30m", "job-size": {"max": {"ncores": 6}}}}}
 }
}`

func queueTestLines(t *testing.T) []queueLine {
	t.Helper()
	pol, err := policy.Parse([]byte(queueTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := resource.ParseSchedStatus([]byte(schedStatus4))
	if err != nil {
		t.Fatal(err)
	}
	var lines []queueLine
	for _, n := range pol.Names() {
		res, err := queueResources(ss, pol, n)
		if err != nil {
			t.Fatal(err)
		}
		st := queueStatus{Enable: true, Start: n == "batch"}
		lines = append(lines, queueLine{name: n, deflt: n == pol.DefaultQueue, status: st, limits: limitsOf(pol, n), res: res})
	}
	return lines
}

func renderQueueList(t *testing.T, lines []queueLine, format string, noHeader bool) string {
	t.Helper()
	f, err := queueListFormats.resolve(format)
	if err != nil {
		t.Fatal(err)
	}
	of, err := compileFormat(f, queueListFields)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printQueueList(of, lines, noHeader, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestQueueListFormats: flux-core's named formats, with the effective
// ranges clipped to each queue's resources, and its headings.
func TestQueueListFormats(t *testing.T) {
	t.Setenv("FLUX_QUEUE_LIST_FORMAT_DEFAULT", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_DIRS", t.TempDir())
	lines := queueTestLines(t)
	for _, tt := range []struct{ format, want string }{
		{"default", `QUEUE    EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS
batch*    ✔  ✔       1h       4h        1-3       0-16        0-4
gpu       ✔  ✗       1h      30m        1-2        0-6        0-4
`},
		{"policy", `QUEUE    EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS
batch*    ✔  ✔       1h       4h        1-3      0-inf        0-8
gpu       ✔  ✗       1h      30m        1-3        0-6        0-8
`},
		{"nodes", `QUEUE    EN ST  NODES   NODES:UP NODES:DOWN NODES:ALLOC NODES:FREE
batch*    ✔  ✔      4          3          1           2          3
gpu       ✔  ✗      2          1          1           1          1
`},
		{"{queue},{resources.all.ncores},{resources.free.ncores},{resources.allocated.ncores},{resources.up.ngpus},{resources.down.ngpus}",
			"QUEUE,CORES,CORES:FREE,CORES:ALLOC,GPUS:UP,GPUS:DOWN\nbatch,16,9,3,2,2\ngpu,8,3,1,2,2\n"},
		{"{queue},{defaults.timelimit},{limits.timelimit},{limits.min.nnodes},{limits.max.nnodes},{limits.max.ncores},{submission},{scheduling}",
			"QUEUE,TDEFAULT,TLIMIT,MINNODES,MAXNODES,MAXCORES,SUBMIT,SCHED\nbatch,3600.0,14400.0,1,3,inf,enabled,started\ngpu,3600.0,1800.0,1,3,6,enabled,stopped\n"},
	} {
		if got := renderQueueList(t, lines, tt.format, false); got != tt.want {
			t.Errorf("format %s:\ngot:\n%s\nwant:\n%s", tt.format, got, tt.want)
		}
	}
}

// TestQueueListHeadings: every field has flux-core's heading.
func TestQueueListHeadings(t *testing.T) {
	want := map[string]string{
		"queue":                         "QUEUE",
		"queuem":                        "QUEUE",
		"parent":                        "PARENT",
		"submission":                    "SUBMIT",
		"scheduling":                    "SCHED",
		"enabled":                       "EN",
		"started":                       "ST",
		"enabled.ascii":                 "EN",
		"started.ascii":                 "ST",
		"color_enabled":                 "",
		"color_started":                 "",
		"color_off":                     "",
		"defaults.timelimit":            "TDEFAULT",
		"limits.timelimit":              "TLIMIT",
		"limits.range.nnodes":           "NNODES",
		"limits.range.ncores":           "NCORES",
		"limits.range.ngpus":            "NGPUS",
		"limits.range.effective.nnodes": "NNODES",
		"limits.range.effective.ncores": "NCORES",
		"limits.range.effective.ngpus":  "NGPUS",
		"limits.min.nnodes":             "MINNODES",
		"limits.max.nnodes":             "MAXNODES",
		"limits.min.ncores":             "MINCORES",
		"limits.max.ncores":             "MAXCORES",
		"limits.min.ngpus":              "MINGPUS",
		"limits.max.ngpus":              "MAXGPUS",
		"resources.all.nnodes":          "NODES",
		"resources.free.ncores":         "CORES:FREE",
		"resources.allocated.ngpus":     "GPUS:ALLOC",
		"resources.up.nnodes":           "NODES:UP",
		"resources.down.ncores":         "CORES:DOWN",
	}
	for field, h := range want {
		if _, err := queueListFields.get(field); err != nil {
			t.Errorf("field %s: %v", field, err)
		}
		if got := queueListFields.heading(field); got != h {
			t.Errorf("heading of %s: %q, want %q", field, got, h)
		}
	}
	for _, bad := range []string{"foobar", "defaults.foobar", "limits.foobar", "limits.range.foobar",
		"limits.range.effective.foo", "limits.min.foobar", "limits.max.foobar",
		"resources.all", "resources.busy.nnodes", "resources.all.nfoo"} {
		_, err := queueListFields.get(bad)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("field %s: %v, want an error naming it", bad, err)
		}
	}
}

// TestQueueListAnonymous: no limits configured: infinite time limits,
// ranges up to inf (policy) or to the instance's resources (effective).
func TestQueueListAnonymous(t *testing.T) {
	pol, _ := policy.Parse(nil)
	ss, _ := resource.ParseSchedStatus([]byte(schedStatus4))
	res, err := queueResources(ss, pol, "")
	if err != nil {
		t.Fatal(err)
	}
	l := queueLine{status: queueStatus{Enable: true, Start: true}, limits: limitsOf(pol, ""), res: res}
	if !math.IsInf(l.limits.duration, 1) || !math.IsInf(l.limits.defaultDuration, 1) {
		t.Errorf("limits: %+v", l.limits)
	}
	got := renderQueueList(t, []queueLine{l}, "{defaults.timelimit},{limits.timelimit},{defaults.timelimit!F},"+
		"{limits.range.nnodes},{limits.range.effective.nnodes},{limits.range.effective.ngpus},{limits.max.ngpus},{queuem}", true)
	if got != "inf,inf,inf,0-inf,0-4,0-4,inf,\n" {
		t.Errorf("got %q", got)
	}
	// the empty queue column goes, as flux-core's ?: does
	if got := renderQueueList(t, []queueLine{l}, "default", false); !strings.HasPrefix(got, " EN ST TDEFAULT") {
		t.Errorf("default: %q", got)
	}
}

// TestQueueColor: color_* fields give flux-core's escapes only when
// asked (a terminal), nothing otherwise.
func TestQueueColor(t *testing.T) {
	l := queueLine{status: queueStatus{Enable: true}, color: true}
	format := "{color_enabled}{enabled}{color_off}|{color_started}{started}{color_off}"
	if got := renderQueueList(t, []queueLine{l}, format, true); got != "\033[01;32m✔\033[0;0m|\033[01;31m✗\033[0;0m\n" {
		t.Errorf("color: %q", got)
	}
	l.color = false
	if got := renderQueueList(t, []queueLine{l}, format, true); got != "✔|✗\n" {
		t.Errorf("no color: %q", got)
	}
}

// TestQueueArg: -q NAME is the QUEUE argument's other spelling; both at
// once is an error naming them.
func TestQueueArg(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		err  string
	}{
		{nil, "", ""},
		{[]string{"debug"}, "debug", ""},
		{[]string{"-q", "debug"}, "debug", ""},
		{[]string{"--queue=batch"}, "batch", ""},
		{[]string{"-q", "debug", "batch"}, "", "Conflicting queues specified as --queue=debug and batch"},
	} {
		cmd := newQueueStatusCmd()
		if err := cmd.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		opt, _ := cmd.Flags().GetString("queue")
		got, err := queueArg(cmd, cmd.Flags().Args(), opt)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%v: %v, want %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: %q %v, want %q", tt.args, got, err, tt.want)
		}
	}
}

// TestQueueCommandFlags: the options flux-core's flux queue subcommands
// take.
func TestQueueCommandFlags(t *testing.T) {
	cmd := newQueueCmd()
	for sub, flags := range map[string][]string{
		"status":  {"queue/q", "verbose/v"},
		"enable":  {"queue/q", "all/a", "verbose/v", "quiet"},
		"disable": {"queue/q", "all/a", "verbose/v", "quiet", "nocheckpoint", "message/m"},
		"start":   {"queue/q", "all/a", "verbose/v", "quiet"},
		"stop":    {"queue/q", "all/a", "verbose/v", "quiet", "nocheckpoint", "message/m"},
		"drain":   {"timeout/t"},
		"idle":    {"timeout/t", "quiet"},
		"list":    {"queue/q", "format/o", "no-header/n"},
	} {
		c, _, err := cmd.Find([]string{sub})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flags {
			long, short, _ := strings.Cut(f, "/")
			fl := c.Flags().Lookup(long)
			if fl == nil || fl.Shorthand != short {
				t.Errorf("%s: no --%s (-%s)", sub, long, short)
			}
		}
	}
}
