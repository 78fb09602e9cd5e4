package contentsqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

func openT(t *testing.T, o Options) *Store {
	t.Helper()
	st, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// storeAll stores blobs in one transaction and returns their digests.
func storeAll(t *testing.T, st *Store, blobs ...[]byte) [][]byte {
	t.Helper()
	tx, err := st.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := tx.StoreAll(blobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ds
}

func testBlobs() [][]byte {
	return [][]byte{
		{},
		[]byte("hello"),
		bytes.Repeat([]byte("compressible "), 200),
		func() []byte { // incompressible
			b := make([]byte, 4096)
			x := uint32(7)
			for i := range b {
				x = x*1664525 + 1013904223
				b[i] = byte(x >> 24)
			}
			return b
		}(),
	}
}

func TestStoreRoundTripAndReopen(t *testing.T) {
	for _, hash := range []string{"sha1", "sha256"} {
		for _, compress := range []string{"", "deflate", "zstd", "s2"} {
			t.Run(fmt.Sprintf("%s/compress=%q", hash, compress), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "content.sqlite")
				o := Options{Path: path, Hash: hash, Compress: compress}
				st := openT(t, o)
				blobs := testBlobs()
				digests := storeAll(t, st, blobs...)
				storeAll(t, st, blobs[1]) // idempotent
				if st.Count() != int64(len(blobs)) {
					t.Fatalf("count = %d, want %d", st.Count(), len(blobs))
				}
				tx, _ := st.Begin()
				cp := json.RawMessage(`{"version":1,"rootref":"` + mustRef(t, hash, blobs[1]) + `","sequence":3,"timestamp":1.5}`)
				if err := tx.CheckpointPut("kvs-primary", cp); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}

				st = openT(t, o)
				defer st.Close()
				if st.Count() != int64(len(blobs)) {
					t.Fatalf("count after reopen = %d", st.Count())
				}
				for i, d := range digests {
					got, err := st.Load(d)
					if err != nil {
						t.Fatalf("blob %d: %v", i, err)
					}
					if !bytes.Equal(got, blobs[i]) {
						t.Fatalf("blob %d: got %d bytes, want %d", i, len(got), len(blobs[i]))
					}
				}
				tx, _ = st.Begin()
				defer tx.Rollback()
				got, err := tx.CheckpointGet("kvs-primary")
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(cp) {
					t.Fatalf("checkpoint = %s, want %s", got, cp)
				}
			})
		}
	}
}

// TestStoreAll stores more blobs than one statement holds, with
// duplicates inside a statement, across statements and of blobs stored
// before, and checks every digest and blob.
func TestStoreAll(t *testing.T) {
	for _, compress := range []string{"", "deflate", "zstd", "s2"} {
		t.Run(fmt.Sprintf("compress=%q", compress), func(t *testing.T) {
			st := openT(t, Options{Path: filepath.Join(t.TempDir(), "db"), Hash: "sha256", Compress: compress})
			defer st.Close()
			storeAll(t, st, []byte("blob 5"))
			var blobs [][]byte
			distinct := map[string]bool{}
			for i := 0; i < 2*storeRows+7; i++ {
				b := []byte(fmt.Sprintf("blob %d", i%(storeRows+3)))
				if i%5 == 0 {
					b = bytes.Repeat(b, 100) // compressible
				}
				blobs = append(blobs, b)
				distinct[string(b)] = true
			}
			distinct["blob 5"] = true
			tx, err := st.Begin()
			if err != nil {
				t.Fatal(err)
			}
			// the sender's digests for every other blob (as rank 0's
			// content cache gives them), the rest hashed here
			known := make([][]byte, len(blobs))
			for i := 0; i < len(blobs); i += 2 {
				known[i], _ = fluxcontent.Sum("sha256", blobs[i])
			}
			digests, err := tx.StoreAll(blobs, known)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if len(digests) != len(blobs) {
				t.Fatalf("%d digests for %d blobs", len(digests), len(blobs))
			}
			for i, b := range blobs {
				want, _ := fluxcontent.Sum("sha256", b)
				if !bytes.Equal(digests[i], want) {
					t.Fatalf("blob %d: digest %x, want %x", i, digests[i], want)
				}
				got, err := st.Load(digests[i])
				if err != nil || !bytes.Equal(got, b) {
					t.Fatalf("blob %d: loaded %q, %v", i, got, err)
				}
			}
			if st.Count() != int64(len(distinct)) {
				t.Fatalf("count = %d, want %d distinct blobs", st.Count(), len(distinct))
			}
		})
	}
}

