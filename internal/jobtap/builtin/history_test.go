package builtin

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// historyGet calls the plugin's history.get method.
func historyGet(t *testing.T, hp *History, payload string, userid uint32, owner bool) ([]jobid.ID, error) {
	t.Helper()
	ms := hp.Methods()
	if len(ms) != 1 || ms[0].Topic != "history.get" {
		t.Fatalf("methods %v, want history.get", ms)
	}
	out, err := ms[0].Handler(json.RawMessage(payload), userid, owner)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any)["jobs"].([]jobid.ID), nil
}

// TestHistoryNewestFirstPerUser: each user's jobs come back newest
// first, at most max of them.
func TestHistoryNewestFirstPerUser(t *testing.T) {
	hp := newHistory()
	for i, uid := range []uint32{alice, bob, alice, alice, bob} {
		hp.JobNew(&jobtap.Job{ID: jobid.ID(i + 1), Userid: uid})
	}
	for _, c := range []struct {
		payload string
		uid     uint32
		want    []jobid.ID
	}{
		{"", alice, []jobid.ID{4, 3, 1}},
		{`{}`, bob, []jobid.ID{5, 2}},
		{`{"max":2}`, alice, []jobid.ID{4, 3}},
		{`{"max":1}`, bob, []jobid.ID{5}},
		{`{"max":0}`, alice, []jobid.ID{4, 3, 1}},
		{"", 4242, []jobid.ID{}},
	} {
		got, err := historyGet(t, hp, c.payload, c.uid, false)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("user %d %s: %v %v, want %v", c.uid, c.payload, got, err, c.want)
		}
	}
}

// TestHistoryOtherUsers: only the instance owner may read another
// user's history; a malformed request is a protocol error.
func TestHistoryOtherUsers(t *testing.T) {
	hp := newHistory()
	hp.JobNew(&jobtap.Job{ID: 9, Userid: bob})
	_, err := historyGet(t, hp, `{"userid":1002}`, alice, false)
	if !errors.Is(err, syscall.EPERM) || err.Error() != "history.get: only the owner may read another user's history: operation not permitted" {
		t.Errorf("guest reading bob's history: %v", err)
	}
	if got, err := historyGet(t, hp, `{"userid":1002}`, ownerUID, true); err != nil || !reflect.DeepEqual(got, []jobid.ID{9}) {
		t.Errorf("owner reading bob's history: %v %v", got, err)
	}
	if got, err := historyGet(t, hp, `{"userid":1002}`, bob, false); err != nil || !reflect.DeepEqual(got, []jobid.ID{9}) {
		t.Errorf("bob naming himself: %v %v", got, err)
	}
	if _, err := historyGet(t, hp, `{"max":"all"}`, alice, false); !errors.Is(err, syscall.EPROTO) {
		t.Errorf("malformed request: %v, want EPROTO", err)
	}
}

// TestHistoryKeepsTheLast1000: a user's history is bounded, keeping the
// newest jobs.
func TestHistoryKeepsTheLast1000(t *testing.T) {
	hp := newHistory()
	for i := 1; i <= 1005; i++ {
		hp.JobNew(&jobtap.Job{ID: jobid.ID(i), Userid: alice})
	}
	got, err := historyGet(t, hp, "", alice, false)
	if err != nil || len(got) != 1000 || got[0] != 1005 || got[999] != 6 {
		t.Errorf("%d jobs (%v), first %v last %v: want 1005 down to 6", len(got), err, got[0], got[len(got)-1])
	}
}

// TestHistoryInactiveAdd: jobs restored at a restart join the history
// in id order among those already there, once each.
func TestHistoryInactiveAdd(t *testing.T) {
	hp := newHistory()
	hp.JobNew(&jobtap.Job{ID: 30, Userid: 5})
	for _, id := range []jobid.ID{20, 10, 20, 40} {
		hp.JobInactiveAdd(&jobtap.Job{ID: id, Userid: 5})
	}
	got := hp.byUser[5]
	if want := []jobid.ID{10, 20, 30, 40}; !slices.Equal(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
}
