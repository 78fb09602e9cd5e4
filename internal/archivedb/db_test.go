package archivedb

import (
	"context"
	"database/sql"
	"path/filepath"
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
	usage TEXT NOT NULL DEFAULT '' -- per node: {"rank": {peak_memory, cpu_time}} (guest.usage)`, "eventlog TEXT NOT NULL", 1)
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
