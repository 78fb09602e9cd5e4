package integration

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestStatusWaitLast covers flux job status, flux job wait and flux job
// last (flux-job(1)).
func TestStatusWaitLast(t *testing.T) {
	e := start(t)

	t.Run("status", func(t *testing.T) {
		e := e.sub(t)
		ok := e.submit(testDuration("0.1s"), "true")
		bad := e.submit(testDuration("0.1s"), "--setattr=system.exec.test.wait_status=768", "false")
		ca := e.submit("--urgency=hold", "true")
		e.must("cancel", ca.String())
		// status waits for the jobs and exits with the largest exit code
		if r := e.flux("job", "status", ok.String()); r.Code != 0 {
			t.Errorf("status of a completed job: %+v", r)
		}
		if r := e.flux("job", "status", ok.String(), bad.String()); r.Code != 3 {
			t.Errorf("status of a job that exited 3: %+v", r)
		}
		if r := e.flux("job", "status", ca.String()); r.Code != 1 {
			t.Errorf("status of a canceled job: %+v", r)
		}
		if r := e.flux("job", "status", "-e", "42", ca.String()); r.Code != 42 {
			t.Errorf("status -e 42 of a canceled job: %+v", r)
		}
	})

	t.Run("wait", func(t *testing.T) {
		e := e.sub(t)
		ok := e.submit("--flags=waitable", testDuration("0.2s"), "true")
		bad := e.submit("--flags=waitable", testDuration("0.1s"), failing, "false")
		plain := e.submit(testDuration("0.01s"), "true")
		if r := e.flux("job", "wait", ok.String()); r.Code != 0 || r.Stdout != "" {
			t.Errorf("wait for a successful job: %+v", r)
		}
		// a result is consumed once
		if r := e.flux("job", "wait", ok.String()); r.Code != 2 {
			t.Errorf("second wait for the same job: %+v", r)
		}
		if r := e.flux("job", "wait", plain.String()); r.Code != 2 {
			t.Errorf("wait for a job without the waitable flag: %+v", r)
		}
		// without an id: the next waitable job, whose id is printed
		r := e.flux("job", "wait")
		if r.Code != 1 || strings.TrimSpace(r.Stdout) != bad.String() || strings.TrimSpace(r.Stderr) != "flux-job: task(s) exited with exit code 1" {
			t.Errorf("wait for any job (a failed one): %+v", r)
		}
		if r := e.flux("job", "wait"); r.Code != 2 {
			t.Errorf("wait with no waitable jobs left: %+v", r)
		}
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, e.submit("--flags=waitable", testDuration("0.05s"), "true").String())
		}
		r = e.flux("job", "wait", "--all", "-v")
		if r.Code != 0 || strings.Count(r.Stderr, "completed successfully") != 3 {
			t.Errorf("wait --all: %+v", r)
		}
		for _, id := range ids {
			if !strings.Contains(r.Stderr, id) {
				t.Errorf("wait --all -v does not report %s", id)
			}
		}
		e.submit("--flags=waitable", testDuration("0.05s"), failing, "false")
		if r := e.flux("job", "wait", "--all"); r.Code != 1 {
			t.Errorf("wait --all with a failed job: %+v", r)
		}
	})

	t.Run("last", func(t *testing.T) {
		e := e.sub(t)
		var ids []jobid.ID
		for i := 0; i < 3; i++ {
			ids = append(ids, e.submit(testDuration("0.01s"), "true"))
		}
		if got := e.must("job", "last"); got != ids[2].String() {
			t.Errorf("flux job last: %q, want %s", got, ids[2])
		}
		want := ids[2].String() + "\n" + ids[1].String()
		if got := e.must("job", "last", "2"); got != want {
			t.Errorf("flux job last 2: %q, want %q", got, want)
		}
		if got := e.must("job", "last", "[1:3]"); got != ids[1].String()+"\n"+ids[0].String() {
			t.Errorf("flux job last [1:3]: %q", got)
		}
	})
}

