package integration

import (
	"strings"
	"testing"
)

// TestModuleArguments loads sched-simple and resource with the arguments
// flux-core's test suite gives them (t2300-sched-simple, t2203, t2204,
// t2310-resource-module, t/rc/rc1-job.py) in a real instance, and with
// bad ones, which must make flux module load fail naming the argument and
// leave the module unloaded.
func TestModuleArguments(t *testing.T) {
	e := start(t)
	notLoaded := func(name string) {
		t.Helper()
		for _, line := range strings.Split(e.must("module", "list"), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == name {
				t.Fatalf("%s is listed after its load failed:\n%s", name, line)
			}
		}
	}

	e.must("module", "remove", "sched-simple")
	for _, tt := range []struct{ arg, want string }{
		{"mode=foobar", `module argument "mode=foobar": unknown mode "foobar": use mode=unlimited or mode=limited=N`},
		{"mode=limited=-1", `module argument "mode=limited=-1": the limit must be a positive integer, not "-1"`},
		{"mode=single", `module argument "mode=single"`},
		{"log-level=loud", `module argument "log-level=loud": unknown log level "loud"`},
		{"pool-class=bogus", `module argument "pool-class=bogus": unknown pool class "bogus"`},
		{"bogus", `module argument "bogus": unknown argument`},
	} {
		r := e.fail(tt.want, "module", "load", "sched-simple", tt.arg)
		if !strings.Contains(r.Stderr, "load sched-simple") {
			t.Errorf("load sched-simple %s: the error does not name the module: %q", tt.arg, r.Stderr)
		}
		notLoaded("sched-simple")
	}

	// mode=limited=1: the job manager keeps one alloc request at the
	// scheduler, which (debug bit 0x2) says why it waits
	e.must("module", "load", "sched-simple", "mode=limited=1", "log-level=debug")
	if got := e.must("module", "debug", "--setbit", "0x2", "sched-simple"); got != "0x2" {
		t.Fatalf("flux module debug --setbit 0x2: %q", got)
	}
	e.waitFor("the ready message", func() bool {
		return strings.Contains(e.must("dmesg"), "ready: queue-depth=1 ")
	})
	run := e.submit("-N4", "--exclusive", testDuration("60s"), "true")
	e.waitEvent(run, "alloc")
	next := e.submit("-N4", "--exclusive", testDuration("1s"), "true")
	last := e.submit("-N4", "--exclusive", testDuration("1s"), "true")
	e.waitFor("reason_pending on the job at the scheduler", func() bool {
		return e.field(next, "{annotations.sched.reason_pending}") == "insufficient resources"
	})
	if got := e.field(next, "{annotations.sched.jobs_ahead}"); got != "0" {
		t.Errorf("jobs_ahead of the job at the scheduler: %q", got)
	}
	if got := e.field(last, "{annotations}"); got != "" && got != "{}" {
		t.Errorf("the job the job manager kept back has annotations: %q", got)
	}
	if out := e.must("queue", "status", "-v"); !strings.Contains(out, "1 alloc requests pending to scheduler") {
		t.Errorf("queue status -v in limited mode:\n%s", out)
	}
	e.must("cancel", "--all")
	e.waitEvent(run, "clean")

	// debug bit 0x1: allocations are denied
	e.must("module", "debug", "--set", "0x1", "sched-simple")
	denied := e.submit("-n1", "true")
	e.waitEvent(denied, "exception")
	if ev, ok := find(e.events(denied), "exception"); !ok || !strings.Contains(string(ev.Context), "DEBUG_FAIL_ALLOC") {
		t.Errorf("exception of a job denied with bit 0x1: %+v", ev)
	}
	if got := e.must("module", "debug", "--clear", "sched-simple"); got != "0x0" {
		t.Errorf("flux module debug --clear: %q", got)
	}

	// mode=unlimited, as t2300 reloads it, and flux-core's other arguments
	e.must("module", "reload", "sched-simple", "mode=unlimited")
	e.waitFor("ready: queue-depth=unlimited", func() bool {
		return strings.Contains(e.must("dmesg"), "ready: queue-depth=unlimited")
	})
	e.must("module", "reload", "sched-simple", "pool-class=TreePool", "test-hello-nopartial", "log-level=info")
	if out := e.must("run", "echo", "ok"); out != "ok" {
		t.Fatalf("a job under sched-simple pool-class=TreePool: %q", out)
	}

	// resource: flux-core's noverify, notruncate and monitor-force-up
	e.must("module", "remove", "sched-simple")
	e.must("module", "reload", "resource", "noverify")
	e.must("module", "reload", "resource", "monitor-force-up", "noverify", "notruncate")
	e.must("module", "remove", "resource")
	e.fail(`unknown module argument "badoption" (known: monitor-force-up, noverify, notruncate)`,
		"module", "load", "resource", "badoption")
	notLoaded("resource")
	e.must("module", "load", "resource", "noverify", "notruncate")
	e.must("module", "load", "sched-simple")
	if out := e.must("run", "-N4", "echo", "ok"); out != "ok\nok\nok\nok" {
		t.Fatalf("jobs after resource was reloaded with noverify: %q", out)
	}
}
