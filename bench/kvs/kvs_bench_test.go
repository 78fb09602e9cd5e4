package kvs

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/contentsqlite"
	kvsmod "github.com/fluxgo/fluxgo/internal/modules/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// kvsInstance starts two brokers (rank 1 is a leaf) with the real content
// store (content-sqlite in a statedir, WAL) and the kvs module.
func kvsInstance(b *testing.B) *brokertest.Instance {
	b.Helper()
	reg := module.NewRegistry()
	reg.Register(content.Name, content.New)
	reg.Register(contentsqlite.Name, contentsqlite.New)
	reg.Register(kvsmod.Name, kvsmod.New)
	statedir, err := os.MkdirTemp("", "kvsbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(statedir) })
	return brokertest.Start(b, brokertest.Options{
		Size: 2, Registry: reg, Statedir: statedir,
		Modules: []broker.ModuleSpec{
			{Name: content.Name, Ranks: "all", Args: []string{"backing-module=" + contentsqlite.Name}},
			{Name: contentsqlite.Name, Ranks: "0"},
			{Name: kvsmod.Name, Ranks: "all"},
		},
	})
}

// BenchmarkKVS measures the KVS on one machine:
//
//   - commit/writers=N: small-key commits per second at rank 0, N
//     clients each committing one key=value at a time (writer w writes
//     bench.w<w>.k<i mod 100> = i, so every commit stores new objects);
//   - eventlog-append: appends per second when a job-manager-like writer
//     commits transactions of 1000 appends, each to a different job's
//     eventlog (job.<dothex>.eventlog); a job gets 20 events in 20
//     consecutive transactions, then the next 1000 jobs take over (so
//     eventlogs stay as long as real ones); one transaction in flight,
//     and 4 in flight;
//   - lookup/rank0 and lookup/leaf: latency of a cached key lookup.
func BenchmarkKVS(b *testing.B) {
	inst := kvsInstance(b)
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("commit/writers=%d", writers), func(b *testing.B) {
			// Each figure starts with the content store caught up: what
			// the previous run left to write back would slow this one.
			flushContent(b, inst)
			benchCommits(b, inst, writers)
		})
	}
	for _, inflight := range []int{1, 4} {
		b.Run(fmt.Sprintf("eventlog-append/txn=1000/inflight=%d", inflight), func(b *testing.B) {
			benchAppends(b, inst, 1000, inflight)
		})
	}
	b.Run("lookup/rank0", func(b *testing.B) { benchLookup(b, inst, 0) })
	b.Run("lookup/leaf", func(b *testing.B) { benchLookup(b, inst, 1) })
}

// flushContent waits until rank 0's content cache has written every
// dirty blob to the backing store.
func flushContent(b *testing.B, inst *brokertest.Instance) {
	h, err := flux.Open(inst.Brokers[0].LocalURI())
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	if err := fluxcontent.Flush(context.Background(), h); err != nil {
		b.Fatal(err)
	}
}

func benchCommits(b *testing.B, inst *brokertest.Instance, writers int) {
	ctx := context.Background()
	handles := make([]*flux.Handle, writers)
	for i := range handles {
		h, err := flux.Open(inst.Brokers[0].LocalURI())
		if err != nil {
			b.Fatal(err)
		}
		handles[i] = h
	}
	defer func() {
		for _, h := range handles {
			h.Close()
		}
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h := handles[w]
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				var txn kvs.Txn
				txn.Put(fmt.Sprintf("bench.w%d.k%d", w, i%100), []byte(strconv.Itoa(i)))
				if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "commits/s")
	root, _ := kvs.GetRoot(ctx, handles[0], "")
	b.Logf("%d writers: %d commits in %v = %.0f commits/s (root sequence now %d)",
		writers, b.N, el.Round(time.Millisecond), float64(b.N)/el.Seconds(), root.Rootseq)
}

// jobKey returns the eventlog key of the n'th job, with FLUID ids as a
// job manager allocates them (100 per millisecond).
func jobKey(ts uint64, n int) string {
	id, _ := jobid.New(ts+uint64(n/100), 0, uint16(n%100))
	dh, _ := id.Encode("dothex")
	return "job." + dh + ".eventlog"
}

// benchRound keeps the job ids of successive runs apart.
var benchRound atomic.Int64

func benchAppends(b *testing.B, inst *brokertest.Instance, perTxn, inflight int) {
	ctx := context.Background()
	h := inst.Handle(0)
	ts := uint64(time.Now().UnixMilli())&(1<<40-1) + uint64(benchRound.Add(1))<<20
	event := []byte(`{"timestamp":1700000000.123456,"name":"depend","context":{"id":123}}` + "\n")
	txns := (b.N + perTxn - 1) / perTxn
	b.ResetTimer()
	start := time.Now()
	var futures []*flux.Future
	for t := 0; t < txns; t++ {
		var txn kvs.Txn
		for i := 0; i < perTxn; i++ {
			txn.Append(jobKey(ts, (t/20)*perTxn+i), event)
		}
		f, err := kvs.CommitAsync(h, "", 0, &txn)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) >= inflight {
			if _, err := futures[0].Get(ctx); err != nil {
				b.Fatal(err)
			}
			futures = futures[1:]
		}
	}
	for _, f := range futures {
		if _, err := f.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	n := txns * perTxn
	b.ReportMetric(float64(n)/el.Seconds(), "appends/s")
	b.Logf("%d appends in %d transactions of %d, %d in flight: %v = %.0f appends/s",
		n, txns, perTxn, inflight, el.Round(time.Millisecond), float64(n)/el.Seconds())
}

func benchLookup(b *testing.B, inst *brokertest.Instance, rank int) {
	ctx := context.Background()
	h0 := inst.Handle(0)
	var txn kvs.Txn
	txn.Put("lookup.key", []byte("a small value"))
	res, err := kvs.Commit(ctx, h0, "", 0, &txn)
	if err != nil {
		b.Fatal(err)
	}
	h := inst.Handle(rank)
	if err := kvs.WaitVersion(ctx, h, "", res.Rootseq); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100; i++ { // warm the cache and the connection
		kvs.Get(ctx, h, "", "lookup.key")
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := kvs.Get(ctx, h, "", "lookup.key"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	med, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(float64(med.Nanoseconds())/1e3, "median-µs")
	b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
	b.Logf("rank %d: %d lookups, median %v, p99 %v", rank, b.N, med, p99)
}
