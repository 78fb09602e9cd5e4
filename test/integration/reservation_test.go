package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestAdvanceReservations: rank 1 is reserved now for an hour and rank 0
// from 8 s from now. Jobs of no reservation keep off reserved nodes for
// as long as they would run (a job without a time limit runs into every
// reservation); a reservation's jobs run only on its nodes, and only once
// it has opened; flux jobs says why they wait.
func TestAdvanceReservations(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2, Args: []string{"--config-path", conf}})}
	now := time.Now().Unix()
	text := fmt.Sprintf(`
[reservations.maint]
ranks = "1"
start = %d
duration = "1h"
users = ["nobody"]

[reservations.soon]
ranks = "0"
start = %d
duration = "1h"

[reservations.over]
ranks = "0"
start = %d
end = %d
`, now-60, now+8, now-7200, now-3600)
	if err := os.WriteFile(filepath.Join(conf, "resv.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("config", "reload")
	list := e.must("resource", "reservations")
	for _, want := range []string{"maint  active  1", "soon   future  0", "over   ended   0", "nobody"} {
		if !strings.Contains(list, want) {
			t.Errorf("flux resource reservations lacks %q:\n%s", want, list)
		}
	}
	wide := e.submit("-N2", "-t", "1m", testDuration("0.1s"), "true")
	unlimited := e.submit("-N1", testDuration("0.1s"), "true")
	short := e.submit("-N1", "-t", "1s", testDuration("0.1s"), "true")
	inMaint := e.submit("-N1", "--setattr=reservation=maint", testDuration("0.1s"), "true")
	inSoon := e.submit("-N1", "--setattr=reservation=soon", testDuration("0.1s"), "true")
	e.waitEvent(short, "clean")
	e.waitEvent(inMaint, "clean")
	if r := e.field(short, "{ranks}"); r != "0" {
		t.Errorf("the short job ran on rank %s, want 0 (rank 1 is reserved)", r)
	}
	if r := e.field(inMaint, "{ranks}"); r != "1" {
		t.Errorf("the maint job ran on rank %s, want 1", r)
	}
	for _, id := range []string{wide.String(), unlimited.String()} {
		if st := e.must("jobs", "-n", "-o", "{status_abbrev}", id); st != "S" {
			t.Errorf("job %s is %s: it would run into a reservation", id, st)
		}
	}
	if reason := e.field(inSoon, "{sched.reason_pending}"); !strings.HasPrefix(reason, "reservation soon opens at") {
		t.Errorf("the soon job waits for %q", reason)
	}
	// it opens: the timer makes a pass
	e.waitEvent(inSoon, "clean")
	if r := e.field(inSoon, "{ranks}"); r != "0" {
		t.Errorf("the soon job ran on rank %s, want 0", r)
	}
	e.fail("'nope' is not a reservation", "submit", "--setattr=reservation=nope", "true")
	e.fail("reservation 'over' ended", "submit", "--setattr=reservation=over", "true")
	e.fail("cannot run in reservation maint", "submit", "-N2", "--setattr=reservation=maint", "true")
	if canRunAsGuest(e) {
		if r := e.asGuest("submit", "--setattr=reservation=soon", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "may not use reservation 'soon'") {
			t.Errorf("a guest used a reservation not theirs: %+v", r)
		}
	}
	// the configuration drops the reservations: the waiting jobs run
	if err := os.WriteFile(filepath.Join(conf, "resv.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("config", "reload")
	e.waitEvent(wide, "clean")
	e.waitEvent(unlimited, "clean")
}
