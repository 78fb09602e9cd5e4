package archivedb

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpenAddsColumns: an archive made before the usage columns gets
// them when opened for writing; its rows read as not measured, and new
// rows keep their figures.
func TestOpenAddsColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.sqlite")
	old := strings.Replace(schema, `eventlog TEXT NOT NULL,
	peak_memory INTEGER,         -- bytes, the largest peak of any node (NULL: not measured)
	cpu_time REAL,               -- seconds of CPU, all nodes (NULL: not measured)
	usage TEXT NOT NULL DEFAULT '', -- per node: {"rank": {peak_memory, cpu_time}} (guest.usage)
	requeued_runs TEXT NOT NULL DEFAULT '' -- the runs a requeue on preemption ended: [{t_run, t_end, ncores}] (JSON; '' for none)`, "eventlog TEXT NOT NULL", 1)
	if old == schema {
		t.Fatal("the test's old schema is the current one")
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO jobs VALUES (1,'f1',0,'u','n','q','b','p','COMPLETED',0,0,'','',1,2,3,4,0,1,1,1,0,'0','h','/','{}','{}','')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path, false); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := Record{ID: 2, Jobid: "f2", Result: "COMPLETED", TRun: 2, TInactive: 4}
	r.SetUsage(`{"0":{"peak_memory":100,"cpu_time":1.5},"1":{"peak_memory":300,"cpu_time":0.5}}`)
	if _, err := Insert(ctx, db, []Record{r}); err != nil {
		t.Fatal(err)
	}
	var got []Record
	if err := Query(ctx, db, Filter{Since: 0, Until: 10}, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].PeakMemory != nil || got[0].CPUTime != nil {
		t.Fatalf("old row: %+v", got)
	}
	if g := got[1]; g.PeakMemory == nil || *g.PeakMemory != 300 || g.CPUTime == nil || *g.CPUTime != 2 {
		t.Fatalf("new row: peak %v cpu %v, want 300 and 2", g.PeakMemory, g.CPUTime)
	}
}

// TestRequeuedRuns: the runs a requeue ended, read from the eventlog
// when a job is archived, come back from a query beside the last run's
// times; a job never requeued has none.
func TestRequeuedRuns(t *testing.T) {
	log := `{"timestamp":1,"name":"submit","context":{"userid":0,"urgency":16,"flags":0,"version":1}}
{"timestamp":2,"name":"alloc"}
{"timestamp":3,"name":"start"}
{"timestamp":5,"name":"exception","context":{"type":"preempt","severity":1,"requeue":true}}
{"timestamp":6,"name":"finish","context":{"status":15}}
{"timestamp":7,"name":"free"}
{"timestamp":7,"name":"requeue","context":{"count":1}}
{"timestamp":8,"name":"alloc"}
{"timestamp":9,"name":"start"}
{"timestamp":10,"name":"exception","context":{"type":"preempt","severity":1,"requeue":true}}
{"timestamp":11,"name":"requeue","context":{"count":2}}
{"timestamp":12,"name":"alloc"}
{"timestamp":13,"name":"start"}
{"timestamp":20,"name":"finish","context":{"status":0}}
{"timestamp":21,"name":"clean"}
`
	want := []Run{{TRun: 3, TEnd: 6, Ncores: 4}, {TRun: 9, TEnd: 11, Ncores: 4}}
	if got := RequeuedRuns(log, 4); !slices.Equal(got, want) {
		t.Fatalf("RequeuedRuns: %+v, want %+v", got, want)
	}
	if got := RequeuedRuns(`{"timestamp":3,"name":"start"}`+"\n", 4); got != nil {
		t.Errorf("never requeued: %+v", got)
	}
	db, err := Open(filepath.Join(t.TempDir(), "a.sqlite"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	recs := []Record{{ID: 1, Jobid: "f1", Result: "COMPLETED", TRun: 13, TCleanup: 20, TInactive: 21, Ncores: 4, Eventlog: log},
		{ID: 2, Jobid: "f2", Result: "COMPLETED", TRun: 3, TCleanup: 4, TInactive: 5, Ncores: 1}}
	if _, err := Insert(ctx, db, recs); err != nil {
		t.Fatal(err)
	}
	var got []Record
	if err := Query(ctx, db, Filter{Since: 0, Until: 30}, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got[0].RequeuedRuns, want) || got[1].RequeuedRuns != nil {
		t.Fatalf("queried: %+v", got)
	}
}

// FuzzRequeuedRuns: any eventlog text gives runs that each end after
// they start, or none, without a panic.
func FuzzRequeuedRuns(f *testing.F) {
	f.Add(`{"timestamp":3,"name":"start"}
{"timestamp":6,"name":"finish","context":{"status":15}}
{"timestamp":7,"name":"requeue","context":{"count":1}}
`)
	f.Fuzz(func(t *testing.T, log string) {
		for _, r := range RequeuedRuns(log, 2) {
			if r.TEnd <= r.TRun || r.Ncores != 2 {
				t.Fatalf("%q: run %+v", log, r)
			}
		}
	})
}

// TestArchived: one batch query says which of many ids are archived,
// across more ids than one statement binds.
func TestArchived(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "a.sqlite"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var recs []Record
	var ids []uint64
	for id := uint64(1); id <= 2*idsPerQuery+7; id++ {
		ids = append(ids, id)
		if id%3 == 0 {
			recs = append(recs, Record{ID: id, Jobid: "f" + strings.Repeat("x", int(id%5)), Result: "COMPLETED", TInactive: float64(id)})
		}
	}
	if n, err := Insert(ctx, db, recs); err != nil || n != len(recs) {
		t.Fatalf("insert: %d, %v; want %d", n, err, len(recs))
	}
	have, err := Archived(ctx, db, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(recs) {
		t.Fatalf("%d archived, want %d", len(have), len(recs))
	}
	for _, id := range ids {
		if have[id] != (id%3 == 0) {
			t.Fatalf("job %d: archived %v, want %v", id, have[id], id%3 == 0)
		}
		if h, err := Has(ctx, db, id); err != nil || h != have[id] {
			t.Fatalf("job %d: Has %v, %v; Archived says %v", id, h, err, have[id])
		}
	}
	if have, err := Archived(ctx, db, nil); err != nil || len(have) != 0 {
		t.Fatalf("no ids: %v, %v", have, err)
	}
}
