package resource

import (
	"errors"
	"syscall"
	"testing"
)

// flux-core 0.88's answer for a 2-node instance, from
// testdata/wire/resource-list.jsonl: empty sets carry nodelist [""].
const coreSchedStatus = `{"all": {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-1"}}], "starttime": 0.0, "expiration": 0.0, "nodelist": ["vm,vm"]}}, "down": {"version": 1, "execution": {"R_lite": [], "starttime": 0.0, "expiration": 0.0, "nodelist": [""]}}, "allocated": {"version": 1, "execution": {"R_lite": [], "starttime": 0.0, "expiration": 0.0, "nodelist": [""]}}}`

func TestParseSchedStatus(t *testing.T) {
	s, err := ParseSchedStatus([]byte(coreSchedStatus))
	if err != nil {
		t.Fatal(err)
	}
	if s.All.NCores() != 4 || !s.Down.Empty() || !s.Allocated.Empty() {
		t.Fatalf("%+v", s)
	}
	for state, cores := range map[string]int{"all": 4, "up": 4, "free": 4, "down": 0, "allocated": 0} {
		r, err := s.State(state)
		if err != nil || r.NCores() != cores {
			t.Fatalf("%s: %v %v", state, r, err)
		}
	}
	if _, err := s.State("busy"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("unknown state: %v", err)
	}
	if _, err := ParseSchedStatus([]byte(`{"all": {"version": 2}}`)); err == nil {
		t.Fatal("accepted a bad R")
	}
}

func TestParseStatus(t *testing.T) {
	s, err := ParseStatus([]byte(`{"R": {"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0"}}]}},
		"online": "0-2", "offline": "3", "exclude": "", "drain": {"1-2": {"timestamp": 10.5, "reason": "x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Online.String() != "0-2" || s.Offline.String() != "3" || s.Drained().String() != "1-2" || s.Drain[2].Reason != "x" {
		t.Fatalf("%+v", s)
	}
	if _, err := ParseStatus([]byte(`{"R": {"version":1,"execution":{"R_lite":[]}}, "online": "x"}`)); err == nil {
		t.Fatal("accepted a bad idset")
	}
}
