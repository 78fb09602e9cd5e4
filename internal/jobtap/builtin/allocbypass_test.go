package builtin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// bypassJob is a job whose jobspec sets key (system.alloc-bypass.R or
// system.R) to R, as an object or (asString) a JSON string.
func bypassJob(t *testing.T, key string, R json.RawMessage, asString bool, state jobtap.State) *jobtap.Job {
	t.Helper()
	js := newSpec(t)
	if key != "" {
		var v any = string(R)
		if !asString {
			var err error
			if v, err = jobspec.ParseValue(R); err != nil {
				t.Fatal(err)
			}
		}
		if err := js.SetAttribute(key, v); err != nil {
			t.Fatal(err)
		}
	}
	return &jobtap.Job{ID: 5, State: state, Jobspec: js}
}

// TestAllocBypassValidate: only the instance owner may bring an R, and
// it must be a valid R.
func TestAllocBypassValidate(t *testing.T) {
	a := &AllocBypass{}
	good := rOf("0-1", "node[0-1]")
	if err := a.Validate(bypassJob(t, "system.alloc-bypass.R", good, false, jobtap.StateNew), true); err != nil {
		t.Errorf("owner's R refused: %v", err)
	}
	if err := a.Validate(bypassJob(t, "system.R", good, true, jobtap.StateNew), true); err != nil {
		t.Errorf("owner's R (older key, as a string) refused: %v", err)
	}
	want := "alloc-bypass: only the instance owner may submit a job with its own R"
	if err := a.Validate(bypassJob(t, "system.alloc-bypass.R", good, false, jobtap.StateNew), false); err == nil || err.Error() != want {
		t.Errorf("guest's R: %v, want %q", err, want)
	}
	bad := json.RawMessage(`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["node0"]}}`)
	_, perr := rset.Parse(bad)
	if perr == nil {
		t.Fatal("the bad R parses")
	}
	want = "alloc-bypass: invalid R: " + perr.Error()
	if err := a.Validate(bypassJob(t, "system.alloc-bypass.R", bad, false, jobtap.StateNew), true); err == nil || err.Error() != want {
		t.Errorf("invalid R: %v, want %q", err, want)
	}
	if err := a.Validate(bypassJob(t, "", nil, false, jobtap.StateNew), false); err != nil {
		t.Errorf("job without R: %v", err)
	}
}

// TestAllocBypassFlagsNewJobs: a new job bringing an R gets the
// alloc-bypass flag; a restored one (past NEW) or one without R does not.
func TestAllocBypassFlagsNewJobs(t *testing.T) {
	h := newTestHost(t)
	a := &AllocBypass{}
	if err := a.Load(h, nil); err != nil {
		t.Fatal(err)
	}
	R := rOf("0", "node0")
	a.JobNew(bypassJob(t, "system.alloc-bypass.R", R, false, jobtap.StateNew))
	a.JobNew(bypassJob(t, "system.alloc-bypass.R", R, false, jobtap.StateSched))
	a.JobNew(bypassJob(t, "", nil, false, jobtap.StateNew))
	want := []postedEvent{{5, "set-flags", map[string]any{"flags": []string{"alloc-bypass"}}}}
	if !reflect.DeepEqual(h.events, want) {
		t.Errorf("events %v, want %v", h.events, want)
	}
}

// TestAllocBypassAlloc: the job's own R, re-encoded, is its allocation;
// a job without one is left to the scheduler.
func TestAllocBypassAlloc(t *testing.T) {
	a := &AllocBypass{}
	R := rOf("0-3", "node[0-3]")
	r, err := rset.Parse(R)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"system.alloc-bypass.R", "system.R"} {
		for _, asString := range []bool{false, true} {
			got, handled, err := a.Alloc(bypassJob(t, key, R, asString, jobtap.StateSched))
			if err != nil || !handled || string(got) != string(r.Encode()) {
				t.Errorf("%s (string %v): %s %v %v, want %s handled", key, asString, got, handled, err, r.Encode())
			}
		}
	}
	if got, handled, err := a.Alloc(bypassJob(t, "", nil, false, jobtap.StateSched)); got != nil || handled || err != nil {
		t.Errorf("job without R: %s %v %v, want not handled", got, handled, err)
	}
	_, handled, err := a.Alloc(bypassJob(t, "system.R", json.RawMessage(`{"version":9}`), false, jobtap.StateSched))
	if handled || err == nil || !strings.HasPrefix(err.Error(), "alloc-bypass: invalid R: ") {
		t.Errorf("invalid R: handled %v err %v", handled, err)
	}
}
