package joblist

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func snapshotRecords() []*record {
	a := newRecord(jobid.ID(1234567))
	a.TSubmit, a.TRun, a.TCleanup, a.TInactive = 1.5, 2.25, 3, 3.125
	a.priority, a.userid, a.urgency, a.ntasks, a.ncores, a.nnodes, a.Waitstatus = 16, 1001, 16, 4, 8, 2, 256
	a.State, a.Entered, a.Result = job.StateInactive, job.StateNew|job.StateRun|job.StateInactive, job.ResultFailed
	a.Submitted = true
	a.setLab(labels{name: "sim", cwd: "/home/u", queue: "batch", project: "p", bank: "b"})
	a.ranks, a.nodelist, a.annotations = "0-1", "n[0-1]", `{"user":{"x":1}}`
	b := newRecord(jobid.ID(99))
	b.State, b.Entered, b.Result, b.Success = job.StateInactive, job.StateInactive, job.ResultCompleted, true
	b.setLab(labels{name: "sim", cwd: "/home/u", queue: "batch"}) // shares strings with a
	b.ExcOccurred, b.ExcSeverity = true, 0
	b.more().excType, b.more().excNote = "cancel", "by user ƒ"
	c := newRecord(jobid.ID(1 << 60))
	c.State, c.Entered = job.StateInactive, job.StateInactive
	c.duration, c.expiration, c.TDepend = 60, 1e9, -0.5
	c.more().deps = &deps{}
	c.rare.deps.add("after:1")
	c.rare.deps.add("after:2")
	c.rare.deps.remove("after:1")
	return []*record{a, b, c}
}

func TestSnapshotRoundTrip(t *testing.T) {
	in := snapshotRecords()
	out, err := decodeSnapshot(encodeSnapshot(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d records back, want %d", len(out), len(in))
	}
	for i := range in {
		if !reflect.DeepEqual(*in[i], *out[i]) {
			t.Errorf("record %d:\n got %+v %+v\nwant %+v %+v", i, *out[i], out[i].rare, *in[i], in[i].rare)
		}
	}
	if out, err := decodeSnapshot(encodeSnapshot(nil)); err != nil || len(out) != 0 {
		t.Errorf("empty snapshot: %v %v", out, err)
	}
}

// A damaged snapshot is refused (the restore then reads the KVS), never
// half used.
func TestSnapshotDamage(t *testing.T) {
	good := encodeSnapshot(snapshotRecords())
	flip := append([]byte(nil), good...)
	flip[len(flip)/2] ^= 0x40
	active := snapshotRecords()
	active[1].State = job.StateRun
	for name, data := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("not a snapshot at all, really"), good[20:]...),
		"truncated": good[:len(good)-9],
		"bit flip":  flip,
		"active":    encodeSnapshot(active),
	} {
		if _, err := decodeSnapshot(data); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "job-list snapshot") {
			t.Errorf("%s: %v does not name the snapshot", name, err)
		}
	}
}

func FuzzSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(snapshotRecords()))
	f.Add(encodeSnapshot(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := decodeSnapshot(data)
		if err != nil {
			return
		}
		// what decodes encodes back to something that decodes the same
		again, err := decodeSnapshot(encodeSnapshot(recs))
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded snapshot: %d records, %v", len(again), err)
		}
	})
}

func BenchmarkSnapshot64k(b *testing.B) {
	base := snapshotRecords()
	recs := make([]*record, 0, 65536)
	for i := 0; i < 65536; i++ {
		r := *base[i%3]
		r.id = jobid.ID(1000 + i)
		r.TInactive += float64(i)
		recs = append(recs, &r)
	}
	data := encodeSnapshot(recs)
	b.ReportMetric(float64(len(data))/65536, "bytes/job")
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			encodeSnapshot(recs)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeSnapshot(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
