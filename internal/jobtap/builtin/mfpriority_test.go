package builtin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func mfJob(t *testing.T, id, uid uint32, bank string, urgency int, tsubmit float64) *jobtap.Job {
	js := newSpec(t)
	if err := js.SetAttribute("system.bank", bank); err != nil {
		t.Fatal(err)
	}
	return &jobtap.Job{ID: jobid.ID(id), Userid: uid, Urgency: urgency, Priority: -1, State: jobtap.StatePriority,
		TSubmit: tsubmit, Jobspec: js}
}

func TestMFPriorityHeavyBelowLight(t *testing.T) {
	h := newTestHost(t)
	p := newMFPriority()
	apply, err := p.ConfigUpdate([]byte(`{"accounting":{"priority":{"age-weight":0,"interval":"10s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if err := p.Load(h, nil); err != nil {
		t.Fatal(err)
	}
	heavy := h.addJob(mfJob(t, 1, 1001, "physics", 16, 0))
	light := h.addJob(mfJob(t, 2, 1002, "physics", 16, 0))
	p.JobState(heavy, jobtap.StateNew)
	p.JobState(light, jobtap.StateNew)
	upd := accounting.FairShareUpdate{Time: 1, Entries: []accounting.FairShareEntry{
		{Userid: 1001, Bank: "physics", Factor: 0.25}, {Userid: 1002, Bank: "physics", Factor: 1}}}
	payload, _ := json.Marshal(upd)
	if _, err := p.update(payload, 0, false); err == nil {
		t.Fatal("a guest's update was accepted")
	}
	if _, err := p.update(payload, 0, true); err != nil {
		t.Fatal(err)
	}
	if len(h.reprio) != 2 {
		t.Errorf("reprioritized %v after an update, want both pending jobs", h.reprio)
	}
	ph, _ := p.Priority(heavy)
	pl, _ := p.Priority(light)
	// 100000*0.25 and 100000*1
	if ph != 25000 || pl != 100000 {
		t.Fatalf("heavy %d light %d, want 25000 and 100000", ph, pl)
	}
	hold := mfJob(t, 3, 1002, "physics", 0, 0)
	exp := mfJob(t, 4, 1002, "physics", 31, 0)
	urg := mfJob(t, 5, 1002, "physics", 20, 0)
	if v, _ := p.Priority(hold); v != 0 {
		t.Errorf("held: %d", v)
	}
	if v, _ := p.Priority(exp); v != jobtap.PriorityMax {
		t.Errorf("expedited: %d", v)
	}
	if v, _ := p.Priority(urg); v != 104000 {
		t.Errorf("urgency 20: %d, want 100000+4*1000", v)
	}
	// unknown association: fair-share 0, kept at priority 1 at least
	if v, _ := p.Priority(mfJob(t, 6, 9, "x", 10, 0)); v != 1 {
		t.Errorf("unknown association, urgency 10: %d, want 1", v)
	}
	// explain, as the job's user and as another
	req, _ := json.Marshal(accounting.PriorityExplainRequest{ID: heavy.ID})
	if _, err := p.explainMethod(req, 1002, false); err == nil {
		t.Error("another user's job explained")
	}
	v, err := p.explainMethod(req, 1001, false)
	if err != nil {
		t.Fatal(err)
	}
	e := v.(Explanation)
	if e.Computed != 25000 || len(e.Factors) != 5 || e.Factors[0].Name != "fairshare" || e.Factors[0].Value != 0.25 {
		t.Errorf("explanation %+v", e)
	}
	// the periodic pass reprioritizes pending jobs; a running one is dropped
	heavy.State = jobtap.StateRun
	p.JobState(heavy, jobtap.StateSched)
	h.reprio = nil
	h.advance(10 * time.Second)
	if len(h.reprio) != 1 || h.reprio[0] != light.ID {
		t.Errorf("periodic pass reprioritized %v, want only %s", h.reprio, light.ID)
	}
}

func TestMFPriorityAgeAndQueue(t *testing.T) {
	p := newMFPriority()
	apply, err := p.ConfigUpdate([]byte(`{"accounting":{"priority":{"fairshare-weight":0,"age-weight":700,"age-max":"7h","queue-weight":10,"queues":{"debug":50}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	now := time.Unix(100000, 0)
	p.now = func() time.Time { return now }
	j := mfJob(t, 1, 5, "", 16, float64(now.Unix()-3600)) // 1h of 7h
	j.Jobspec.SetQueue("debug")
	if v, _ := p.Priority(j); v != 100+500 {
		t.Errorf("priority %d, want 700/7 + 10*50", v)
	}
	for _, bad := range []string{`{"age-weight":-1}`, `{"age-max":"x"}`, `{"nosuch":1}`, `{"interval":"0"}`} {
		if _, err := p.ConfigUpdate([]byte(`{"accounting":{"priority":` + bad + `}}`)); err == nil {
			t.Errorf("%s accepted", bad)
		} else if !strings.Contains(err.Error(), "accounting.priority") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
