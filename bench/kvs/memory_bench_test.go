package kvs

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// BenchmarkKVSMemory measures what the KVS and the content store keep in
// memory, and write to SQLite, per job, without the job modules: jobs
// are written as job-ingest and the job manager write them (J, jobspec
// and the submit event in one commit per 100 jobs; then 8 eventlog
// appends and R, each commit carrying one event for 100 jobs). It
// reports the Go heap still in use (after a collection) per job, once
// right after the writes and once after the KVS cache expiry has passed
// (what an instance keeps for jobs long inactive), and the content store
// written per job. The two brokers run in this process, so the heap is
// theirs plus the benchmark's. Each measurement runs once (it takes
// longer than any -benchtime).
//
//	go test -run='^$' -bench=KVSMemory ./bench/kvs
func BenchmarkKVSMemory(b *testing.B) {
	for _, n := range []int{2000, 8000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) { benchJobMemory(b, n) })
	}
}

func benchJobMemory(b *testing.B, n int) {
	inst := kvsInstance(b)
	ctx := context.Background()
	h := inst.Handle(0)
	before := liveHeap()

	ts := uint64(time.Now().UnixMilli())&(1<<40-1) + uint64(benchRound.Add(1))<<20
	keys := make([]string, n)
	for i := range keys {
		id, _ := jobid.New(ts+uint64(i/500), 0, uint16(i%500)) // 500 per ms, as a bulk submit
		dh, _ := id.Encode("dothex")
		keys[i] = "job." + dh
	}
	jobspec := []byte(`{"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1}],"label":"task"}],` +
		`"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":` +
		`{"duration":0,"cwd":"/home/user","shell":{"options":{}},"exec":{"test":{"run_duration":"0.001s"}}}},"version":1}`)
	events := []string{"submit", "validate", "depend", "priority", "alloc", "start", "finish", "release", "free"}
	const perTxn = 100
	commits := 0
	commit := func(txn *kvs.Txn) {
		if _, err := kvs.Commit(ctx, h, "", 0, txn); err != nil {
			b.Fatal(err)
		}
		commits++
	}
	t0 := time.Now()
	for lo := 0; lo < n; lo += perTxn {
		hi := min(lo+perTxn, n)
		var txn kvs.Txn
		for i := lo; i < hi; i++ {
			txn.Put(keys[i]+".J", []byte(strings.Repeat(fmt.Sprintf("signed jobspec %d;", i), 40)))
			txn.Put(keys[i]+".jobspec", jobspec)
			txn.Append(keys[i]+".eventlog", eventJSON(i, events[0]))
		}
		commit(&txn)
	}
	for e, name := range events[1:] {
		for lo := 0; lo < n; lo += perTxn {
			hi := min(lo+perTxn, n)
			var txn kvs.Txn
			for i := lo; i < hi; i++ {
				txn.Append(keys[i]+".eventlog", eventJSON(i, name))
				if e == 3 {
					txn.Put(keys[i]+".R", []byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["node0"],"starttime":0,"expiration":0}}`))
				}
			}
			commit(&txn)
		}
	}
	el := time.Since(t0)
	after := liveHeap()
	time.Sleep(12 * time.Second) // past the KVS cache expiry (10s)
	settled := liveHeap()

	var ks struct {
		Root struct {
			Rootseq int `json:"rootseq"`
		} `json:"root"`
	}
	var sq struct {
		Size int64 `json:"dbfile_size"`
	}
	call(b, h, "kvs.stats-get", &ks)
	call(b, h, "content-sqlite.stats-get", &sq)
	perJob := func(bytes uint64) float64 {
		if bytes < before {
			return 0
		}
		return float64(bytes-before) / float64(n)
	}
	b.ReportMetric(perJob(after), "heap-B/job")
	b.ReportMetric(perJob(settled), "settled-heap-B/job")
	b.ReportMetric(float64(sq.Size)/float64(n), "sqlite-B/job")
	b.Logf("%d jobs (%d commits) in %v: heap %.1f MB more after, %.1f MB more %s later; "+
		"KVS root sequence %d; content.sqlite %.1f MB",
		n, commits, el.Round(time.Millisecond), mbytes(after, before), mbytes(settled, before),
		12*time.Second, ks.Root.Rootseq, float64(sq.Size)/(1<<20))
}

func eventJSON(i int, name string) []byte {
	return []byte(fmt.Sprintf(`{"timestamp":1700000000.%06d,"name":%q,"context":{}}`+"\n", i%1000000, name))
}

// liveHeap collects garbage and returns the bytes of live heap objects.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mbytes(x, base uint64) float64 {
	if x < base {
		return 0
	}
	return float64(x-base) / (1 << 20)
}

func call(b *testing.B, h *flux.Handle, topic string, resp any) {
	if err := h.Call(context.Background(), topic, 0, nil, resp); err != nil {
		b.Fatalf("%s: %v", topic, err)
	}
}
