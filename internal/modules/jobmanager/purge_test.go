package jobmanager

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestPurgeable: the oldest inactive jobs first, those the manager
// forgot beyond its memory limit included, while one is too old or too
// many remain.
func TestPurgeable(t *testing.T) {
	m := newManager(nil, nil, 0)
	m.now = func() float64 { return 1000 }
	// jobs 1-3 forgotten (inactive at 100, 200, 300), 4-6 in memory
	// (400, 500, 600)
	for i := 1; i <= 3; i++ {
		m.forgotten = append(m.forgotten, forgottenJob{id: jobid.ID(i), tInactive: float64(100 * i)})
	}
	for i := 4; i <= 6; i++ {
		j := newJob(jobid.ID(i), 0, 16, 0, 0)
		j.State, j.tInactive = jobtap.StateInactive, float64(100*i)
		m.jobs[j.ID] = j
		m.inactive = append(m.inactive, j.ID)
	}
	ids := func(lim purgeLimits, max int) []jobid.ID { return m.purgeable(lim, max) }
	want := func(got []jobid.ID, w ...jobid.ID) {
		t.Helper()
		if !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
			t.Fatalf("purgeable %v, want %v", got, w)
		}
	}
	want(ids(purgeLimits{age: -1, num: -1}, -1))
	want(ids(purgeLimits{age: -1, num: 4}, -1), 1, 2)
	want(ids(purgeLimits{age: -1, num: 0}, 2), 1, 2)
	want(ids(purgeLimits{age: 550, num: -1}, -1), 1, 2, 3, 4)     // inactive for more than 550 s
	want(ids(purgeLimits{age: 850, num: 1}, -1), 1, 2, 3, 4, 5)   // either limit
	want(ids(purgeLimits{age: 0, num: -1}, -1), 1, 2, 3, 4, 5, 6) // all

	if m.forgottenIndex(2) != 1 || m.forgottenIndex(5) != -1 {
		t.Fatalf("forgottenIndex")
	}
}

func TestPurgeConfig(t *testing.T) {
	for _, tc := range []struct {
		conf string
		want purgeLimits
		err  string
	}{
		{``, purgeLimits{-1, -1}, ""},
		{`{"job-manager":{"inactive-age-limit":"7d","inactive-num-limit":10000}}`, purgeLimits{7 * 86400, 10000}, ""},
		{`{"job-manager":{"inactive-age-limit":42}}`, purgeLimits{}, "expected a string"},
		{`{"job-manager":{"inactive-age-limit":"notfsd"}}`, purgeLimits{}, "invalid Flux standard duration"},
		{`{"job-manager":{"inactive-num-limit":-42}}`, purgeLimits{}, "must be >= 0"},
		{`{"job-manager":{"inactive-num-limit":"many"}}`, purgeLimits{}, "expected an integer"},
	} {
		got, err := purgeConfig(json.RawMessage(tc.conf))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.conf, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.conf, got, err, tc.want)
		}
	}
}
