package builtin

import (
	"errors"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// limitJob is a job of ntasks one-core tasks over nnodes nodes (0: no
// node level) lasting duration seconds, in queue.
func limitJob(t *testing.T, ntasks, nnodes int, duration float64, queue string) *jobtap.Job {
	t.Helper()
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: ntasks, NNodes: nnodes})
	if err != nil {
		t.Fatal(err)
	}
	if err := js.SetDuration(duration); err != nil {
		t.Fatal(err)
	}
	if queue != "" {
		js.SetQueue(queue)
	}
	return &jobtap.Job{Jobspec: js}
}

// TestLimitMessages: rejections read as flux-core's limit plugins word
// them, naming the queue when the job has one; maxima are checked before
// minima.
func TestLimitMessages(t *testing.T) {
	size := &LimitJobSize{}
	if err := size.Load(nil, []byte(`{"max":{"nnodes":2,"ncores":4},"min":{"ncores":2},"queues":{"debug":{"max":{"nnodes":1}}}}`)); err != nil {
		t.Fatal(err)
	}
	dur := &LimitDuration{}
	if err := dur.Load(nil, []byte(`{"duration":"1h","queues":{"debug":"10m"}}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    jobtap.Validator
		job  *jobtap.Job
		want string // "" accepted
	}{
		{"nodes over", size, limitJob(t, 3, 3, 60, ""), "requested nnodes (3) exceeds policy limit of 2"},
		{"cores over", size, limitJob(t, 5, 0, 60, ""), "requested ncores (5) exceeds policy limit of 4"},
		{"cores under", size, limitJob(t, 1, 0, 60, ""), "requested ncores (1) is under policy limit of 2"},
		{"queue without limits of its own", size, limitJob(t, 1, 1, 60, "debug2"), "requested ncores (1) is under policy limit of 2 for queue debug2"},
		{"queue", size, limitJob(t, 2, 2, 60, "debug"), "requested nnodes (2) exceeds policy limit of 1 for queue debug"},
		{"size ok", size, limitJob(t, 2, 2, 60, ""), ""},
		{"duration over", dur, limitJob(t, 1, 0, 7200, ""), "requested duration (2h) exceeds policy limit of 1h"},
		{"duration unlimited", dur, limitJob(t, 1, 0, 0, "debug"), "requested duration (unlimited) exceeds policy limit of 10m for queue debug"},
		{"duration two digits", dur, limitJob(t, 1, 0, 5400, "batch"), "requested duration (1.5h) exceeds policy limit of 1h for queue batch"},
		{"duration ok", dur, limitJob(t, 1, 0, 600, "debug"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate(c.job, false)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || err.Error() != c.want):
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestLimitsHoldForOwner: flux-core applies the limits to the instance
// owner's submissions too (only the owner's updates may exceed them).
func TestLimitsHoldForOwner(t *testing.T) {
	size := &LimitJobSize{}
	if err := size.Load(nil, []byte(`{"max":{"nnodes":1}}`)); err != nil {
		t.Fatal(err)
	}
	dur := &LimitDuration{}
	if err := dur.Load(nil, []byte(`{"duration":"1h"}`)); err != nil {
		t.Fatal(err)
	}
	if err := size.Validate(limitJob(t, 2, 2, 60, ""), true); err == nil {
		t.Error("owner's 2-node job accepted under a 1-node limit")
	}
	if err := dur.Validate(limitJob(t, 1, 0, 7200, ""), true); err == nil {
		t.Error("owner's 2h job accepted under a 1h limit")
	}
	upd := &UpdateDuration{}
	if err := upd.Load(nil, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := upd.Update(limitJob(t, 1, 0, 60, ""), "attributes.system.duration", 7200.0, true); err != nil || v != (jobtap.Validated{Value: 7200.0}) {
		t.Errorf("owner's update to 2h: %v %v", v, err)
	}
}

// TestDurationUpdateRefusal: a running job's duration is the instance
// owner's to change; a guest's pending job's is checked by validation
// (the value is not vouched for), a negative one refused here.
func TestDurationUpdateRefusal(t *testing.T) {
	upd := &UpdateDuration{}
	if err := upd.Load(nil, []byte(`{"owner-allow-any":1}`)); err != nil {
		t.Fatal(err)
	}
	running := limitJob(t, 1, 0, 60, "batch")
	running.State = jobtap.StateRun
	if _, err := upd.Update(running, "attributes.system.duration", "2h", false); !errors.Is(err, syscall.EPERM) || flux.ErrorText(err) != "duration update of running job requires instance owner privileges" {
		t.Errorf("guest update of a running job: %q (%v)", flux.ErrorText(err), err)
	}
	if v, err := upd.Update(limitJob(t, 1, 0, 60, ""), "attributes.system.duration", "2h", false); err != nil || v != 7200.0 {
		t.Errorf("guest update of a pending job: %v %v (want 7200, not vouched for)", v, err)
	}
	if _, err := upd.Update(limitJob(t, 1, 0, 60, ""), "attributes.system.duration", -1.0, false); !errors.Is(err, syscall.EINVAL) || flux.ErrorText(err) != "duration must not be negative" {
		t.Errorf("negative duration: %v", err)
	}
	if err := upd.Load(nil, []byte(`{"owner-allow-any":2}`)); err == nil {
		t.Error("owner-allow-any=2 accepted")
	}
}

// TestLimitJobSizeRealloc: a running job grows only within its queue's
// maximum sizes; exempt jobs and shrinking pass.
func TestLimitJobSizeRealloc(t *testing.T) {
	size := &LimitJobSize{}
	if err := size.Load(nil, []byte(`{"max":{"nnodes":3},"queues":{"debug":{"max":{"nnodes":1}}}}`)); err != nil {
		t.Fatal(err)
	}
	j := limitJob(t, 2, 2, 60, "")
	if err := size.ReallocCheck(j, jobtap.Size{Nodes: 2, Cores: 2}, jobtap.Size{Nodes: 1}); err != nil {
		t.Errorf("growing to the limit: %v", err)
	}
	err := size.ReallocCheck(j, jobtap.Size{Nodes: 2, Cores: 2}, jobtap.Size{Nodes: 2})
	if err == nil || err.Error() != "growing the job to nnodes 4 (2 + 2) exceeds policy limit of 3" {
		t.Errorf("growing past the limit: %v", err)
	}
	dbg := limitJob(t, 1, 1, 60, "debug")
	if err := size.ReallocCheck(dbg, jobtap.Size{Nodes: 1}, jobtap.Size{Nodes: 1}); err == nil || err.Error() != "growing the job to nnodes 2 (1 + 1) exceeds policy limit of 1 for queue debug" {
		t.Errorf("the debug queue's limit: %v", err)
	}
	j.Exempt = true
	if err := size.ReallocCheck(j, jobtap.Size{Nodes: 2}, jobtap.Size{Nodes: 9}); err != nil {
		t.Errorf("an exempt job: %v", err)
	}
}
