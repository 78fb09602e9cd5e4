package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// writeJobspec writes a jobspec for true with extra system attributes
// and returns its path.
func writeJobspec(t *testing.T, tasksCount map[string]any, system map[string]any) string {
	t.Helper()
	sys := map[string]any{"duration": 0}
	for k, v := range system {
		sys[k] = v
	}
	js := map[string]any{"version": 1,
		"resources":  []any{map[string]any{"type": "slot", "count": 1, "label": "task", "with": []any{map[string]any{"type": "core", "count": 1}}}},
		"tasks":      []any{map[string]any{"command": []string{"true"}, "slot": "task", "count": tasksCount}},
		"attributes": map[string]any{"system": sys}}
	b, _ := json.Marshal(js)
	path := filepath.Join(t.TempDir(), "jobspec.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHostileSubmissions: what a user controls in a submission is
// bounded, and each refusal names the key, the value and the limit; the
// instance goes on running jobs after each.
func TestHostileSubmissions(t *testing.T) {
	e := start(t)
	// a task count that made job-exec deal 2^62 tasks, wedging every job
	e.fail("tasks[0].count.total: 4611686018427387904 is more than the limit of 16777216",
		"job", "submit", writeJobspec(t, map[string]any{"total": int64(1) << 62}, nil))
	// a time limit past what a time value holds timed the job out at once
	e.fail("attributes.system.duration: 17280000000 s is more than the limit of 4294967296 s", "run", "-t", "200000d", "true")
	e.fail(`attributes.system.urgency: must be an integer from 0 to 31, not "x"`,
		"job", "submit", writeJobspec(t, map[string]any{"per_slot": 1}, map[string]any{"urgency": "x"}))
	// no size limit: a 100 MB jobspec was taken and kept
	big := writeJobspec(t, map[string]any{"per_slot": 1}, map[string]any{"environment": map[string]any{"BIG": strings.Repeat("x", 5<<20)}})
	e.fail("the jobspec (about 5.0M) is larger than the limit of 4M (ingest.max-jobspec-size)", "job", "submit", big)
	// alloc-bypass without its plugin ran the job where R did not say
	e.fail("attributes.system.alloc-bypass.R: the alloc-bypass jobtap plugin is not loaded",
		"submit", `--setattr=system.alloc-bypass.R={"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`, "true")
	// an unknown id is an error, with a non-zero exit
	r := e.flux("jobs", "ƒ4fr")
	if r.Code == 0 || !strings.Contains(r.Stderr, "JobID ƒ4fr unknown") {
		t.Errorf("flux jobs of an unknown id: %+v", r)
	}
	if out := e.must("run", "echo", "ok"); out != "ok" {
		t.Errorf("a job after the refusals: %q", out)
	}
}

// TestJobspecSizeConfig: ingest.max-jobspec-size sets the limit, and a
// bad value stops the instance from starting, naming the key.
func TestJobspecSizeConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flux instances")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "ingest.toml")
	os.WriteFile(conf, []byte("[ingest]\nmax-jobspec-size = \"64K\"\n"), 0o644)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"-o,--config-path=" + conf}})}
	mid := writeJobspec(t, map[string]any{"per_slot": 1}, map[string]any{"environment": map[string]any{"MID": strings.Repeat("x", 100<<10)}})
	e.fail("is larger than the limit of 64K (ingest.max-jobspec-size)", "job", "submit", mid)
	os.WriteFile(conf, []byte("[ingest]\nmax-jobspec-size = \"lots\"\n"), 0o644)
	if code, out := startOnce(t, "-s", "1", "-o,--config-path="+conf); code == 0 || !strings.Contains(out, `ingest.max-jobspec-size: size "lots"`) {
		t.Errorf("flux start with a bad ingest.max-jobspec-size: exit %d: %s", code, out)
	}
}