func mustRef(t *testing.T, hash string, b []byte) string {
	ref, err := fluxcontent.Blobref(hash, b)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestStoreNotFound(t *testing.T) {
	st := openT(t, Options{Path: filepath.Join(t.TempDir(), "db"), Hash: "sha1"})
	defer st.Close()
	d, _ := fluxcontent.Sum("sha1", []byte("never stored"))
	if _, err := st.Load(d); !errors.Is(err, syscall.ENOENT) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("load unknown: %v", err)
	}
	if _, err := st.Load(d[:5]); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("short digest: %v", err)
	}
	tx, _ := st.Begin()
	defer tx.Rollback()
	if _, err := tx.CheckpointGet("nope"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("checkpoint get unknown: %v", err)
	}
}

// TestStoreCorruption damages rows behind the store's back: each must
// load as an EIO error, never as wrong data.
func TestStoreCorruption(t *testing.T) {
	tests := []struct {
		name   string
		update string
	}{
		{"flipped data", "UPDATE objects SET object = CAST('hellp' AS BLOB) WHERE hash = ?"},
		{"wrong size", "UPDATE objects SET size = 4 WHERE hash = ?"},
		{"unknown encoding", "UPDATE objects SET encoding = 9 WHERE hash = ?"},
		{"bad deflate", "UPDATE objects SET encoding = 1 WHERE hash = ?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "content.sqlite")
			o := Options{Path: path, Hash: "sha1"}
			st := openT(t, o)
			d := storeAll(t, st, []byte("hello"))[0]
			st.Close()

			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(tc.update, d); err != nil {
				t.Fatal(err)
			}
			raw.Close()

			st = openT(t, o)
			defer st.Close()
			got, err := st.Load(d)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("load of damaged row = %q, %v; want ErrCorrupt/EIO", got, err)
			}
		})
	}
}

func TestStoreLegacyCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.sqlite")
	st := openT(t, Options{Path: path, Hash: "sha1"})
	st.Close()
	ref := mustRef(t, "sha1", []byte("root"))
	raw, _ := sql.Open("sqlite", path)
	if _, err := raw.Exec("INSERT INTO checkpt (key, value) VALUES ('old', ?), ('bad', 'garbage')", ref); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	st = openT(t, Options{Path: path, Hash: "sha1"})
	defer st.Close()
	tx, _ := st.Begin()
	defer tx.Rollback()
	v, err := tx.CheckpointGet("old")
	if err != nil {
		t.Fatal(err)
	}
	var c fluxcontent.Checkpoint
	if err := json.Unmarshal(v, &c); err != nil || c.Version != 0 || c.Rootref != ref {
		t.Fatalf("legacy checkpoint = %s (%v)", v, err)
	}
	if _, err := tx.CheckpointGet("bad"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("garbage checkpoint: %v", err)
	}
}

func TestStoreHashMismatchRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.sqlite")
	openT(t, Options{Path: path, Hash: "sha1"}).Close()
	if _, err := Open(Options{Path: path, Hash: "sha256"}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("reopen with another hash: %v", err)
	}
	// truncate starts over, so the new algorithm is fine
	st := openT(t, Options{Path: path, Hash: "sha256", Truncate: true})
	st.Close()
}

func TestStoreExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.sqlite")
	st := openT(t, Options{Path: path, Hash: "sha1"})
	defer st.Close()
	storeAll(t, st, []byte("x")) // takes the exclusive lock
	if st2, err := Open(Options{Path: path, Hash: "sha1"}); err == nil {
		st2.Close()
		t.Fatal("a second opener of a database in use succeeded")
	}
}

func TestWorkerBatches(t *testing.T) {
	st := openT(t, Options{Path: filepath.Join(t.TempDir(), "db"), Hash: "sha1"})
	defer st.Close()
	var mu sync.Mutex
	var posted []func()
	w := startWorker(st, func(fn func()) { mu.Lock(); posted = append(posted, fn); mu.Unlock() })
	const n = 2000
	var results [n]*op
	for i := 0; i < n; i++ {
		w.enqueue(&op{kind: opStore, data: []byte(fmt.Sprint(i)), done: func(o *op) { results[i] = o }})
	}
	// a load queued after the stores sees them
	d, _ := fluxcontent.Sum("sha1", []byte("7"))
	var loaded *op
	w.enqueue(&op{kind: opLoad, data: d, done: func(o *op) { loaded = o }})
	w.stop()
	for _, fn := range posted {
		fn()
	}
	for i, o := range results {
		if o == nil || o.err != nil {
			t.Fatalf("store %d: %+v", i, o)
		}
		if want, _ := fluxcontent.Sum("sha1", []byte(fmt.Sprint(i))); !bytes.Equal(o.out, want) {
			t.Fatalf("store %d answered digest %x, want %x", i, o.out, want)
		}
	}
	if loaded == nil || loaded.err != nil || string(loaded.out) != "7" {
		t.Fatalf("load = %+v", loaded)
	}
	s := w.stats()
	if s.Batches == 0 || s.Batches >= n {
		t.Fatalf("%d batches for %d stores: no batching", s.Batches, n)
	}
	if st.Count() != n {
		t.Fatalf("count = %d", st.Count())
	}
	// after stop, operations fail at once
	var late *op
	w.enqueue(&op{kind: opLoad, data: d, done: func(o *op) { late = o }})
	if late == nil || !errors.Is(late.err, syscall.ENOSYS) {
		t.Fatalf("op after stop: %+v", late)
	}
}

