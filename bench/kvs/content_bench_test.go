package kvs

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/contentsqlite"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"

	_ "modernc.org/sqlite"
)

// contentBlobs makes n distinct blobs of size bytes; round makes each
// call's set new, so no store is a duplicate of an earlier one.
func contentBlobs(round, n, size int) [][]byte {
	blobs := make([][]byte, n)
	x := uint32(round*n + 1)
	for i := range blobs {
		b := make([]byte, size)
		for j := range b {
			x = x*1664525 + 1013904223
			b[j] = byte(x >> 24)
		}
		copy(b, fmt.Sprintf("%d/%d;", round, i))
		blobs[i] = b
	}
	return blobs
}

// storePipelined stores blobs through h keeping window requests in
// flight, the way a busy KVS on rank 0 would.
func storePipelined(ctx context.Context, h *flux.Handle, blobs [][]byte, flags fluxcontent.Flags, window int) error {
	futures := make([]*flux.Future, 0, window)
	next := 0
	for next < len(blobs) || len(futures) > 0 {
		for next < len(blobs) && len(futures) < window {
			f, err := fluxcontent.SendStore(h, blobs[next], flags)
			if err != nil {
				return err
			}
			futures = append(futures, f)
			next++
		}
		if _, err := fluxcontent.StoreResult(futures[0].Get(ctx)); err != nil {
			return err
		}
		futures = futures[1:]
	}
	return nil
}

// rawInsert writes blobs into a fresh database at path with the schema,
// pragmas and transaction size content-sqlite uses, hashing each blob as
// the module must: the best the module could do on this machine.
func rawInsert(path string, blobs [][]byte) error {
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=locking_mode(EXCLUSIVE)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE objects (hash BLOB PRIMARY KEY, size INTEGER NOT NULL,
		encoding INTEGER NOT NULL, object BLOB)`); err != nil {
		return err
	}
	const batch = 4096
	for len(blobs) > 0 {
		n := min(batch, len(blobs))
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		st, err := tx.Prepare("INSERT OR IGNORE INTO objects (hash, size, encoding, object) VALUES (?, ?, 0, ?)")
		if err != nil {
			return err
		}
		for _, b := range blobs[:n] {
			d := sha1.Sum(b)
			if _, err := st.Exec(d[:], len(b), b); err != nil {
				return err
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			return err
		}
		blobs = blobs[n:]
	}
	return nil
}

// BenchmarkContentSQLiteStore measures, on the same blobs in the same
// run:
//
//   - cache: content.store on rank 0 (answered from memory, written back
//     by the content module), then content.flush until all of it is in
//     SQLite: the KVS's path to durable storage;
//   - backing: content-backing.store straight to content-sqlite (each
//     answer waits for the transaction holding it to commit);
//   - raw: modernc sqlite inserts with the same schema and pragmas, in
//     4096-row transactions, without any messaging.
//
// Each is reported as blobs/s; raw/cache is the price of the module.
func BenchmarkContentSQLiteStore(b *testing.B) {
	for _, size := range []int{256, 4096} {
		b.Run(fmt.Sprintf("blob=%dB", size), func(b *testing.B) {
			const n = 10000
			reg := module.NewRegistry()
			reg.Register(content.Name, content.New)
			reg.Register(contentsqlite.Name, contentsqlite.New)
			inst := brokertest.Start(b, brokertest.Options{
				Size:     1,
				Registry: reg,
				Statedir: b.TempDir(),
				Modules: []broker.ModuleSpec{
					{Name: content.Name, Args: []string{"backing-module=" + contentsqlite.Name}},
					{Name: contentsqlite.Name, Ranks: "0"},
				},
			})
			h := inst.Handle(0)
			ctx := context.Background()
			rawDir := b.TempDir()
			var cacheT, backingT, rawT time.Duration
			count, round := 0, 0
			for b.Loop() {
				blobs := contentBlobs(round, n, size)
				t0 := time.Now()
				if err := storePipelined(ctx, h, blobs, 0, 1024); err != nil {
					b.Fatal(err)
				}
				if err := fluxcontent.Flush(ctx, h); err != nil {
					b.Fatal(err)
				}
				cacheT += time.Since(t0)

				blobs = contentBlobs(round+1_000_000, n, size)
				t0 = time.Now()
				if err := storePipelined(ctx, h, blobs, fluxcontent.BypassCache, 1024); err != nil {
					b.Fatal(err)
				}
				backingT += time.Since(t0)

				t0 = time.Now()
				if err := rawInsert(filepath.Join(rawDir, fmt.Sprintf("raw%d.sqlite", round)), blobs); err != nil {
					b.Fatal(err)
				}
				rawT += time.Since(t0)
				count += n
				round++
			}
			rate := func(d time.Duration) float64 { return float64(count) / d.Seconds() }
			b.ReportMetric(rate(cacheT), "cache-blobs/s")
			b.ReportMetric(rate(backingT), "backing-blobs/s")
			b.ReportMetric(rate(rawT), "raw-blobs/s")
			b.ReportMetric(0, "ns/op")
			b.Logf("%d blobs of %d B: content.store+flush %.0f/s (%.1f MB/s), content-backing.store %.0f/s, raw modernc insert %.0f/s; raw/module %.2fx",
				count, size, rate(cacheT), rate(cacheT)*float64(size)/1e6, rate(backingT), rate(rawT), rate(rawT)/rate(cacheT))
		})
	}
}
