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

// TestOperatorActsOnOthersJobs: a user with the operator role may read,
// re-prioritise (up to the default urgency), update and cancel another
// user's job, and target every user's jobs in bulk; a plain guest may do
// none of it, and the operator still may not do what is the owner's:
// expedite, wait for another's job, load jobtap plugins.
func TestOperatorActsOnOthersJobs(t *testing.T) {
	e := start(t, true)
	id := e.submit("true", 16, nil) // the owner's job (userid 0), held
	e.waitEvent(id, "priority")
	as := func(role uint32, topic string, payload map[string]any) error {
		b, _ := json.Marshal(payload)
		m := message.NewRequest(topic, flux.NodeidAny, b)
		m.Userid, m.Rolemask = 4242, role
		f, err := e.h.SendRequest(m, 0)
		if err != nil {
			return err
		}
		return f.Decode(brokertest.Ctx(t), nil)
	}
	operator, guest := message.RoleUser|message.RoleOperator, message.RoleUser
	allowed := []struct {
		topic   string
		payload map[string]any
	}{
		{"job-manager.getattr", map[string]any{"id": id, "attrs": []string{"jobspec"}}},
		{"job-manager.urgency", map[string]any{"id": id, "urgency": 10}},
		{"job-manager.update", map[string]any{"id": id, "updates": map[string]any{"attributes.system.job.name": "renamed"}}},
		{"job-manager.raiseall", map[string]any{"dry_run": true, "userid": -1, "states": 62, "type": "cancel", "severity": 0}},
		{"job-manager.raiseall", map[string]any{"dry_run": true, "userid": 0, "states": 62, "type": "cancel", "severity": 0}},
		{"job-manager.killall", map[string]any{"dry_run": true, "userid": -1, "signum": 15}},
	}
	for _, c := range allowed {
		if err := as(guest, c.topic, c.payload); !errors.Is(err, syscall.EPERM) {
			t.Errorf("guest %s %v: %v, want EPERM", c.topic, c.payload, err)
		}
		if err := as(operator, c.topic, c.payload); err != nil {
			t.Errorf("operator %s %v: %v", c.topic, c.payload, err)
		}
	}
	for _, c := range []struct {
		topic   string
		payload map[string]any
	}{
		{"job-manager.urgency", map[string]any{"id": id, "urgency": 31}},
		{"job-manager.wait", map[string]any{"id": id}},
		{"job-manager.wait", map[string]any{"id": -1}},
		{"job-manager.jobtap", map[string]any{"remove": "all"}},
	} {
		if err := as(operator, c.topic, c.payload); !errors.Is(err, syscall.EPERM) {
			t.Errorf("operator %s %v: %v, want EPERM", c.topic, c.payload, err)
		}
	}
	if err := as(guest, "job-manager.raise", map[string]any{"id": id, "type": "cancel", "severity": 0}); !errors.Is(err, syscall.EPERM) {
		t.Errorf("guest cancels the owner's job: %v, want EPERM", err)
	}
	if err := as(operator, "job-manager.raise", map[string]any{"id": id, "type": "cancel", "severity": 0, "note": "by an operator"}); err != nil {
		t.Fatalf("operator cancels the owner's job: %v", err)
	}
	e.waitEvent(id, "clean")
}
