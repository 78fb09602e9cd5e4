package integration

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestAccountingLimits: per user+bank limits from [accounting]: too many
// active jobs are refused at submission, jobs over max-running-jobs wait
// in DEPEND (flux-accounting's dependency name) and start in order as
// the association's jobs end; a bank's own limits apply to its jobs.
func TestAccountingLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte(`
[accounting]
max-active-jobs = 3
max-running-jobs = 1
max-cores = 1
[accounting.banks.big]
max-running-jobs = 2
max-active-jobs = 10
max-cores = 0
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	// the first job runs until the checks below are done and cancels
	// it (a 1 s job could end first on a loaded machine, letting the
	// second start)
	first := e.submit(testDuration("10m"), "true")
	second := e.submit(testDuration("0.1s"), "true")
	third := e.submit(testDuration("0.1s"), "true")
	e.fail("has 3 active jobs: max-active-jobs is 3", "submit", "true")
	e.fail("job asks for 2 cores: max-cores for user", "submit", "-n2", "true")
	if got := e.field(second, "{status_abbrev} {dependencies}"); got != "D max-running-jobs-user-limit" {
		t.Errorf("second job: %q, want it held in DEPEND", got)
	}
	e.must("cancel", first.String())
	e.waitEvent(third, "clean")
	// one at a time, in order
	num := func(field, id string) float64 {
		out := e.must("jobs", "-n", "-o", "{"+field+"}", id)
		f, err := strconv.ParseFloat(out, 64)
		if err != nil {
			t.Fatalf("%s of %s: %q", field, id, out)
		}
		return f
	}
	start := func(id string) float64 { return num("t_run", id) }
	end := func(id string) float64 { return num("t_inactive", id) }
	if !(start(second.String()) >= end(first.String())-0.01 && start(third.String()) >= start(second.String())) {
		t.Errorf("jobs did not run one after the other: first ended %v, second started %v, third %v",
			end(first.String()), start(second.String()), start(third.String()))
	}
	// bank big: two at a time
	var big []string
	var bigIDs []jobid.ID
	for i := 0; i < 3; i++ {
		id := e.submit("-B", "big", testDuration("30s"), "true")
		bigIDs = append(bigIDs, id)
		big = append(big, id.String())
	}
	e.waitEvent(bigIDs[1], "start")
	if got := e.field(bigIDs[2], "{status_abbrev}"); got != "D" {
		t.Errorf("third big-bank job is %s, want D", got)
	}
	q := e.must("jobtap", "query", ".accounting-limits")
	me, _ := user.Current()
	if !strings.Contains(q, `"association":"user `+me.Username+` (bank big)","active":3,"running":2`) {
		t.Errorf("jobtap query:\n%s", q)
	}
	e.must(append([]string{"cancel"}, big...)...)
}

// TestExemptJobs (seed 003: "allow jobs to be modified to exceed system
// and accounting limits"): the instance owner exempts a held job with
// flux update ID exempt=1 and it runs at once; an exempt submission by
// the owner passes policy limits; a guest may do neither.
func TestExemptJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "limits.toml"), []byte("[policy.limits]\nduration = \"1h\"\n[accounting]\nmax-running-jobs = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	first := e.submit("-t", "1m", testDuration("60s"), "true")
	e.waitEvent(first, "start")
	held := e.submit("-t", "1m", testDuration("0.1s"), "true")
	if got := e.field(held, "{status_abbrev} {dependencies}"); got != "D max-running-jobs-user-limit" {
		t.Fatalf("second job: %q, want it held", got)
	}
	e.must("update", held.String(), "exempt=1")
	e.waitEvent(held, "clean")
	long := e.submit("--setattr=exempt=1", "-t", "10h", testDuration("0.1s"), "true")
	e.waitEvent(long, "clean")
	e.fail("exceeds policy limit of 1h", "submit", "-t", "10h", "true")
	e.fail("want true, false, 1 or 0", "submit", "--setattr=exempt=2", "-t", "1m", "true")
	if canRunAsGuest(e) {
		if r := e.asGuest("submit", "--setattr=exempt=1", "-t", "1m", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "only the instance owner may exempt") {
			t.Errorf("a guest submitted an exempt job: %+v", r)
		}
	}
	e.must("cancel", first.String())
}

// TestPrivilegedAssociation (seed 003: "give specified user+banks the
// ability to submit jobs that ... exceed limits or have expedite
// priority"): [accounting.users.nobody] exempt and expedite let that
// user's jobs pass the policy and accounting limits and use urgency 31;
// another bank of the same user keeps the limits.
func TestPrivilegedAssociation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte(`
[policy.limits]
duration = "1h"
[accounting]
max-running-jobs = 1
[accounting.users."nobody:vip"]
exempt = true
expedite = true
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	if !canRunAsGuest(e) {
		t.Skip("needs to run commands as user nobody")
	}
	r := e.asGuest("submit", "-B", "vip", "--urgency=31", "-t", "10h", testDuration("30s"), "true")
	if r.Code != 0 {
		t.Fatalf("privileged submission refused: %+v", r)
	}
	r2 := e.asGuest("submit", "-B", "vip", "-t", "10h", testDuration("30s"), "true")
	if r2.Code != 0 {
		t.Fatalf("second privileged submission refused: %+v", r2)
	}
	for _, id := range []string{strings.TrimSpace(r.Stdout), strings.TrimSpace(r2.Stdout)} {
		if err := e.inst.Run(t, "job", "wait-event", "-t", "20", id, "start"); err.Code != 0 {
			t.Errorf("exempt job %s did not start (max-running-jobs must not hold it): %s", id, err.Stderr)
		}
	}
	if r := e.asGuest("submit", "-B", "other", "--urgency=31", "-t", "1m", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "urgency above 16") {
		t.Errorf("another bank of the user expedited: %+v", r)
	}
	if r := e.asGuest("submit", "-B", "other", "-t", "10h", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "exceeds policy limit") {
		t.Errorf("another bank of the user passed the duration limit: %+v", r)
	}
	e.must("cancel", "--all", "--user=all")
}

// TestAccountingLimitsAfterDependencies: a job waiting on another
// dependency does not count against max-running-jobs until that
// dependency is gone; then it counts (or waits its turn).
func TestAccountingLimitsAfterDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte("[accounting]\nmax-running-jobs = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	first := e.submit(testDuration("3s"), "true")
	e.waitEvent(first, "start")
	after := e.submit("--dependency=afterany:"+first.String(), testDuration("0.1s"), "true")
	other := e.submit(testDuration("0.1s"), "true")
	// other runs now: the job waiting on first does not hold a slot
	e.waitEvent(other, "clean")
	e.waitEvent(after, "clean")
	num := func(field string, id jobid.ID) float64 {
		f, err := strconv.ParseFloat(e.field(id, "{"+field+"}"), 64)
		if err != nil {
			t.Fatalf("%s of %s: %v", field, id, err)
		}
		return f
	}
	if num("t_run", other) >= num("t_inactive", first) {
		t.Errorf("the other job waited for the first to end: the dependent job held a running slot")
	}
	if got := e.field(after, "{result}"); got != "COMPLETED" {
		t.Errorf("the dependent job: %s", got)
	}
}
