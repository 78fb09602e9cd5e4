package builtin

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func loadSingleton(t *testing.T) (*Singleton, *testHost) {
	t.Helper()
	h := newTestHost(t)
	s := newSingleton()
	if err := s.Load(h, nil); err != nil {
		t.Fatal(err)
	}
	return s, h
}

// namedJob is a job of userid called name ("" for none), a singleton if
// asked, entering DEPEND.
func namedJob(t *testing.T, h *testHost, id jobid.ID, userid uint32, name string, singleton bool) *jobtap.Job {
	t.Helper()
	js := newSpec(t)
	if singleton {
		js = withDeps(t, "singleton")
	}
	if name != "" {
		if err := js.SetJobName(name); err != nil {
			t.Fatal(err)
		}
	}
	return h.addJob(&jobtap.Job{ID: id, Userid: userid, State: jobtap.StateDepend, Jobspec: js})
}

func depend(t *testing.T, p jobtap.DependHook, jobs ...*jobtap.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := p.JobDepend(j); err != nil {
			t.Fatalf("job %d: %v", j.ID, err)
		}
	}
}

func inactive(h *testHost, p jobtap.StateHook, id jobid.ID) {
	p.JobState(h.setJob(id, func(j *jobtap.Job) { j.State = jobtap.StateInactive }), jobtap.StateCleanup)
}

// TestSingletonRequiresJobName: a singleton without --job-name is
// refused at submission.
func TestSingletonRequiresJobName(t *testing.T) {
	s, h := loadSingleton(t)
	want := "dependency: singleton requires an explicit job name (--job-name)"
	if err := s.Validate(namedJob(t, h, 1, alice, "", true), false); err == nil || err.Error() != want {
		t.Errorf("unnamed singleton: %v, want %q", err, want)
	}
	if err := s.Validate(namedJob(t, h, 2, alice, "x", true), false); err != nil {
		t.Errorf("named singleton: %v", err)
	}
	if err := s.Validate(namedJob(t, h, 3, alice, "", false), false); err != nil {
		t.Errorf("unnamed plain job: %v", err)
	}
}

// TestSingletonRunsOneAtATimeInSubmitOrder: the first singleton of a
// user and name goes at once; later ones are held and released one by
// one, oldest first, as each predecessor ends.
func TestSingletonRunsOneAtATimeInSubmitOrder(t *testing.T) {
	s, h := loadSingleton(t)
	a, b, c := namedJob(t, h, 1, alice, "build", true), namedJob(t, h, 2, alice, "build", true), namedJob(t, h, 3, alice, "build", true)
	depend(t, s, a, b, c)
	if want := []depCall{{2, "singleton"}, {3, "singleton"}}; !reflect.DeepEqual(h.added, want) {
		t.Fatalf("added %v, want %v", h.added, want)
	}
	inactive(h, s, 1)
	if want := []depCall{{2, "singleton"}}; !reflect.DeepEqual(h.removed, want) {
		t.Fatalf("after the first ended: removed %v, want %v", h.removed, want)
	}
	inactive(h, s, 2)
	if want := []depCall{{2, "singleton"}, {3, "singleton"}}; !reflect.DeepEqual(h.removed, want) {
		t.Fatalf("after the second ended: removed %v, want %v", h.removed, want)
	}
	inactive(h, s, 3)
	if len(s.count)+len(s.held)+len(s.keys) != 0 {
		t.Errorf("state left after all ended: count %v held %v keys %v", s.count, s.held, s.keys)
	}
}

// TestSingletonWaitsForPlainJobsOfTheSameName: a job of the same name
// without the singleton dependency holds a singleton too, until it ends.
func TestSingletonWaitsForPlainJobsOfTheSameName(t *testing.T) {
	s, h := loadSingleton(t)
	p1, p2 := namedJob(t, h, 1, alice, "x", false), namedJob(t, h, 2, alice, "x", false)
	single := namedJob(t, h, 3, alice, "x", true)
	depend(t, s, p1, p2, single)
	if want := []depCall{{3, "singleton"}}; !reflect.DeepEqual(h.added, want) {
		t.Fatalf("added %v, want %v", h.added, want)
	}
	inactive(h, s, 1)
	if len(h.removed) != 0 {
		t.Fatalf("released with another job of the name still active: %v", h.removed)
	}
	inactive(h, s, 2)
	if want := []depCall{{3, "singleton"}}; !reflect.DeepEqual(h.removed, want) {
		t.Errorf("removed %v, want %v", h.removed, want)
	}
}