// TestPgrepPkill covers flux pgrep / flux pkill (flux-pgrep(1)).
func TestPgrepPkill(t *testing.T) {
	e := start(t)
	a := e.submit("--job-name=alpha", testDuration("60s"), "true")
	b := e.submit("--job-name=alphabet", "--urgency=hold", "true")
	c := e.submit("--job-name=beta", "--urgency=hold", "true")
	done := e.submit("--job-name=alpha", testDuration("0.01s"), "true")
	e.waitEvent(done, "clean")
	e.waitEvent(a, "start")
	sorted := func(s string) string {
		f := strings.Fields(s)
		sort.Strings(f)
		return strings.Join(f, " ")
	}
	ids := func(l ...jobid.ID) string {
		var s []string
		for _, id := range l {
			s = append(s, id.String())
		}
		return sorted(strings.Join(s, " "))
	}
	if got := sorted(e.must("pgrep", "alpha")); got != ids(a, b) {
		t.Errorf("pgrep alpha (active only): %q, want %q", got, ids(a, b))
	}
	if got := sorted(e.must("pgrep", "-a", "^alpha$")); got != ids(a, done) {
		t.Errorf("pgrep -a ^alpha$: %q", got)
	}
	if got := sorted(e.must("pgrep", a.String()+".."+c.String())); got != ids(a, b, c) {
		t.Errorf("pgrep ID..ID: %q", got)
	}
	if r := e.flux("pgrep", "gamma"); r.Code != 1 || r.Stdout != "" {
		t.Errorf("pgrep without a match: %+v", r)
	}
	if got := e.must("pgrep", "-n", "-o", "{id.f58} {name}", "beta"); got != c.String()+" beta" {
		t.Errorf("pgrep -o: %q", got)
	}
	e.must("pkill", "--wait", "alpha")
	for _, id := range []jobid.ID{a, b} {
		if r := e.field(id, "{result}"); r != "CANCELED" {
			t.Errorf("job %s after pkill: %s", id, r)
		}
	}
	if st := e.field(c, "{state}"); st != "SCHED" {
		t.Errorf("non-matching job %s after pkill: %s", c, st)
	}
	if r := e.flux("pkill", "alpha"); r.Code != 1 {
		t.Errorf("pkill without a match: %+v", r)
	}
	e.must("pkill", "beta")
}

// TestBulksubmit covers flux bulksubmit (flux-bulksubmit(1)).
func TestBulksubmit(t *testing.T) {
	e := start(t)
	got := e.must("bulksubmit", "--dry-run", "echo", "{1}", "{0}", ":::", "1", "2", ":::", "3", "4")
	want := "bulksubmit: submit echo 3 1\nbulksubmit: submit echo 4 1\nbulksubmit: submit echo 3 2\nbulksubmit: submit echo 4 2"
	if got != want {
		t.Errorf("bulksubmit --dry-run:\n%s\nwant:\n%s", got, want)
	}
	got = e.must("bulksubmit", "--dry-run", "echo", "{0}", "{1}", ":::", "1", "2", ":::+", "3", "4")
	if got != "bulksubmit: submit echo 1 3\nbulksubmit: submit echo 2 4" {
		t.Errorf("bulksubmit linked inputs:\n%s", got)
	}
	if got := strings.TrimSpace(e.inst.RunInput(t, "a\nb\n", "bulksubmit", "--dry-run", "echo", "{seq1}:{}").Stdout); got != "bulksubmit: submit echo 1:a\nbulksubmit: submit echo 2:b" {
		t.Errorf("bulksubmit from stdin:\n%s", got)
	}
	// real jobs: one per input, named by it; ids printed in order
	out := e.must("bulksubmit", "--job-name={}", testDuration("0.01s"), "true", ":::", "x", "y", "z")
	lines := strings.Split(out, "\n")
	if len(lines) != 3 {
		t.Fatalf("bulksubmit printed %q", out)
	}
	for i, name := range []string{"x", "y", "z"} {
		id, err := jobid.Parse(lines[i])
		if err != nil {
			t.Fatalf("bulksubmit line %q", lines[i])
		}
		if r := e.result(id); r != "COMPLETED" {
			t.Errorf("bulksubmit job %s: %s", id, r)
		}
		if n := e.field(id, "{name}"); n != name {
			t.Errorf("bulksubmit job %s name %q, want %q", id, n, name)
		}
	}
	// --wait exits with the largest exit code of the jobs
	r := e.flux("bulksubmit", "--wait", "--quiet", testDuration("0.01s"), "--setattr=system.exec.test.wait_status={}", "true", ":::", "0", "512")
	if r.Code != 2 {
		t.Errorf("bulksubmit --wait with a job exiting 2: %+v", r)
	}
}

// TestSubmitWatch: flux submit --watch shows each job's output (stdout
// and stderr, labeled with --label-io) and exits with the largest exit
// code.
func TestSubmitWatch(t *testing.T) {
	e := start(t)
	r := e.flux("submit", "--watch", "--quiet", "--cc=1-3", "sh", "-c", "echo out {cc}; echo err {cc} >&2; exit {cc}")
	if r.Code != 3 || r.Stdout != "out 1\nout 2\nout 3\n" || !strings.Contains(r.Stderr, "err 1\n") || !strings.Contains(r.Stderr, "err 3\n") {
		t.Fatalf("flux submit --watch: %+v", r)
	}
	r = e.flux("submit", "--watch", "--quiet", "-n2", "--label-io", "echo", "hi")
	if r.Code != 0 || !strings.Contains(r.Stdout, "0: hi\n") || !strings.Contains(r.Stdout, "1: hi\n") {
		t.Fatalf("flux submit --watch --label-io: %+v", r)
	}
}

// TestSubmitLog: --log FILE takes the job IDs and error messages,
// --log-stderr FILE the error messages alone.
func TestSubmitLog(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	logf, errf := filepath.Join(dir, "ids.log"), filepath.Join(dir, "err.log")
	if r := e.flux("submit", "--log="+logf, "--cc=1-2", "true"); r.Code != 0 || r.Stdout != "" {
		t.Fatalf("submit --log: %+v", r)
	}
	if b, _ := os.ReadFile(logf); len(strings.Fields(string(b))) != 2 {
		t.Errorf("--log file: %q", b)
	}
	r := e.flux("submit", "--log="+logf, "--log-stderr="+errf, "--dependency=afterok:ƒ2PbTxYF", "true")
	if r.Code != 1 || r.Stderr != "" {
		t.Fatalf("submit --log-stderr with a refused job: %+v", r)
	}
	if b, _ := os.ReadFile(errf); !strings.Contains(string(b), "not found") {
		t.Errorf("--log-stderr file: %q", b)
	}
	e.fail("--log", "submit", "--log="+filepath.Join(dir, "no", "such.log"), "true")
}

// TestWatch: flux watch copies the output of the given or selected jobs,
// inactive ones too, in submission order, and exits with the largest
// exit code (2 for bad options).
func TestWatch(t *testing.T) {
	e := start(t)
	a := e.submit("sh", "-c", "echo A; echo A-err >&2; exit 3")
	b := e.submit("echo", "B")
	r := e.flux("watch", b.String(), a.String())
	if r.Code != 3 || r.Stdout != "B\nA\n" || !strings.Contains(r.Stderr, "A-err\n") {
		t.Fatalf("flux watch IDS: %+v", r)
	}
	e.waitEvent(a, "clean")
	e.waitEvent(b, "clean")
	r = e.flux("watch", "--all", "--progress")
	if r.Code != 3 || r.Stdout != "A\nB\n" || !strings.Contains(r.Stderr, "CD:1 F:1") {
		t.Fatalf("flux watch --all --progress: %+v", r)
	}
	if r := e.flux("watch"); r.Code != 2 || !strings.Contains(r.Stderr, "no jobs to watch") {
		t.Errorf("flux watch without jobs: %+v", r)
	}
	if r := e.flux("watch", "--filter=bogus"); r.Code != 2 {
		t.Errorf("flux watch --filter=bogus: %+v", r)
	}
	if r := e.flux("watch", "--active"); r.Code != 0 || r.Stdout != "" {
		t.Errorf("flux watch --active with none active: %+v", r)
	}
}

// TestBulksubmitShuffle: --shuffle submits every input, in some order,
// each keeping its own replacement values.
func TestBulksubmitShuffle(t *testing.T) {
	e := start(t)
	r := e.flux("bulksubmit", "--shuffle", "--watch", "--quiet", "echo", "{seq}:{}", ":::", "a", "b", "c", "d")
	got := strings.Fields(r.Stdout)
	sort.Strings(got)
	if r.Code != 0 || strings.Join(got, " ") != "0:a 1:b 2:c 3:d" {
		t.Fatalf("bulksubmit --shuffle: %+v", r)
	}
}

// TestJobMemo: flux job memo sets user annotations (dotted keys, JSON or
// string values, null removes) that flux jobs shows as {user.KEY}; an
// inactive job takes none.
func TestJobMemo(t *testing.T) {
	e := start(t)
	id := e.submit("--urgency=hold", "true")
	e.must("job", "memo", id.String(), "note=hello world", "a.b=1", "path=conf.json")
	if got := e.field(id, "{user.note}|{user.a.b}|{user.path}"); got != "hello world|1|conf.json" {
		t.Errorf("memo fields: %q", got)
	}
	e.must("job", "memo", id.String(), "note=null")
	if got := e.field(id, "[{user.note}]"); got != "[]" {
		t.Errorf("memo removed: %q", got)
	}
	e.fail("not KEY=VALUE", "job", "memo", id.String(), "junk")
	e.must("cancel", id.String())
	e.waitEvent(id, "clean")
	e.fail("inactive", "job", "memo", id.String(), "x=1")
}

