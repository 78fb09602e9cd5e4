package joblist

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/jobinfo/kvsfake"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// syntheticRecord builds the record of an inactive job the way the
// journal would (events, jobspec and R applied).
func syntheticRecord(id jobid.ID, i int) *record {
	r := newRecord(id)
	r.setJobspec([]byte(transcriptSpec))
	base := 1796013269.0 + float64(i)*0.01
	evs := []event{
		{base, "submit", []byte(`{"userid":1000,"urgency":16,"flags":0,"version":1}`)},
		{base + 0.001, "validate", nil},
		{base + 0.002, "depend", nil},
		{base + 0.003, "priority", []byte(`{"priority":16}`)},
		{base + 0.004, "alloc", []byte(`{"annotations":{"sched":{"resource_summary":"rank0/core0"}}}`)},
		{base + 0.005, "start", nil},
		{base + 0.006, "finish", []byte(`{"status":0}`)},
		{base + 0.007, "release", []byte(`{"ranks":"all","final":true}`)},
		{base + 0.008, "free", nil},
		{base + 0.009, "clean", nil},
	}
	r.setR([]byte(transcriptR))
	for k := range evs {
		r.apply(&evs[k])
		if evs[k].Name == "alloc" {
			r.setAnnotations([]byte(`{"sched":{"resource_summary":"rank0/core0"}}`))
		}
	}
	return r
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryPerJob checks that an index of 64k inactive jobs stays
// compact (the broker's RSS target is 100 MB with 64k jobs in total).
func TestMemoryPerJob(t *testing.T) {
	if testing.Short() {
		t.Skip("64k records: skipped in -short mode")
	}
	const n = 64000
	gen, _ := jobid.NewGenerator(0, time.Now().Add(-time.Hour))
	before := heapInUse()
	x := newIndex()
	for i := 0; i < n; i++ {
		id, _ := gen.Next()
		r := syntheticRecord(id, i)
		x.jobs[id] = r
		x.inactive.add(r)
	}
	after := heapInUse()
	per := float64(after-before) / n
	t.Logf("job-list index: %d inactive jobs, %.1f MB, %.0f bytes/job", n, float64(after-before)/1e6, per)
	if per > 1024 {
		t.Fatalf("%.0f bytes per job: records are not compact", per)
	}
	// encoding every job for a full listing
	attrs, _ := parseAttrs([]string{"ntasks", "t_run", "annotations", "dependencies", "duration", "nnodes",
		"result", "t_cleanup", "priority", "urgency", "userid", "state", "nodelist", "name", "queue"})
	start := time.Now()
	var buf []byte
	recs := x.inactive.ordered()
	for i := len(recs) - 1; i >= 0; i-- {
		buf = appendJob(buf[:0], recs[i], attrs)
	}
	t.Logf("encoding %d jobs: %v", n, time.Since(start))
	runtime.KeepAlive(x)
}

// TestScale64k (FLUX_TEST_SCALE=1) restores 64k inactive jobs from the
// KVS and times listings through the broker, as flux jobs -a does.
func TestScale64k(t *testing.T) {
	if os.Getenv("FLUX_TEST_SCALE") == "" {
		t.Skip("set FLUX_TEST_SCALE=1 to run the 64k job scale test")
	}
	n := 64000
	if v, err := strconv.Atoi(os.Getenv("FLUX_TEST_SCALE")); err == nil && v > 1 {
		n = v
	}
	store := kvsfake.New()
	gen, _ := jobid.NewGenerator(0, time.Now().Add(-time.Hour))
	for i := 0; i < n; i++ {
		id, _ := gen.Next()
		base := 1796013269.0 + float64(i)*0.01
		log := strings.NewReplacer("1796013269.4", fmt.Sprintf("%.1f", base)).Replace(transcriptLog)
		putInactive(store, id, log, transcriptSpec, transcriptR)
	}
	reg := module.NewRegistry()
	reg.Register("kvs", store.KVS)
	reg.Register("job-manager", func() module.Module { return &journalOnly{} })
	reg.Register(Name, New)
	start := time.Now()
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: "job-manager"}, {Name: Name}}})
	h := inst.Handle(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req := job.ListRequest{MaxEntries: 1001, Attrs: []string{"ntasks", "t_run", "annotations", "dependencies",
		"duration", "nnodes", "result", "t_cleanup", "priority", "urgency", "userid", "state", "nodelist", "name", "queue"}}
	jobs, err := job.List(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore of %d jobs from the KVS (module load to first answer): %v", n, time.Since(start))
	if pf := os.Getenv("FLUX_TEST_PROF"); pf != "" {
		f, _ := os.Create(pf)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	for _, max := range []int{1001, 0} {
		req.MaxEntries = max
		start = time.Now()
		jobs, err = job.List(ctx, h, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("job-list.list max_entries=%d: %d jobs in %v", max, len(jobs), time.Since(start))
	}
	if len(jobs) != n {
		t.Fatalf("listed %d jobs, want %d", len(jobs), n)
	}
}

// journalOnly is a job manager that has no jobs: an empty backlog.
type journalOnly struct{}

func (*journalOnly) Name() string { return "job-manager" }
func (*journalOnly) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("job-manager.events-journal", func(r *flux.Request) {
		r.Respond(map[string]any{"id": -1, "events": []any{}})
	})
	return h.Serve(ctx)
}
