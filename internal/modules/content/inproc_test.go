package content_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/contentsqlite"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// instance is size brokers run in this test process (so the race
// detector sees the modules), wired as flux start wires them.
type instance struct {
	t       *testing.T
	brokers []*broker.Broker
	done    []chan struct{}
}

type instOpts struct {
	size     int
	statedir string // rank 0's statedir ("" none)
	attrs    map[string]string
	noSQLite bool     // leave out content-sqlite
	args     []string // content module arguments
}

func start(t *testing.T, o instOpts) *instance {
	t.Helper()
	dir, err := os.MkdirTemp("", "fcontent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	reg := module.NewRegistry()
	reg.Register(content.Name, content.New)
	reg.Register(contentsqlite.Name, contentsqlite.New)
	mods := []broker.ModuleSpec{{Name: content.Name, Ranks: "all", Args: o.args}}
	if !o.noSQLite {
		mods[0].Args = append(mods[0].Args, "backing-module="+contentsqlite.Name)
		mods = append(mods, broker.ModuleSpec{Name: contentsqlite.Name, Ranks: "0"})
	}
	inst := &instance{t: t}
	for r := 0; r < o.size; r++ {
		cfg := broker.Config{
			Rank: uint32(r), Size: uint32(o.size), Fanout: 2,
			Rundir:         filepath.Join(dir, strconv.Itoa(r)),
			Registry:       reg,
			Modules:        mods,
			Attrs:          o.attrs,
			TBONTimeout:    5 * time.Second,
			ConnectTimeout: 10 * time.Second,
			LogStderrLevel: logLevel(),
		}
		if r == 0 {
			cfg.Statedir = o.statedir
		} else {
			cfg.ParentURI = "ipc://" + filepath.Join(dir, strconv.Itoa((r-1)/2), "tbon")
		}
		b, err := broker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		inst.brokers = append(inst.brokers, b)
		done := make(chan struct{})
		inst.done = append(inst.done, done)
		go func() {
			defer close(done)
			if _, err := b.Run(); err != nil {
				t.Errorf("broker %d: %v", r, err)
			}
		}()
	}
	// up once rank 0 has seen everyone join
	h := inst.handle(0)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var resp struct{ Value string }
		err := h.Call(ctxT(t), "attr.get", flux.NodeidAny, map[string]string{"name": "broker.state"}, &resp)
		if err == nil && resp.Value == "run" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance not up in 20s (state %q, %v)", resp.Value, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(inst.stop)
	// modules finish starting after the broker runs: wait for the
	// backing store to register
	for !o.noSQLite {
		var st struct{ Backing bool }
		if err := h.Call(ctxT(t), "content.stats-get", 0, nil, &st); err == nil && st.Backing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("content-sqlite did not register in 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return inst
}

func (inst *instance) stop() {
	select {
	case <-inst.done[0]:
		return
	default:
	}
	inst.brokers[0].Shutdown(0)
	for i, d := range inst.done {
		select {
		case <-d:
		case <-time.After(40 * time.Second):
			inst.t.Errorf("broker %d did not exit", i)
		}
	}
}

func (inst *instance) handle(rank int) *flux.Handle {
	inst.t.Helper()
	var h *flux.Handle
	var err error
	for i := 0; i < 200; i++ {
		if h, err = flux.Open(inst.brokers[rank].LocalURI()); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		inst.t.Fatal(err)
	}
	inst.t.Cleanup(func() { h.Close() })
	return h
}

func ctxT(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func blob(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("blob %d;", i)), 1+i%50)
}

// storeMany stores n blobs through h with every request in flight at
// once and returns their digests.
func storeMany(t *testing.T, h *flux.Handle, n int) [][]byte {
	t.Helper()
	fs := make([]*flux.Future, n)
	for i := range fs {
		f, err := fluxcontent.SendStore(h, blob(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = f
	}
	ds := make([][]byte, n)
	for i, f := range fs {
		d, err := fluxcontent.StoreResult(f.Get(ctxT(t)))
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		want, _ := fluxcontent.Sum("sha1", blob(i))
		if !bytes.Equal(d, want) {
			t.Fatalf("store %d: digest %x, want %x", i, d, want)
		}
		ds[i] = d
	}
	return ds
}

func loadAll(t *testing.T, h *flux.Handle, ds [][]byte, flags fluxcontent.Flags) {
	t.Helper()
	for i, d := range ds {
		got, err := fluxcontent.LoadDigest(ctxT(t), h, d, flags)
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if !bytes.Equal(got, blob(i)) {
			t.Fatalf("load %d: wrong data", i)
		}
	}
}

// testKey is the checkpoint key the tests use (the KVS owns
// fluxcontent.DefaultCheckpointKey when it is loaded).
const testKey = "content-test"

type sqliteStats struct {
	ObjectCount int64 `json:"object_count"`
}

func TestInProcessStoreLoadFlush(t *testing.T) {
	statedir := t.TempDir()
	inst := start(t, instOpts{size: 4, statedir: statedir})
	h0, h2, h3 := inst.handle(0), inst.handle(2), inst.handle(3)
	ctx := ctxT(t)

	const n = 300
	ds := storeMany(t, h3, n) // rank 3 → 1 → 0, write-through
	loadAll(t, h0, ds, 0)
	loadAll(t, h2, ds, 0) // faulted in from rank 0
	loadAll(t, h3, ds, 0)

	// store of an empty blob, and of a blob already there (squashed)
	if ref, err := fluxcontent.Store(ctx, h3, nil, 0); err != nil || ref != "sha1-da39a3ee5e6b4b0d3255bfef95601890afd80709" {
		t.Fatalf("empty blob: %q %v", ref, err)
	}
	if got, err := fluxcontent.Load(ctx, h2, "sha1-da39a3ee5e6b4b0d3255bfef95601890afd80709", 0); err != nil || len(got) != 0 {
		t.Fatalf("load empty blob: %q %v", got, err)
	}
	storeMany(t, h3, 10)

	if err := fluxcontent.Flush(ctx, h3); err != nil {
		t.Fatalf("flush from rank 3: %v", err)
	}
	var ss sqliteStats
	if err := h0.Call(ctx, "content-sqlite.stats-get", 0, nil, &ss); err != nil {
		t.Fatal(err)
	}
	if ss.ObjectCount != n+1 {
		t.Fatalf("backing store holds %d objects after flush, want %d", ss.ObjectCount, n+1)
	}
	st, err := fluxcontent.GetStats(ctx, h0)
	if err != nil || st.Dirty != 0 {
		t.Fatalf("rank 0 stats after flush: %+v %v", st, err)
	}
	// everything is durable: rank 0 may drop it all and load it back
	if err := fluxcontent.Dropcache(ctx, h0); err != nil {
		t.Fatal(err)
	}
	if st, _ := fluxcontent.GetStats(ctx, h0); st.Count != 0 {
		t.Fatalf("rank 0 holds %d entries after dropcache", st.Count)
	}
	loadAll(t, h0, ds[:20], 0)
	loadAll(t, h3, ds[:20], fluxcontent.BypassCache)

	// errors
	unknown, _ := fluxcontent.Sum("sha1", []byte("never stored"))
	for rank, h := range map[int]*flux.Handle{0: h0, 3: h3} {
		if _, err := fluxcontent.LoadDigest(ctx, h, unknown, 0); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("rank %d: load unknown: %v", rank, err)
		}
		if _, err := fluxcontent.LoadDigest(ctx, h, unknown[:7], 0); !errors.Is(err, syscall.EPROTO) {
			t.Fatalf("rank %d: load short digest: %v", rank, err)
		}
	}
}

func TestInProcessCheckpointAndRestart(t *testing.T) {
	statedir := t.TempDir()
	inst := start(t, instOpts{size: 4, statedir: statedir})
	ctx := ctxT(t)
	h3 := inst.handle(3)
	ds := storeMany(t, h3, 50)
	root, _ := fluxcontent.Format("sha1", ds[7])
	cp := fluxcontent.Checkpoint{Rootref: root, Sequence: 42, Timestamp: 1700000000.5}
	if err := fluxcontent.CheckpointPut(ctx, inst.handle(2), testKey, cp); err != nil {
		t.Fatal(err)
	}
	for _, rank := range []int{0, 3} {
		got, err := fluxcontent.CheckpointGet(ctx, inst.handle(rank), testKey)
		cp.Version = 1
		if err != nil || got != cp {
			t.Fatalf("rank %d: checkpoint get = %+v, %v; want %+v", rank, got, err, cp)
		}
	}
	if _, err := fluxcontent.CheckpointGet(ctx, h3, "no-such-key"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("unknown key: %v", err)
	}
	inst.stop() // rc3: content-sqlite flushes rank 0's cache, then exits

	inst = start(t, instOpts{size: 2, statedir: statedir})
	h1 := inst.handle(1)
	loadAll(t, h1, ds, 0)
	got, err := fluxcontent.CheckpointGet(ctxT(t), h1, testKey)
	if err != nil || got != cp {
		t.Fatalf("checkpoint after restart = %+v, %v", got, err)
	}
}

func TestInProcessNoBackingStore(t *testing.T) {
	inst := start(t, instOpts{size: 2, noSQLite: true})
	ctx := ctxT(t)
	h0, h1 := inst.handle(0), inst.handle(1)
	ds := storeMany(t, h1, 20)
	loadAll(t, h0, ds, 0)
	if err := fluxcontent.Flush(ctx, h0); !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("flush without backing store: %v", err)
	}
	// rank 0 keeps everything: dropcache drops nothing there
	fluxcontent.Dropcache(ctx, h0)
	loadAll(t, h1, ds, 0)
	raw := json.RawMessage(`{"version":1,"rootref":"sha1-da39a3ee5e6b4b0d3255bfef95601890afd80709","sequence":1,"timestamp":2}`)
	if err := fluxcontent.CheckpointPutRaw(ctx, h1, "k", raw); err != nil {
		t.Fatal(err)
	}
	got, err := fluxcontent.CheckpointGetRaw(ctx, h0, "k")
	if err != nil || string(got) != string(raw) {
		t.Fatalf("checkpoint = %s, %v", got, err)
	}
}

func TestInProcessSmallCache(t *testing.T) {
	// a 1 KiB cache on every rank: ranks > 0 keep evicting, loads still work
	inst := start(t, instOpts{size: 3, statedir: t.TempDir(), args: []string{"cache-size=1024"}})
	h2 := inst.handle(2)
	ds := storeMany(t, h2, 200)
	loadAll(t, h2, ds, 0)
	if err := fluxcontent.Flush(ctxT(t), h2); err != nil {
		t.Fatal(err)
	}
	st, err := fluxcontent.GetStats(ctxT(t), inst.handle(0))
	if err != nil || st.Size > 1024 || st.Dirty != 0 {
		t.Fatalf("rank 0 after flush: %+v %v", st, err)
	}
	loadAll(t, inst.handle(1), ds, 0)
}

// TestInProcessUnloadFlushes stops the instance while rank 0 still holds
// blobs that are not in the backing store (one store in flight at a
// time): content-sqlite's unload must get them all written.
func TestInProcessUnloadFlushes(t *testing.T) {
	statedir := t.TempDir()
	inst := start(t, instOpts{size: 1, statedir: statedir, args: []string{"flush-batch-limit=1"}})
	h := inst.handle(0)
	ds := storeMany(t, h, 2000)
	st, err := fluxcontent.GetStats(ctxT(t), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dirty at shutdown: %d of %d", st.Dirty, len(ds))
	inst.stop()

	inst = start(t, instOpts{size: 1, statedir: statedir})
	h = inst.handle(0)
	loadAll(t, h, ds, fluxcontent.BypassCache)
}

// TestInProcessCorruptRow damages a stored blob between two runs: loading
// it must fail with EIO on every rank, never return other data.
func TestInProcessCorruptRow(t *testing.T) {
	statedir := t.TempDir()
	inst := start(t, instOpts{size: 2, statedir: statedir})
	ds := storeMany(t, inst.handle(1), 3)
	inst.stop()
	ents, _ := os.ReadDir(statedir)
	for _, e := range ents {
		fi, _ := e.Info()
		t.Logf("%s %d", e.Name(), fi.Size())
	}

	db, err := sql.Open("sqlite", filepath.Join(statedir, "content.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec("UPDATE objects SET object = CAST('evil' AS BLOB), size = 4 WHERE hash = ?", ds[1])
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		var count int
		db.QueryRow("SELECT count(1) FROM objects").Scan(&count)
		t.Fatalf("damaged %d rows; the table has %d", n, count)
	}
	db.Close()

	inst = start(t, instOpts{size: 2, statedir: statedir})
	for _, rank := range []int{0, 1} {
		h := inst.handle(rank)
		if got, err := fluxcontent.LoadDigest(ctxT(t), h, ds[1], 0); !errors.Is(err, syscall.EIO) {
			t.Fatalf("rank %d: load of damaged blob = %q, %v; want EIO", rank, got, err)
		}
	}
	loadAll(t, inst.handle(1), ds[:1], 0) // the others are fine
}

// logLevel is the broker log level copied to stderr: none, unless
// FLUX_TEST_LOG is set to a syslog severity (3 = errors, 7 = debug).
func logLevel() int {
	if n, err := strconv.Atoi(os.Getenv("FLUX_TEST_LOG")); err == nil {
		return n
	}
	return -1
}

// TestInProcessDirtyLimit checks that rank 0 holds back its answers to
// stores while more than dirty-limit bytes wait for the backing store,
// and answers them once the backing store has taken the backlog down.
// The backing store is the test's: it keeps every store until released.
// It knows content-backing.store only, so rank 0 also falls back from
// store-batch requests (refused with ENOSYS) to one store per blob,
// without failing or losing any.
func TestInProcessDirtyLimit(t *testing.T) {
	inst := start(t, instOpts{size: 1, noSQLite: true, args: []string{"dirty-limit=1000"}})
	ctx := ctxT(t)

	backing := inst.handle(0)
	stores := make(chan *flux.Request, 100)
	backing.HandleFunc("content-backing.store", func(r *flux.Request) { stores <- r })
	if err := backing.RegisterService(ctx, "content-backing"); err != nil {
		t.Fatal(err)
	}
	sctx, stopServe := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); backing.Serve(sctx) }()
	t.Cleanup(func() { stopServe(); <-served })
	if err := backing.Call(ctx, "content.register-backing", 0, map[string]string{"name": "test"}, nil); err != nil {
		t.Fatal(err)
	}

	h := inst.handle(0)
	blob := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 300) }
	answered := make(chan error, 6)
	for i := 0; i < 6; i++ {
		f, err := fluxcontent.SendStore(h, blob(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := fluxcontent.StoreResult(f.Get(ctx))
			answered <- err
		}()
	}
	expect := func(n int, what string) {
		t.Helper()
		for ; n > 0; n-- {
			select {
			case err := <-answered:
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			case <-ctx.Done():
				t.Fatalf("%s: stores not answered", what)
			}
		}
		select {
		case err := <-answered:
			t.Fatalf("%s: a store was answered (%v) while the backlog is over the limit", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// 300, 600, 900 bytes dirty: answered; the fourth store takes the
	// backlog over the limit and waits, and so do those after it.
	expect(3, "over the limit")
	// the backing store gets all six (written back in the background)
	var got []*flux.Request
	for len(got) < 6 {
		select {
		case r := <-stores:
			got = append(got, r)
		case <-ctx.Done():
			t.Fatalf("backing store got %d stores", len(got))
		}
	}
	answer := func(r *flux.Request) {
		sum, _ := fluxcontent.Sum("sha1", r.Msg.Payload)
		r.RespondRaw(sum)
	}
	// 1800 → 1500 → 1200 → 900 bytes dirty: still over 750
	for _, r := range got[:3] {
		backing.Post(func() { answer(r) })
	}
	expect(0, "over three quarters of the limit")
	backing.Post(func() { answer(got[3]) }) // 600 bytes: the held stores go
	expect(3, "under three quarters of the limit")
	for _, r := range got[4:] {
		backing.Post(func() { answer(r) })
	}
	if err := fluxcontent.Flush(ctx, h); err != nil {
		t.Fatal(err)
	}
}

// TestInProcessStoreBatch stores blobs with content.store-batch on a leaf
// rank: the answer carries every digest in order once the blobs are
// written through to rank 0, the batches rank 0 writes back reach the
// backing store, and every blob loads back anywhere. Malformed batches
// and blobs over the size limit are refused, naming the blob.
func TestInProcessStoreBatch(t *testing.T) {
	inst := start(t, instOpts{size: 4, statedir: t.TempDir(), args: []string{"blob-size-limit=100000"}})
	h0, h3 := inst.handle(0), inst.handle(3)
	ctx := ctxT(t)

	const n = 2500 // more than one batch of a sender's limit
	var ds [][]byte
	var b fluxcontent.Batch
	send := func() {
		f, err := b.Send(h3, 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Get(ctx)
		got, err := fluxcontent.BatchResult(m, err, b.Len())
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, got...)
		b = fluxcontent.Batch{}
	}
	for i := 0; i < n; i++ {
		b.Add(blob(i))
		if b.Full() {
			send()
		}
	}
	send()
	for i, d := range ds {
		if want, _ := fluxcontent.Sum("sha1", blob(i)); !bytes.Equal(d, want) {
			t.Fatalf("digest %d: %x, want %x", i, d, want)
		}
	}
	// written through: rank 1, between 3 and 0, has them all
	loadAll(t, inst.handle(1), ds, 0)
	if err := fluxcontent.Flush(ctx, h0); err != nil {
		t.Fatal(err)
	}
	var ss sqliteStats
	if err := h0.Call(ctx, "content-sqlite.stats-get", 0, nil, &ss); err != nil {
		t.Fatal(err)
	}
	if ss.ObjectCount != n {
		t.Fatalf("backing store holds %d objects, want %d", ss.ObjectCount, n)
	}
	loadAll(t, h3, ds, fluxcontent.BypassCache)

	refused := func(payload []byte, errno syscall.Errno, msg string) {
		t.Helper()
		f, err := h3.RPCRaw("content.store-batch", flux.NodeidAny, payload, 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Get(ctx)
		if _, err := fluxcontent.BatchResult(m, err, 2); !errors.Is(err, errno) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("got %v, want %v mentioning %q", err, errno, msg)
		}
	}
	refused([]byte{0, 0, 0, 9, 'x'}, syscall.EPROTO, "blob 0 claims 9 bytes")
	var big fluxcontent.Batch
	big.Add([]byte("fine"))
	big.Add(make([]byte, 100001))
	f, err := big.Send(h3, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.Get(ctx)
	if _, err := fluxcontent.BatchResult(m, err, 2); !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "blob 1 of 100001 bytes") {
		t.Fatalf("oversized blob: %v", err)
	}
	// blobs attached to a request that leaves its process (a client's
	// socket here) travel as the batch payload they stand for: both are
	// stored and their digests come back
	f, err = fluxcontent.SendAttached(h3, 0, [][]byte{[]byte("a"), []byte("b")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err = f.Get(ctx)
	if digests, err := fluxcontent.BatchResult(m, err, 2); err != nil || len(digests) != 2 || bytes.Equal(digests[0], digests[1]) {
		t.Fatalf("attached blobs sent over a socket: %d digests, %v", len(digests), err)
	}
}

// TestInProcessWriteBackGathers: blobs stored one request at a time
// reach the backing store together (rank 0 lets them gather briefly
// before writing them back), and a flush does not wait for that.
func TestInProcessWriteBackGathers(t *testing.T) {
	inst := start(t, instOpts{size: 1, statedir: t.TempDir()})
	h := inst.handle(0)
	ctx := ctxT(t)
	var before struct {
		Worker struct{ Batches int } `json:"worker"`
	}
	if err := h.Call(ctx, "content-sqlite.stats-get", 0, nil, &before); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := 0; i < n; i++ {
		if _, err := fluxcontent.StoreDigest(ctx, h, blob(1000+i), 0); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	if err := fluxcontent.Flush(ctx, h); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("flush took %v", d)
	}
	var after struct {
		ObjectCount int                   `json:"object_count"`
		Worker      struct{ Batches int } `json:"worker"`
	}
	if err := h.Call(ctx, "content-sqlite.stats-get", 0, nil, &after); err != nil {
		t.Fatal(err)
	}
	if after.ObjectCount < n {
		t.Fatalf("backing store holds %d objects after the flush, want %d", after.ObjectCount, n)
	}
	// one transaction when the stores took less than writeBackDelay; a
	// few when the machine stalled; one each without the gathering
	if tx := after.Worker.Batches - before.Worker.Batches; tx > 10 {
		t.Errorf("%d blobs stored one by one took %d backing store transactions", n, tx)
	}
}
