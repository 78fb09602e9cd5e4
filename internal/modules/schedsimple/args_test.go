package schedsimple

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// TestModuleArguments: the arguments flux-core's sched-simple takes
// (and its test suite passes) are accepted with flux-core's meaning; a bad
// one is refused with an error naming it.
func TestModuleArguments(t *testing.T) {
	type want struct {
		depth, limit int
		level        string
	}
	def := want{depth: 8}
	for _, tt := range []struct {
		args []string
		want want
		err  string // "" for none; else a part of the error
	}{
		{args: nil, want: def},
		{args: []string{"mode=unlimited"}, want: want{depth: math.MaxInt}},
		{args: []string{"unlimited"}, want: want{depth: math.MaxInt}},
		{args: []string{"mode=limited=1"}, want: want{depth: 1, limit: 1}},
		{args: []string{"mode=limited=8"}, want: want{depth: 8, limit: 8}},
		{args: []string{"mode=limited=2", "mode=unlimited"}, want: want{depth: math.MaxInt}},
		{args: []string{"mode=limited=1", "log-level=debug"}, want: want{depth: 1, limit: 1, level: "debug"}},
		{args: []string{"log-level=err"}, want: want{depth: 8, level: "err"}},
		{args: []string{"queue-depth=4"}, want: want{depth: 4}},
		{args: []string{"queue-depth=unlimited"}, want: want{depth: math.MaxInt}},
		{args: []string{"pool-class=TreePool"}, want: def},
		{args: []string{"pool-class=flux.resource.TreePool"}, want: def},
		{args: []string{"pool-class=Rv1Pool:Rv1Pool"}, want: def},
		{args: []string{"test-hello-nopartial"}, want: def},
		{args: []string{"queue-policy=easy"}, want: def},
		{args: []string{"alloc-mode=first-fit"}, want: def},
		{args: []string{"alloc-mode=best-fit"}, want: def},
		{args: []string{"alloc-mode=high-id"}, want: def},
		{args: []string{"alloc-mode=locality"}, want: def},
		{args: []string{"alloc-mode=random"}, err: `module argument "alloc-mode=random": invalid request: alloc-mode "random": want worst-fit, first-fit, best-fit or high-id (or Fluxion's first, low, lonode, high, hinode, locality)`},
		{args: []string{"gpu-share=4"}, want: def},
		{args: []string{"gpu-share=0"}, err: `module argument "gpu-share=0": gpu-share="0": must be an integer from 1 (not shared) to 64`},
		{args: []string{"gpu-share=lots"}, err: `module argument "gpu-share=lots": gpu-share="lots": must be an integer from 1 (not shared) to 64`},
		{args: []string{"nic-prefer=false"}, want: def},
		{args: []string{"nic-prefer=1"}, err: `module argument "nic-prefer=1": nic-prefer="1": must be true or false`},
		{args: []string{"gpu-share"}, err: `module argument "gpu-share": gpu-share needs a value (gpu-share=VALUE)`},

		{args: []string{"mode=foobar"}, err: `module argument "mode=foobar": unknown mode "foobar"`},
		{args: []string{"mode=single"}, err: `module argument "mode=single": unknown mode "single"`},
		{args: []string{"mode="}, err: `module argument "mode=": unknown mode ""`},
		{args: []string{"mode"}, err: `module argument "mode"`},
		{args: []string{"mode=limited=-1"}, err: `module argument "mode=limited=-1": the limit must be a positive integer, not "-1"`},
		{args: []string{"mode=limited=0"}, err: `module argument "mode=limited=0"`},
		{args: []string{"mode=limited=x"}, err: `module argument "mode=limited=x"`},
		{args: []string{"mode=limited="}, err: `module argument "mode=limited="`},
		{args: []string{"log-level=loud"}, err: `module argument "log-level=loud": unknown log level "loud"`},
		{args: []string{"pool-class=Rv1Pool"}, err: `module argument "pool-class=Rv1Pool": unknown pool class`},
		{args: []string{"pool-class=bogus"}, err: `module argument "pool-class=bogus"`},
		{args: []string{"test-hello-nopartial=1"}, err: `module argument "test-hello-nopartial=1"`},
		{args: []string{"unlimited=1"}, err: `module argument "unlimited=1"`},
		{args: []string{"queue-depth"}, err: `module argument "queue-depth": queue-depth needs a value`},
		{args: []string{"queue-depth=0"}, err: `module argument "queue-depth=0"`},
		{args: []string{"queue-policy=bogus"}, err: `queue-policy="bogus"`},
		{args: []string{"bogus"}, err: `module argument "bogus": unknown argument (known: mode=unlimited, mode=limited=N`},
		{args: []string{"mode=limited=1", "policy=fcfs", "extra=1"}, err: `module argument "extra=1"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg, err := parseConfig(context.Background(), flux.NewHandle(nopConn{}), tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := want{depth: cfg.QueueDepth, limit: cfg.Limit, level: cfg.LogLevel}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestReadyPayload: limited mode tells the job manager its limit, as
// flux-core's sched-simple does; the ready message names the queue depth
// as flux-core's test suite looks for it.
func TestReadyPayload(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		want  map[string]any
		depth string
	}{
		{nil, map[string]any{"mode": "unlimited", "attached": true}, "8"},
		{[]string{"mode=unlimited"}, map[string]any{"mode": "unlimited", "attached": true}, "unlimited"},
		{[]string{"mode=limited=2"}, map[string]any{"mode": "limited", "limit": 2, "attached": true}, "2"},
	} {
		cfg, err := parseConfig(context.Background(), flux.NewHandle(nopConn{}), tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.readyPayload(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: sched-ready %v, want %v", tt.args, got, tt.want)
		}
		if got := cfg.depthString(); got != tt.depth {
			t.Errorf("%v: queue-depth=%s, want %s", tt.args, got, tt.depth)
		}
	}
}

// TestSeverityLevel: log-level=NAME keeps what the broker log shows at
// that severity and above.
func TestSeverityLevel(t *testing.T) {
	for name, want := range map[string]string{"emerg": "ERROR", "err": "ERROR", "warning": "WARN",
		"notice": "INFO", "info": "INFO", "debug": "DEBUG"} {
		sev, err := flux.ParseSeverity(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := severityLevel(sev).String(); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

// TestConfigTableKeys: alloc-mode and gpu-share may be set in the
// [sched-simple] table as well as by module argument.
func TestConfigTableKeys(t *testing.T) {
	c := DefaultConfig()
	if err := c.applyTable(map[string]any{Name: map[string]any{"alloc-mode": "high-id", "gpu-share": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	if c.Fit != sched.HighID || c.GPUShare != 2 {
		t.Errorf("from the table: fit %v, gpu-share %d", c.Fit, c.GPUShare)
	}
	if !c.NICPrefer {
		t.Error("nic-prefer is not on by default")
	}
	if err := c.applyTable(map[string]any{Name: map[string]any{"nic-prefer": false}}); err != nil || c.NICPrefer {
		t.Errorf("nic-prefer = false in the table: %v, NICPrefer %v", err, c.NICPrefer)
	}
	if err := CheckTable(map[string]any{Name: map[string]any{"nic-prefer": "sometimes"}}); err == nil || !strings.Contains(err.Error(), `nic-prefer="sometimes": must be true or false`) {
		t.Errorf("a bad nic-prefer in the table: %v", err)
	}
	err := CheckTable(map[string]any{Name: map[string]any{"alloc-mode": "random"}})
	if err == nil || !strings.Contains(err.Error(), `alloc-mode "random"`) {
		t.Errorf("a bad alloc-mode in the table: %v", err)
	}
}

// TestQueueGPUShares: each queue's gpu-share (the global one where it
// sets none) becomes a rule on the nodes it requires.
func TestQueueGPUShares(t *testing.T) {
	pol, err := policy.Parse([]byte(`{"queues": {"ml": {"requires": ["ml"], "gpu-share": 4}, "batch": {"requires": ["^ml"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.GPUShare = 2
	c.Policy = pol
	got := c.gpuShares()
	want := sched.GPUShares{Default: 2, Rules: []sched.ShareRule{
		{Name: "queues.batch", Requires: []string{"^ml"}, Share: 2},
		{Name: "queues.ml", Requires: []string{"ml"}, Share: 4},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("gpuShares = %+v, want %+v", got, want)
	}
	if policy.MaxGPUShare != sched.MaxGPUShare {
		t.Errorf("policy.MaxGPUShare %d != sched.MaxGPUShare %d", policy.MaxGPUShare, sched.MaxGPUShare)
	}
}