// TestModuleStartFailures: a module that fails as it starts makes flux
// module load fail with its reason, stops flux start (exit 1, naming it)
// instead of leaving an instance that never runs a job, and so ends a
// child instance's job with that reason.
func TestModuleStartFailures(t *testing.T) {
	e := start(t)
	e.must("module", "remove", "sched-simple")
	e.fail(`module sched-simple failed: queue-policy="bogus": use fcfs, easy, hybrid or conservative`,
		"module", "load", "sched-simple", "queue-policy=bogus")
	e.must("module", "load", "sched-simple")
	if out := e.must("run", "echo", "ok"); out != "ok" {
		t.Fatalf("a job after sched-simple was loaded again: %q", out)
	}
	r := e.flux("alloc", "-N1", "--broker-opts=-Ssched-simple.queue-policy=bogus", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, `rc1: module sched-simple failed: queue-policy="bogus"`) {
		t.Errorf("flux alloc of a child whose scheduler fails: %+v", r)
	}

	if code, out := startOnce(t, "-s", "2", "-Ssched-simple.queue-policy=bogus"); code != 1 || !strings.Contains(out, `rc1: module sched-simple failed: queue-policy="bogus"`) {
		t.Errorf("flux start with a scheduler that fails: exit %d: %s", code, out)
	}
}

// TestGuestServiceEvents: a guest may publish events of its own, not in a
// service's namespace (resource.rehello, job-manager.online: modules
// ignore a guest's, tools following them would be misled), on any rank.
func TestGuestServiceEvents(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root, to run commands as another user")
	}
	for _, topic := range []string{"resource.rehello", "job-manager.online", "kvs.setroot"} {
		r := e.asGuest("event", "pub", topic)
		if r.Code == 0 || !strings.Contains(r.Stderr, "guests may not publish "+topic) {
			t.Errorf("guest flux event pub %s: %+v", topic, r)
		}
	}
	if r := e.asGuest("event", "pub", "mine.hello"); r.Code != 0 {
		t.Errorf("guest flux event pub mine.hello: %+v", r)
	}
	e.must("event", "pub", "resource.rehello") // the owner may
}

// TestOOMFailsJob: a task of the job killed for its memory (here a child
// of the task, whose parent goes on and exits 0) fails the job: FAILED in
// flux jobs, a non-zero exit from flux job attach, as the job manager says.
func TestOOMFailsJob(t *testing.T) {
	e := start(t, "job-shell.memory-max=64M")
	id := e.submit("sh", "-c", `python3 -c "x = bytearray(200 << 20)" 2>/dev/null || head -c 209715200 /dev/zero | tail -c 1 >/dev/null; sleep 0.5; echo survived`)
	e.waitEvent(id, "clean")
	if !strings.Contains(e.must("job", "eventlog", id.String()), `type="oom"`) {
		t.Skip("no oom exception here (no memory cgroup this broker may use)")
	}
	if got := e.field(id, "{result}"); got != "FAILED" {
		t.Errorf("result of a job with an oom exception: %q", got)
	}
	if r := e.flux("job", "attach", id.String()); r.Code == 0 {
		t.Errorf("flux job attach of a job with an oom exception exited 0: %+v", r)
	}
}

// TestBadContainmentAttrs: a bad job-shell memory attribute stops the
// instance at start, naming it (every job failed before, the reason only
// in shells.log).
func TestBadContainmentAttrs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flux instances")
	}
	for _, c := range []struct {
		attrs []string
		want  string
	}{
		{[]string{"-Sjob-shell.memory-max=bogus"}, `job-shell.memory-max: size "bogus"`},
		{[]string{"-Sjob-shell.memory-default=1G", "-Sjob-shell.memory-max=64M"}, "job-shell.memory-default=1G is more than job-shell.memory-max=64M"},
	} {
		if code, out := startOnce(t, append([]string{"-s", "1"}, c.attrs...)...); code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("flux start %v: exit %d: %s", c.attrs, code, out)
		}
	}
}

// TestMemoryMaxFromConfig: the [job-shell] table of the configuration
// sets the per-task memory maximum; a job asking more is refused, the
// owner's and a guest's alike (a guest's shell cannot read the
// configuration: the job-shell module decides its jobs' limits).
func TestMemoryMaxFromConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job-shell.toml"), []byte("[job-shell]\nmemory-max = \"64M\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2, Args: []string{"--config-path=" + dir}})}
	want := "memory=1G is more than the instance's maximum of 64M per task"
	if r := e.flux("run", "-o", "memory=1G", "true"); r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("the owner's job over the configured maximum: %+v", r)
	}
	e.must("run", "-o", "memory=32M", "true")
	if !canRunAsGuest(e) {
		return
	}
	if r := e.asGuest("run", "-N2", "-o", "memory=1G", "true"); r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("a guest's job over the configured maximum: %+v", r)
	}
	if r := e.asGuest("run", "-N2", "-o", "memory=32M", "true"); r.Code != 0 {
		t.Errorf("a guest's job under the maximum: %+v", r)
	}
}
