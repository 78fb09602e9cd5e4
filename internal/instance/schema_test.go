package instance

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestCheckSchema(t *testing.T) {
	for _, tc := range []struct {
		conf, err, note string
	}{
		{conf: "[policy.limits]\nduration = \"1h\"\njob-size.max.nnodes = 2\n"},
		{conf: "[policy.access]\nallow-user = [\"alice\"]\nallow-group = [\"smurfs\"]\n"},
		{conf: "[policy.scheduler]\nanything = 1\n"},
		{conf: "[queues.batch]\nrequires = [\"batch\"]\n[queues.debug.policy.limits]\nduration = \"10m\"\n"},
		{conf: "[sched-fluxion-resource]\nmatch-policy = \"lonodex\"\n", note: "[sched-fluxion-resource] table is not read"},
		{conf: "[exec]\nkill-timeout = \"10s\"\n", note: "exec.kill-timeout is a flux-core key fluxgo does not use"},
		{conf: "[ingest.validator]\nplugins = [\"jobspec\"]\n", note: "ingest.validator is a flux-core key"},
		{conf: "policy.foo = 1\n", err: "policy.foo: unknown key (known: access, jobspec, limits, scheduler)"},
		{conf: "policy.jobspec.foo = 1\n", err: "policy.jobspec.foo: unknown key"},
		{conf: "policy.jobspec.defaults.foo = 1\n", err: "policy.jobspec.defaults.foo: unknown key"},
		{conf: "policy.jobspec.defaults.system.foo = 1\n", err: "policy.jobspec.defaults.system.foo: unknown key (known: duration, queue)"},
		{conf: "policy.limits.job-size.max.foo = 1\n", err: "policy.limits.job-size.max.foo: unknown key (known: ncores, ngpus, nnodes)"},
		{conf: "policy.access.foo = 1\n", err: "policy.access.foo: unknown key"},
		{conf: "queues.x.policy.foo = 1\n", err: "queues.x.policy.foo: unknown key"},
		{conf: "queues.x.policy.jobspec.defaults.system.queue = \"x\"\n", err: "queues.x.policy.jobspec.defaults.system.queue: unknown key (known: duration)"},
		{conf: "queues = 1\n", err: "queues must be a table, not the number 1"},
		{conf: "policy.limits = \"1h\"\n", err: "policy.limits must be a table, not the string \"1h\""},
		{conf: "[Job-Shell]\ncgroup = \"off\"\n", err: "[Job-Shell]: unknown table (did you mean [job-shell]?)"},
		{conf: "[job_manager]\n", err: "did you mean [job-manager]?"},
		{conf: "[resorce]\n", err: "did you mean [resource]?"},
	} {
		var table map[string]any
		if _, err := toml.Decode(tc.conf, &table); err != nil {
			t.Fatalf("%q: %v", tc.conf, err)
		}
		notes, err := checkSchema(table)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.conf, err, tc.err)
		}
		if tc.note != "" && !strings.Contains(strings.Join(notes, "\n"), tc.note) {
			t.Errorf("%q: notes %q, want %q", tc.conf, notes, tc.note)
		}
		if tc.note == "" && len(notes) > 0 {
			t.Errorf("%q: unexpected notes %q", tc.conf, notes)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"polcy", "policy", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