// TestJobBulkOps: flux job cancelall/raiseall/killall (job-manager
// raiseall and killall) count without --force and act with it, on the
// states asked for.
func TestJobBulkOps(t *testing.T) {
	e := start(t)
	var held []jobid.ID
	for i := 0; i < 3; i++ {
		held = append(held, e.submit("--urgency=hold", "true"))
	}
	run := e.submit("sleep", "300")
	e.waitEvent(run, "start")
	if r := e.flux("job", "cancelall", "-S", "pending"); r.Code != 0 || !strings.Contains(r.Stderr, "matched 3 jobs") {
		t.Fatalf("cancelall without -f: %+v", r)
	}
	if got := e.field(held[0], "{state}"); got != "SCHED" {
		t.Fatalf("cancelall without -f canceled: %s", got)
	}
	if r := e.flux("job", "raiseall", "-f", "-s", "5", "test", "a", "note"); r.Code != 0 || !strings.Contains(r.Stderr, "on 4 jobs") {
		t.Fatalf("raiseall: %+v", r)
	}
	if ev, ok := find(e.events(run), "exception"); !ok {
		t.Errorf("raiseall: no exception on the running job: %v", e.eventNames(run))
	} else if c := ctxOf(t, ev); c["type"] != "test" || c["note"] != "a note" || c["severity"] != 5.0 {
		t.Errorf("raiseall exception context %v", c)
	}
	if r := e.flux("job", "cancelall", "-f", "-S", "pending"); r.Code != 0 || !strings.Contains(r.Stderr, "Canceled 3 jobs") {
		t.Fatalf("cancelall -f: %+v", r)
	}
	for _, id := range held {
		e.waitEvent(id, "clean")
	}
	if got := e.field(run, "{state}"); got != "RUN" {
		t.Fatalf("cancelall -S pending touched the running job: %s", got)
	}
	if r := e.flux("job", "killall", "-f", "-s", "SIGKILL"); r.Code != 0 || !strings.Contains(r.Stderr, "Killed 1 jobs") {
		t.Fatalf("killall: %+v", r)
	}
	e.waitEvent(run, "clean")
	e.fail("inactive", "job", "cancelall", "-S", "inactive")
}

// TestMultiProg: flux run ... flux multi-prog CONFIG runs each task's
// own command (MPMD).
func TestMultiProg(t *testing.T) {
	e := start(t)
	conf := filepath.Join(t.TempDir(), "mp.conf")
	os.WriteFile(conf, []byte("0 echo first %t\n* echo other %t\n"), 0o644)
	r := e.flux("run", "-N2", "-n2", "--label-io", e.inst.Bin, "multi-prog", conf)
	if r.Code != 0 || !strings.Contains(r.Stdout, "0: first 0\n") || !strings.Contains(r.Stdout, "1: other 1\n") {
		t.Fatalf("flux run flux multi-prog: %+v", r)
	}
}

// TestAddFile: --add-file puts files in the job (RFC 37), written into
// FLUX_JOB_TMPDIR with their mode on every node before the tasks start.
func TestAddFile(t *testing.T) {
	e := start(t)
	path := filepath.Join(t.TempDir(), "my.conf")
	os.WriteFile(path, []byte("k = 1\n"), 0o640)
	r := e.flux("run", "-N2", "--label-io", "--add-file="+path, "--add-file=note=a\nb",
		"sh", "-c", `stat -c "mode %a" $FLUX_JOB_TMPDIR/my.conf; cat $FLUX_JOB_TMPDIR/note`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "0: mode 640\n") || !strings.Contains(r.Stdout, "1: mode 640\n") || !strings.Contains(r.Stdout, "1: b\n") {
		t.Fatalf("flux run --add-file: %+v", r)
	}
	e.fail("plain name", "run", "--add-file=../x="+path, "true")
	// {{tmpdir}} in the command is the job's FLUX_JOB_TMPDIR, as
	// flux-core's flux batch relies on ("flux broker {{tmpdir}}/script")
	r = e.flux("run", "--add-file=s.sh=echo from-script $1\n", "sh", "{{tmpdir}}/s.sh", "{{id.dec}}")
	if id := strings.TrimPrefix(strings.TrimSpace(r.Stdout), "from-script "); r.Code != 0 || id == "" || id == "{{id.dec}}" {
		t.Errorf("{{tmpdir}} and {{id.dec}} in the command: %+v", r)
	}
}
