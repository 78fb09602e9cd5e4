package jobmanager

import (
	"encoding/json"
	"errors"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// TestBulkOpsPermissions: raiseall and killall let a guest target only
// their own jobs; every user's (userid FLUX_USERID_UNKNOWN) or another
// user's jobs are the instance owner's to touch.
func TestBulkOpsPermissions(t *testing.T) {
	e := start(t, true)
	e.submit("true", 0, nil) // the owner's job (userid 0), held
	guest := func(topic string, payload map[string]any) (map[string]any, error) {
		b, _ := json.Marshal(payload)
		m := message.NewRequest(topic, flux.NodeidAny, b)
		m.Userid, m.Rolemask = 4242, message.RoleUser
		f, err := e.h.SendRequest(m, 0)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		err = f.Decode(brokertest.Ctx(t), &out)
		return out, err
	}
	for _, uid := range []int64{-1, 0xFFFFFFFF, 0} {
		if _, err := guest("job-manager.raiseall", map[string]any{"dry_run": true, "userid": uid, "states": 62, "type": "cancel", "severity": 0}); !errors.Is(err, syscall.EPERM) {
			t.Errorf("guest raiseall userid %d: %v, want EPERM", uid, err)
		}
	}
	if _, err := guest("job-manager.killall", map[string]any{"dry_run": true, "userid": -1, "signum": 15}); !errors.Is(err, syscall.EPERM) {
		t.Errorf("guest killall of every user: %v, want EPERM", err)
	}
	out, err := guest("job-manager.raiseall", map[string]any{"dry_run": false, "userid": 4242, "states": 62, "type": "cancel", "severity": 0})
	if err != nil || out["count"] != 0.0 {
		t.Errorf("guest raiseall of their own (no) jobs: %v %v", out, err)
	}
	var owner struct{ Count int }
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.raiseall", flux.NodeidAny, map[string]any{"dry_run": true, "userid": -1, "states": 62, "type": "cancel", "severity": 0}, &owner); err != nil || owner.Count != 1 {
		t.Errorf("owner raiseall dry run: %+v %v", owner, err)
	}
	if _, err := guest("job-manager.raiseall", map[string]any{"dry_run": true, "userid": 4242, "states": 64, "type": "cancel", "severity": 0}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("raiseall of inactive jobs only: %v, want EINVAL", err)
	}
}

// TestGetattr: job-manager.getattr gives a job's redacted jobspec (no
// environment); R before the job has one, or an unknown attribute, is
// ENOENT.
func TestGetattr(t *testing.T) {
	e := start(t, true) // the scheduler holds the job: it stays pending
	id := e.submit("true", 16, map[string]any{"environment": map[string]any{"SECRET": "x"}})
	e.waitEvent(id, "priority")
	var got struct {
		Jobspec map[string]any `json:"jobspec"`
	}
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.getattr", flux.NodeidAny, map[string]any{"id": id, "attrs": []string{"jobspec"}}, &got); err != nil {
		t.Fatal(err)
	}
	attrs, _ := got.Jobspec["attributes"].(map[string]any)
	sys, _ := attrs["system"].(map[string]any)
	if sys == nil || sys["environment"] != nil {
		t.Errorf("getattr jobspec system %v", sys)
	}
	for _, attr := range []string{"R", "bogus"} {
		err := e.h.Call(brokertest.Ctx(t), "job-manager.getattr", flux.NodeidAny, map[string]any{"id": id, "attrs": []string{attr}}, nil)
		if !errors.Is(err, syscall.ENOENT) {
			t.Errorf("getattr %s: %v, want ENOENT", attr, err)
		}
	}
}
