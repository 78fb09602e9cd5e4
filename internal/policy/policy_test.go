package policy

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	c, err := Parse([]byte(`{
		"policy": {"limits": {"duration": "1h", "job-size": {"max": {"nnodes": 8}, "min": {"ncores": -1}}},
		           "jobspec": {"defaults": {"system": {"queue": "batch", "duration": "10m"}}}},
		"queues": {"batch": {"requires": ["batch"]}, "debug": {}},
		"resource": {"noverify": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Duration != "1h" || string(c.JobSize) != `{"max": {"nnodes": 8}, "min": {"ncores": -1}}` || c.DefaultQueue != "batch" {
		t.Fatalf("%+v", c)
	}
	if got := c.Requires("batch"); len(got) != 1 || got[0] != "batch" {
		t.Errorf("batch requires %v", got)
	}
	if got := c.Requires("debug"); got != nil {
		t.Errorf("debug requires %v", got)
	}
	for name, want := range map[string]string{
		"batch": "",
		"":      "a named queue is required (queues: batch, debug)",
		"nope":  "'nope' is not a valid queue (queues: batch, debug)",
	} {
		err := c.CheckQueue(name)
		if (err == nil) != (want == "") || err != nil && err.Error() != want {
			t.Errorf("CheckQueue(%q) = %v, want %q", name, err, want)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	for _, conf := range []string{``, `{}`, `{"resource": {}}`} {
		c, err := Parse([]byte(conf))
		if err != nil || c.Named() || c.Duration != "" || c.JobSize != nil || c.DefaultQueue != "" {
			t.Fatalf("%q: %+v %v", conf, c, err)
		}
		if err := c.CheckQueue(""); err != nil {
			t.Errorf("anonymous queue: %v", err)
		}
		if err := c.CheckQueue("batch"); err == nil || err.Error() != "'batch' is not a valid queue (no queues are configured)" {
			t.Errorf("named queue without queues: %v", err)
		}
	}
}

// Bad policy is refused with a message naming the key.
func TestParseErrors(t *testing.T) {
	for conf, want := range map[string]string{
		`{"policy": {"limits": {"duration": 3600}}}`:                                           "policy.limits.duration must be a string",
		`{"policy": {"limits": {"duration": "soon"}}}`:                                         "policy.limits.duration: invalid Flux standard duration",
		`{"policy": {"limits": {"job-size": {"max": {"nnodes": "8"}}}}}`:                       "policy.limits.job-size.max.nnodes must be a count",
		`{"policy": {"limits": {"job-size": {"max": {"nodes": 8}}}}}`:                          "policy.limits.job-size.max.nodes: unknown key",
		`{"policy": {"limits": {"job-size": {"most": {}}}}}`:                                   "policy.limits.job-size.most: unknown key",
		`{"queues": {"batch": 1}}`:                                                             "queues.batch must be a table",
		`{"queues": {"batch": {"requires": "batch"}}}`:                                         "queues.batch.requires must be an array",
		`{"queues": {"batch": {"requires": ["a|b"]}}}`:                                         `queues.batch.requires: property name "a|b" contains illegal character '|'`,
		`{"policy": {"jobspec": {"defaults": {"system": {"queue": "batch"}}}}}`:                `policy.jobspec.defaults.system.queue: "batch" is not a configured queue (no queues are configured)`,
		`{"queues": {"a": {}}, "policy": {"jobspec": {"defaults": {"system": {"queue": 1}}}}}`: "policy.jobspec.defaults.system.queue must be a string",
	} {
		_, err := Parse([]byte(conf))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
}

// A queue's limits replace the instance's: the duration whole, job-size
// key by key.
func TestLimits(t *testing.T) {
	c, err := Parse([]byte(`{
		"policy": {"limits": {"duration": "1h", "job-size": {"max": {"nnodes": 8, "ncores": 64}}}},
		"queues": {"debug": {"policy": {"limits": {"duration": "10m", "job-size": {"max": {"nnodes": 1}, "min": {"ncores": 2}}}}},
		           "batch": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, size := c.Limits("debug")
	if d != "10m" || size["max"]["nnodes"] != 1 || size["max"]["ncores"] != 64 || size["min"]["ncores"] != 2 {
		t.Errorf("debug: %s %v", d, size)
	}
	d, size = c.Limits("batch")
	if d != "1h" || size["max"]["nnodes"] != 8 || len(size["min"]) != 0 {
		t.Errorf("batch: %s %v", d, size)
	}
	if _, err := Parse([]byte(`{"queues": {"debug": {"policy": {"limits": {"duration": "x"}}}}}`)); err == nil ||
		!strings.Contains(err.Error(), "queues.debug.policy.limits.duration: invalid Flux standard duration") {
		t.Errorf("bad queue duration: %v", err)
	}
}

// Default time limits: the queue's, else the instance's.
func TestDefaultDuration(t *testing.T) {
	c, err := Parse([]byte(`{
		"policy": {"jobspec": {"defaults": {"system": {"duration": "1h", "queue": "batch"}}}},
		"queues": {"batch": {}, "debug": {"policy": {"jobspec": {"defaults": {"system": {"duration": "5m"}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.DefaultDurationOf("batch"); d != 3600 {
		t.Errorf("batch default %g", d)
	}
	if d := c.DefaultDurationOf("debug"); d != 300 {
		t.Errorf("debug default %g", d)
	}
	for conf, want := range map[string]string{
		`{"policy": {"jobspec": {"defaults": {"system": {"duration": "soon"}}}}}`:                  "policy.jobspec.defaults.system.duration: invalid Flux standard duration",
		`{"policy": {"jobspec": {"defaults": {"system": {"cwd": "/"}}}}}`:                          "policy.jobspec.defaults.system.cwd: unknown key",
		`{"queues": {"a": {"policy": {"jobspec": {"defaults": {"system": {"queue": "a"}}}}}}}`:     "queues.a.policy.jobspec.defaults.system.queue: only duration may be set per queue",
		`{"queues": {"a": {"policy": {"jobspec": {"defaults": {"system": {"duration": true}}}}}}}`: "queues.a.policy.jobspec.defaults.system.duration must be an FSD string",
	} {
		if _, err := Parse([]byte(conf)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
}

func TestAccess(t *testing.T) {
	conf := `{"policy":{"access":{"allow-user":["root"]}},
		"queues":{"open":{},"staff":{"policy":{"access":{"allow-group":["nosuchgroup-x"]}}}}}`
	c, err := Parse([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAccess("open", 0); err != nil {
		t.Errorf("root in allow-user: %v", err)
	}
	err = c.CheckAccess("open", 65534)
	if err == nil || !strings.Contains(err.Error(), "may not submit to queue open: not in policy.access.allow-user") {
		t.Errorf("nobody refused by the instance's table: %v", err)
	}
	// the queue's own table replaces the instance's
	err = c.CheckAccess("staff", 0)
	if err == nil || !strings.Contains(err.Error(), "queues.staff.policy.access") {
		t.Errorf("root refused by the queue's table: %v", err)
	}
	for _, bad := range []string{
		`{"policy":{"access":{"allow-user":1.0}}}`,
		`{"policy":{"access":{"allow-user":[1]}}}`,
		`{"policy":{"access":{"allow-group":[1]}}}`,
		`{"policy":{"access":{"allow-group":[""]}}}`,
		`{"policy":{"access":{"foo":1}}}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if c, err := Parse([]byte(`{"policy":{"access":{"allow-user":["alice","bob"],"allow-group":["smurfs"]}}}`)); err != nil || c.Access == nil {
		t.Errorf("well formed access (unknown names) refused: %v", err)
	}
}