// TestWorkerLoadsFirst checks that a load is not held behind the stores
// queued before it, unless one of them may store its blob.
func TestWorkerLoadsFirst(t *testing.T) {
	st := openT(t, Options{Path: filepath.Join(t.TempDir(), "db"), Hash: "sha1"})
	defer st.Close()
	old := storeAll(t, st, []byte("stored before"))[0]
	var order []string
	// not started: the queue is taken as a whole, as after a busy spell
	w := &worker{st: st, post: func(fn func()) { fn() }, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	record := func(name string) func(*op) {
		return func(o *op) {
			if o.err != nil {
				t.Errorf("%s: %v", name, o.err)
			}
			order = append(order, name)
		}
	}
	const n = 3 * maxBatch
	for i := 0; i < n; i++ {
		name := ""
		if i == 0 || i == n-1 {
			name = fmt.Sprintf("store %d", i)
		}
		done := func(*op) {}
		if name != "" {
			done = record(name)
		}
		w.enqueue(&op{kind: opStore, data: []byte(fmt.Sprint(i)), done: done})
	}
	newest, _ := fluxcontent.Sum("sha1", []byte(fmt.Sprint(n-1)))
	w.enqueue(&op{kind: opLoad, data: newest, done: record("load of a queued blob")})
	w.enqueue(&op{kind: opLoad, data: old, done: record("load of a stored blob")})
	w.closed = true
	w.run()
	want := []string{"load of a stored blob", "store 0", fmt.Sprintf("store %d", n-1), "load of a queued blob"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("completion order %q, want %q", order, want)
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args []string
		want Config
		err  bool
	}{
		{args: nil, want: Config{}},
		{args: []string{"journal_mode=DELETE", "synchronous=FULL", "compress=deflate", "truncate"},
			want: Config{JournalMode: "DELETE", Synchronous: "FULL", Compress: "deflate", Truncate: true}},
		{args: []string{"journal_mode=wal"}, err: true},
		{args: []string{"synchronous=SOMETIMES"}, err: true},
		{args: []string{"compress=lz4"}, err: true},
		{args: []string{"truncate=1"}, err: true},
		{args: []string{"cache=1"}, err: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			got, err := parseArgs(tc.args)
			if tc.err {
				if !errors.Is(err, syscall.EINVAL) {
					t.Fatalf("err = %v, want EINVAL", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestStoreOwnerOnly: the database and its journal files are readable
// by the instance owner only (they hold jobspecs and job output), even a
// database another process created with a laxer mode.
func TestStoreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "content.sqlite")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	st := openT(t, Options{Path: path, Hash: "sha1"})
	storeAll(t, st, testBlobs()...)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: others may read it", e.Name(), fi.Mode().Perm())
		}
	}
}

// TestStoreQuickCheck: quick_check runs at open unless the database was
// closed cleanly (or always with QuickCheck), and a damaged file left
// open by a crash is refused at open.
func TestStoreQuickCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.sqlite")
	o := Options{Path: path, Hash: "sha1"}
	st := openT(t, o)
	if !st.Checked() {
		t.Error("a new database was not checked")
	}
	var blobs [][]byte
	for i := 0; i < 2000; i++ {
		blobs = append(blobs, bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 300))
	}
	storeAll(t, st, blobs...)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openT(t, o)
	if st.Checked() {
		t.Error("a database closed cleanly was checked again")
	}
	st.Close()
	o.QuickCheck = true
	st = openT(t, o)
	if !st.Checked() {
		t.Error("QuickCheck did not check")
	}
	st.Close()
	o.QuickCheck = false

	// as after a crash: the mark says open
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("UPDATE meta SET value = 'open' WHERE key = 'state'"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	st = openT(t, o)
	if !st.Checked() {
		t.Error("a database not closed cleanly was not checked")
	}
	st.Close()

	// damage pages of a database a crash left open
	raw, _ = sql.Open("sqlite", path)
	raw.Exec("UPDATE meta SET value = 'open' WHERE key = 'state'")
	raw.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.Stat()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 3*8192), info.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := Open(o); err == nil {
		st.Close()
		t.Fatal("a damaged database opened")
	} else {
		t.Log(err)
	}
}