// TestSingletonKeyIsUserAndName: other users' jobs, other names and
// unnamed jobs do not hold a singleton.
func TestSingletonKeyIsUserAndName(t *testing.T) {
	s, h := loadSingleton(t)
	depend(t, s,
		namedJob(t, h, 1, bob, "x", false),
		namedJob(t, h, 2, alice, "y", false),
		namedJob(t, h, 3, alice, "", false),
		namedJob(t, h, 4, alice, "x", true))
	if len(h.added) != 0 {
		t.Errorf("added %v, want none", h.added)
	}
}

// TestSingletonHeldJobCanceled: a held singleton that ends leaves the
// queue; the next is released only when every other active job of the
// name is a held singleton.
func TestSingletonHeldJobCanceled(t *testing.T) {
	s, h := loadSingleton(t)
	depend(t, s, namedJob(t, h, 1, alice, "x", true), namedJob(t, h, 2, alice, "x", true), namedJob(t, h, 3, alice, "x", true))
	inactive(h, s, 2) // canceled while held
	if len(h.removed) != 0 {
		t.Fatalf("removed %v while job 1 still runs", h.removed)
	}
	inactive(h, s, 1)
	if want := []depCall{{3, "singleton"}}; !reflect.DeepEqual(h.removed, want) {
		t.Errorf("removed %v, want %v", h.removed, want)
	}
}

// TestSingletonCountsJobsRestoredPastDepend: after a job manager restart
// the jobs already past DEPEND are shown to plugins with job.new only
// (resume calls plugins.newJob); flux-core's dependency-singleton counts
// jobs in job.new, so a restored running job still holds a new
// singleton of its name.
func TestSingletonCountsJobsRestoredPastDepend(t *testing.T) {
	s, h := loadSingleton(t)
	running := namedJob(t, h, 1, alice, "x", false)
	running = h.setJob(running.ID, func(j *jobtap.Job) { j.State, j.Ran, j.Started = jobtap.StateRun, true, true })
	if nh, ok := any(s).(jobtap.NewHook); ok {
		nh.JobNew(running)
	}
	depend(t, s, namedJob(t, h, 2, alice, "x", true))
	if want := []depCall{{2, "singleton"}}; !reflect.DeepEqual(h.added, want) {
		t.Errorf("added %v, want %v: the restored running job must hold the singleton", h.added, want)
	}
}

// TestBeginTimeHoldsUntilThen: a begin-time in the future adds a
// dependency that a timer removes at that time; one in the past adds
// none.
func TestBeginTimeHoldsUntilThen(t *testing.T) {
	h := newTestHost(t)
	b := &BeginTime{}
	if err := b.Load(h, nil); err != nil {
		t.Fatal(err)
	}
	when := float64(time.Now().Add(time.Hour).Unix())
	future := h.addJob(&jobtap.Job{ID: 1, State: jobtap.StateDepend,
		Jobspec: withDeps(t, "begin-time:"+formatSeconds(when))})
	past := h.addJob(&jobtap.Job{ID: 2, State: jobtap.StateDepend, Jobspec: withDeps(t, "begin-time:1000")})
	depend(t, b, future, past)
	d := "begin-time=" + formatSeconds(when) + ".000"
	if want := []depCall{{1, d}}; !reflect.DeepEqual(h.added, want) {
		t.Fatalf("added %v, want %v", h.added, want)
	}
	h.advance(59 * time.Minute)
	if len(h.removed) != 0 {
		t.Fatalf("removed %v before the begin time", h.removed)
	}
	h.advance(2 * time.Minute)
	if want := []depCall{{1, d}}; !reflect.DeepEqual(h.removed, want) {
		t.Errorf("removed %v, want %v", h.removed, want)
	}
	bad := h.addJob(&jobtap.Job{ID: 3, State: jobtap.StateDepend, Jobspec: withDeps(t, "begin-time:soon")})
	if err := b.JobDepend(bad); err == nil || err.Error() != "Invalid begin-time=soon" {
		t.Errorf("begin-time=soon: %v", err)
	}
}

func formatSeconds(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }
