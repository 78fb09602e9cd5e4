package integration

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestJobTaskmap: flux job taskmap prints a running job's RFC 34 task map
// (from its shell.start event) and answers questions about it, or about
// a map given on the command line, as flux-core does.
func TestJobTaskmap(t *testing.T) {
	e := start(t)
	id := e.submit("-N2", "--tasks-per-node=2", "sleep", "300").String()
	for _, c := range []struct{ args, want string }{
		{"", "[[0,2,2,1]]"},
		{"--taskids=1", "2-3"},
		{"--ntasks=0", "2"},
		{"--nodeid=3", "1"},
		{"--to=raw", "0-1;2-3"},
		{"--to=pmi", "(vector,(0,2,2))"},
		{"--to=multiline", "0\n0\n1\n1"},
	} {
		args := append(strings.Fields(c.args), id)
		if got := e.must(append([]string{"job", "taskmap"}, args...)...); got != c.want {
			t.Errorf("flux job taskmap %s: %q, want %q", c.args, got, c.want)
		}
	}
	hosts := strings.Split(strings.TrimSpace(e.must("job", "taskmap", "--to=hosts", id)), "\n")
	if len(hosts) != 2 || !strings.HasSuffix(hosts[0], ": 0-1") || !strings.HasSuffix(hosts[1], ": 2-3") {
		t.Errorf("--to=hosts: %q", hosts)
	}
	if h := e.must("job", "taskmap", "--hostname=0", id); strings.TrimSpace(h) != strings.SplitN(hosts[0], ":", 2)[0] {
		t.Errorf("--hostname=0: %q (hosts %q)", h, hosts)
	}
	e.fail("no nodeid for task 4", "job", "taskmap", "--nodeid=4", id)
	e.fail("only one of", "job", "taskmap", "--nodeid=1", "--ntasks=1", id)
	e.fail("invalid value", "job", "taskmap", "--to=foo", id)

	// a map given on the command line
	if got := e.must("job", "taskmap", "--to=raw", "[[0,4,1,4]]"); got != "0,4,8,12;1,5,9,13;2,6,10,14;3,7,11,15" {
		t.Errorf("raw form of a cyclic map: %q", got)
	}
	e.fail("neither a job ID nor a task map", "job", "taskmap", "[[0,4,4]]")
	e.fail("without a jobid", "job", "taskmap", "--hostname=0", "[[0,1,1,1]]")

	// --taskmap chooses the map; a task total is spread over the nodes
	cyc := e.submit("-N2", "-n4", "--taskmap=cyclic", "true").String()
	if got := e.must("job", "taskmap", cyc); got != "[[0,2,1,2]]" {
		t.Errorf("--taskmap=cyclic: %q", got)
	}
	man := e.submit("-N2", "-n3", "--taskmap=manual:[[1,1,2,1],[0,1,1,1]]", "true").String()
	if got := e.must("job", "taskmap", man); got != "[[1,1,2,1],[0,1,1,1]]" {
		t.Errorf("--taskmap=manual: %q", got)
	}
	spread := e.submit("-N2", "-n3", "true").String()
	if got := e.must("job", "taskmap", spread); got != "[[0,1,2,1],[1,1,1,1]]" {
		t.Errorf("-N2 -n3: %q", got)
	}
	e.fail("unknown scheme", "submit", "--taskmap=hostfile:x", "true")
	if js := e.must("submit", "--dry-run", "-B", "bank1", "--project=p1", "true"); !strings.Contains(js, `"bank":"bank1"`) || !strings.Contains(js, `"project":"p1"`) {
		t.Errorf("--bank/--project: %s", js)
	}

	// a job canceled before it ran has no map
	held := e.submit("--urgency=hold", "true").String()
	e.must("cancel", held)
	e.fail("", "job", "taskmap", held)
	e.must("cancel", id)
}

// TestJobTimeleft: whole seconds left in a job's time limit, 4294967295
// without one, 0 once over; a pending job is an error; with no ID, the
// job the command runs in.
func TestJobTimeleft(t *testing.T) {
	e := start(t)
	limited := e.submit("-t", "10m", "sleep", "300")
	unlimited := e.submit("sleep", "300")
	e.waitEvent(limited, "start")
	e.waitEvent(unlimited, "start")
	left, err := strconv.Atoi(strings.TrimSpace(e.must("job", "timeleft", limited.String())))
	if err != nil || left <= 0 || left > 600 {
		t.Errorf("timeleft of a 10m job: %d (%v)", left, err)
	}
	if h := e.must("job", "timeleft", "-H", limited.String()); !strings.HasSuffix(h, "m") {
		t.Errorf("timeleft -H: %q", h)
	}
	if got := e.must("job", "timeleft", unlimited.String()); got != "4294967295" {
		t.Errorf("timeleft without a limit: %q", got)
	}
	held := e.submit("--urgency=hold", "true")
	e.fail("has not started", "job", "timeleft", held.String())
	in, err := strconv.Atoi(strings.TrimSpace(e.must("run", "-t", "5m", "flux", "job", "timeleft")))
	if err != nil || in <= 240 || in > 300 {
		t.Errorf("timeleft inside a 5m job: %d (%v)", in, err)
	}
	// in a nested instance: the time left in its allocation
	nested, err := strconv.Atoi(strings.TrimSpace(e.must("alloc", "-N1", "-t", "7m", e.inst.Bin, "job", "timeleft")))
	if err != nil || nested <= 360 || nested > 420 {
		t.Errorf("timeleft inside a 7m instance: %d (%v)", nested, err)
	}
	e.must("cancel", limited.String(), unlimited.String(), held.String())
	e.waitEvent(limited, "clean")
	if got := e.must("job", "timeleft", limited.String()); got != "0" {
		t.Errorf("timeleft of an ended job: %q", got)
	}
}

// TestJobHostpids: flux job hostpids prints HOST:PID of each task of a
// running job in task rank order, the PIDs those of the real tasks;
// --ranks and --delimiter as flux-core; a held job times out with -t, an
// ended one is an error.
func TestJobHostpids(t *testing.T) {
	e := start(t)
	id := e.submit("-N2", "-n4", "sleep", "300").String()
	pairs := strings.Split(e.must("job", "hostpids", id), ",")
	if len(pairs) != 4 {
		t.Fatalf("hostpids: %q, want 4 HOST:PID pairs", pairs)
	}
	hosts := strings.Split(strings.TrimSpace(e.must("job", "taskmap", "--to=hosts", id)), "\n")
	for i, p := range pairs {
		host, pid, ok := strings.Cut(p, ":")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil {
			t.Fatalf("pair %d: %q is not HOST:PID", i, p)
		}
		if want := strings.SplitN(hosts[i/2], ":", 2)[0]; host != want {
			t.Errorf("task %d on %q, want %q", i, host, want)
		}
		comm, err := os.ReadFile("/proc/" + pid + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
			t.Errorf("task %d: pid %d is not a running sleep (%q, %v)", i, n, comm, err)
		}
	}
	if got := e.must("job", "hostpids", "-d", " ", "-r", "1-2", id); got != pairs[1]+" "+pairs[2] {
		t.Errorf("-d ' ' -r 1-2: %q, want %q", got, pairs[1]+" "+pairs[2])
	}
	e.fail("--ranks=x", "job", "hostpids", "--ranks=x", id)
	if canRunAsGuest(e) {
		if r := e.asGuest("job", "hostpids", id); r.Code == 0 || strings.Contains(r.Stdout, ":") {
			t.Errorf("a guest got the pids of the owner's job: %+v", r)
		}
	}
	held := e.submit("--urgency=hold", "true").String()
	e.fail("timed out", "job", "hostpids", "-t", "0.2s", held)
	e.must("cancel", id)
	e.waitEvent(jobid.MustParse(id), "clean")
	e.fail("is not running", "job", "hostpids", id)
}
