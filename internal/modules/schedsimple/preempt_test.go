package schedsimple

import (
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestPreemptConfig: preempt-mode and max-requeue from the [sched-simple]
// table and module arguments, their defaults, and bad values refused
// with the key named.
func TestPreemptConfig(t *testing.T) {
	def := DefaultConfig()
	if def.PreemptMode != wire.PreemptCancel || def.MaxRequeue != DefaultMaxRequeue {
		t.Fatalf("defaults: %q %d", def.PreemptMode, def.MaxRequeue)
	}
	c := DefaultConfig()
	if err := c.applyTable(map[string]any{Name: map[string]any{"preempt-mode": "requeue", "max-requeue": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	if c.PreemptMode != wire.PreemptRequeue || c.MaxRequeue != 2 {
		t.Fatalf("from the table: %q %d", c.PreemptMode, c.MaxRequeue)
	}
	if err := c.applyArgs([]string{"preempt-mode=cancel", "max-requeue=0"}); err != nil {
		t.Fatal(err)
	}
	if c.PreemptMode != wire.PreemptCancel || c.MaxRequeue != 0 {
		t.Fatalf("from arguments: %q %d", c.PreemptMode, c.MaxRequeue)
	}
	for _, tc := range []struct {
		table map[string]any
		err   string
	}{
		{map[string]any{"preempt-mode": "suspend"}, `preempt-mode="suspend"`},
		{map[string]any{"preempt-mode": int64(1)}, `preempt-mode="1"`},
		{map[string]any{"max-requeue": int64(-1)}, "max-requeue=-1"},
		{map[string]any{"max-requeue": int64(wire.MaxRequeueLimit + 1)}, "max-requeue=1001"},
		{map[string]any{"max-requeue": "many"}, `max-requeue="many"`},
		{map[string]any{"max-requeue": 1.5}, `max-requeue="1.5"`},
	} {
		err := CheckTable(map[string]any{Name: tc.table})
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "[sched-simple]") {
			t.Errorf("%v: %v, want an error naming %s", tc.table, err, tc.err)
		}
	}
	if err := (&Config{}).applyArgs([]string{"max-requeue"}); err == nil || !strings.Contains(err.Error(), "needs a value") {
		t.Errorf("max-requeue without a value: %v", err)
	}
}

// TestPreemptModeAttr: a job's own preempt-mode is checked when it is
// submitted (the feasibility check's parse): cancel and requeue pass,
// anything else is refused naming the attribute.
func TestPreemptModeAttr(t *testing.T) {
	c := newRequestCache(nil)
	pool := testPool(t)
	spec := func(v string) []byte {
		return []byte(`{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],` +
			`"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"preempt-mode":` + v + `}}}`)
	}
	for v, bad := range map[string]bool{`"cancel"`: false, `"requeue"`: false, `"suspend"`: true, `1`: true, `null`: true} {
		e := c.parse(spec(v), pool)
		if bad != (e.err != nil) {
			t.Errorf("preempt-mode=%s: %v", v, e.err)
		}
		if bad && !strings.Contains(e.err.Error(), "attributes.system.preempt-mode") {
			t.Errorf("preempt-mode=%s: %v does not name the attribute", v, e.err)
		}
	}
}

// FuzzPreemptKey: any value of preempt-mode or max-requeue is either
// taken, leaving a valid configuration, or refused with an error.
func FuzzPreemptKey(f *testing.F) {
	for _, s := range []string{"cancel", "requeue", "0", "5", "1000", "1001", "-1", "", "0x10", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, k := range []string{"preempt-mode", "max-requeue"} {
			c := DefaultConfig()
			if err := c.setKey(k, v); err != nil {
				continue
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("%s=%q taken but invalid: %v", k, v, err)
			}
			if n, _ := strconv.Atoi(v); k == "max-requeue" && n != c.MaxRequeue {
				t.Fatalf("max-requeue=%q read as %d", v, c.MaxRequeue)
			}
		}
	})
}

// testPool is a one-node pool of two cores.
func testPool(t *testing.T) *sched.Pool {
	t.Helper()
	r, err := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}}],"nodelist":["n0"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sched.NewPoolShared(r, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
