package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestConfigReload: flux config get/reload/load change the limits, queues
// and purge limits of a running instance, all or nothing.
func TestConfigReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "policy.toml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[policy.limits]\nduration = \"1h\"\n")
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2, Args: []string{"--config-path", dir}})}

	// get: values, types, defaults
	if got := e.must("config", "get"); got != `{"policy":{"limits":{"duration":"1h"}}}` {
		t.Errorf("config get: %s", got)
	}
	if got := e.must("config", "get", "--type=fsd-integer", "policy.limits.duration"); got != "3600" {
		t.Errorf("config get --type=fsd-integer: %s", got)
	}
	if got := e.must("config", "get", "-t", "object", "policy.limits"); got != `{"duration":"1h"}` {
		t.Errorf("config get -t object: %s", got)
	}
	e.fail(`policy.limits.duration does not have the requested type`, "config", "get", "-t", "integer", "policy.limits.duration")
	if got := e.must("config", "get", "-t", "fsd-real", "policy.limits.duration"); got != "3600.000000" {
		t.Errorf("config get -t fsd-real: %s (flux-core prints %%f)", got)
	}
	e.fail("queues.batch is not set", "config", "get", "queues.batch")
	if r := e.flux("config", "get", "-q", "queues.batch"); r.Code != 1 || r.Stderr != "" {
		t.Errorf("config get -q of an unset key: %+v", r)
	}
	if got := e.must("config", "get", "-d", "none", "queues.batch"); got != "none" {
		t.Errorf("config get -d: %s", got)
	}
	e.fail("Unknown type: float", "config", "get", "-t", "float", "policy")
	guest := canRunAsGuest(e)
	if guest {
		if r := e.asGuest("submit", "--urgency=hold", "-t", "2h", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "requested duration (2h) exceeds policy limit of 1h") {
			t.Errorf("guest submit -t 2h under a 1h limit: %+v", r)
		}
		if r := e.asGuest("config", "reload"); r.Code == 0 || !strings.Contains(r.Stderr, "only the instance owner") {
			t.Errorf("guest config reload: %+v", r)
		}
	}

	// reload: a longer limit, named queues and a default queue
	write(`
[policy.limits]
duration = "3h"
[policy.jobspec.defaults.system]
queue = "batch"
[queues.batch]
[queues.debug]
policy.limits.duration = "10m"
`)
	e.must("config", "reload")
	if got := e.must("config", "get", "policy.limits.duration"); got != "3h" {
		t.Errorf("after reload: policy.limits.duration %s", got)
	}
	if got := e.must("queue", "list", "-n", "-o", "{queue} {limits.timelimit!F} {limits.timelimit}"); got != "batch 3h 10800.0\ndebug 10m 600.0" {
		t.Errorf("queues after reload: %q", got)
	}
	if q := e.must("jobtap", "query", ".limit-duration"); !strings.Contains(q, `"duration":10800`) || !strings.Contains(q, `"debug":600`) {
		t.Errorf("limit-duration after reload: %s", q)
	}
	debugJob := e.submit("--urgency=hold", "--queue=debug", "-t", "5m", "true")
	// the limits hold for the instance owner too (flux-core)
	e.fail("requested duration (unlimited) exceeds policy limit of 10m for queue debug", "submit", "--urgency=hold", "--queue=debug", "true")
	if q := e.field(e.submit("--urgency=hold", "-t", "1h", "true"), "{queue}"); q != "batch" {
		t.Errorf("default queue after reload: %q", q)
	}
	e.fail("'nope' is not a valid queue (queues: batch, debug)", "submit", "--queue=nope", "true")
	if guest {
		if r := e.asGuest("submit", "--urgency=hold", "-t", "2h", "true"); r.Code != 0 {
			t.Errorf("guest submit -t 2h under a 3h limit: %+v", r)
		}
		if r := e.asGuest("submit", "--urgency=hold", "--queue=debug", "-t", "20m", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "requested duration (20m) exceeds policy limit of 10m for queue debug") {
			t.Errorf("guest submit -t 20m to debug: %+v", r)
		}
	}

	// a bad file changes nothing, and says what is wrong
	write("[policy.limits]\nduration = \"bogus\"\n")
	if got := e.must("config", "get", "--config-path", dir, "policy.limits.duration"); got != "bogus" {
		t.Errorf("config get --config-path: %s", got)
	}
	e.fail(`policy.limits.duration: invalid Flux standard duration "bogus"`, "config", "reload")
	if got := e.must("config", "get", "policy.limits.duration"); got != "3h" {
		t.Errorf("after a refused reload: policy.limits.duration %s", got)
	}
	r := e.inst.RunInput(t, "[job-manager]\ninactive-num-limit = -1\n", "config", "load")
	if r.Code == 0 || !strings.Contains(r.Stderr, "inactive-num-limit: must be >= 0") {
		t.Errorf("config load of a negative limit: %+v", r)
	}
	r = e.inst.RunInput(t, "{not json", "config", "load")
	if r.Code == 0 || !strings.Contains(r.Stderr, "standard input: JSON") {
		t.Errorf("config load of bad JSON: %+v", r)
	}
	if got := e.must("queue", "list", "-n", "-o", "{queue}"); got != "batch\ndebug" {
		t.Errorf("queues after refused loads: %q", got)
	}

	// load from standard input: the queues go (their jobs still run),
	// and a purge limit set by a reload keeps one inactive job
	for i := 0; i < 2; i++ {
		e.waitEvent(e.submit("--queue=debug", "-t", "1m", testDuration("0.001s"), "true"), "clean")
	}
	if n := strings.Count(e.must("jobs", "-n", "-f", "inactive", "-o", "{id}"), "\n") + 1; n != 2 {
		t.Fatalf("%d inactive jobs before the purge limit, want 2", n)
	}
	r = e.inst.RunInput(t, `{"job-manager": {"inactive-num-limit": 1}}`, "config", "load")
	if r.Code != 0 {
		t.Fatalf("config load: %+v", r)
	}
	if got := e.must("config", "get"); got != `{"job-manager":{"inactive-num-limit":1}}` {
		t.Errorf("config get after load: %s", got)
	}
	if got := e.must("queue", "list", "-n", "-o", "{queue}|{limits.timelimit}|{defaults.timelimit!F}"); got != "|inf|inf" {
		t.Errorf("queues after load: %q", got)
	}
	e.must("job", "urgency", debugJob.String(), "default")
	e.must("job", "wait-event", "-t", "30", debugJob.String(), "clean")
	e.waitFor("one inactive job kept", func() bool {
		return e.must("jobs", "-n", "-f", "inactive", "-o", "{id}") == debugJob.String()
	})

	// the file again: what it says now
	write("[policy.limits]\nduration = \"2h\"\n")
	e.must("config", "reload")
	if got := e.must("config", "get"); got != `{"policy":{"limits":{"duration":"2h"}}}` {
		t.Errorf("config get after reload: %s", got)
	}
	// tables read only at start are taken, with a warning
	write("[policy.limits]\nduration = \"2h\"\n[resource]\nexclude = \"1\"\n")
	e.must("config", "reload")
	if log := e.must("dmesg"); !strings.Contains(log, "the [resource] table changed; it takes effect when the broker restarts") {
		t.Errorf("no warning about [resource] in the log:\n%s", log)
	}
}

// TestConfigGetRealStrict: -t real accepts only reals and -t integer only
// integers, as flux-core's JSON types do; a TOML or JSON float stays a
// real (5.0) through config.get and config load.
func TestConfigGetRealStrict(t *testing.T) {
	e := start(t)
	if r := e.inst.RunInput(t, "i = 5\nr = 5.0\ne = 1.5e3\n", "config", "load"); r.Code != 0 {
		t.Fatalf("config load: %+v", r)
	}
	if got := e.must("config", "get"); got != `{"e":1500.0,"i":5,"r":5.0}` {
		t.Errorf("config get: %s", got)
	}
	e.fail("i does not have the requested type", "config", "get", "-t", "real", "i")
	e.fail("r does not have the requested type", "config", "get", "-t", "integer", "r")
	if got := e.must("config", "get", "-t", "real", "r"); got != "5.0" {
		t.Errorf("-t real r: %s", got)
	}
	if got := e.must("config", "get", "-t", "any", "i"); got != "5" {
		t.Errorf("-t any i: %s", got)
	}
}
