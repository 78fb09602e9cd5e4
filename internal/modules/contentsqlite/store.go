package contentsqlite

import (
	"bytes"
	"compress/flate"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// ErrCorrupt is the kind of errors for a stored object that does not
// decode to a blob with its digest. It matches syscall.EIO.
var ErrCorrupt = errors.New("content store: corrupt object")

// ErrNotFound is the kind of errors for an unknown digest or checkpoint
// key. They match syscall.ENOENT too.
var ErrNotFound = errors.New("not found")

// notFound names what was not found.
type notFound struct{ what string }

func (e notFound) Error() string { return e.what + ": not found" }

func (e notFound) Unwrap() []error { return []error{ErrNotFound, syscall.ENOENT} }

// Object encodings (objects.encoding).
const (
	encodingRaw     = 0
	encodingDeflate = 1
	encodingZstd    = 2
	encodingS2      = 3
	encodingS2Dict  = 4 // s2 with a dictionary (dict.go)
)

// compressThreshold: blobs smaller than this are never compressed.
const compressThreshold = 256

const schema = `
CREATE TABLE IF NOT EXISTS objects (
	hash     BLOB PRIMARY KEY,
	size     INTEGER NOT NULL,
	encoding INTEGER NOT NULL,
	object   BLOB
);
CREATE TABLE IF NOT EXISTS checkpt (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);`

// Options open a Store.
type Options struct {
	Path string // the database file
	Hash string // content hash algorithm: sha1 or sha256
	// JournalMode and Synchronous are the SQLite pragmas (WAL, NORMAL
	// when empty).
	JournalMode string
	Synchronous string
	// Compress is how blobs of compressThreshold bytes or more are
	// stored when that makes them smaller: "s2", "zstd", "deflate", or ""
	// (as they are). Every encoding is read whatever this says.
	Compress string
	// Truncate removes an existing database file first.
	Truncate bool
	// QuickCheck runs SQLite's quick_check at every open; otherwise it
	// runs only when the database was not closed cleanly last time (or
	// never was), which is when damage is most likely.
	QuickCheck bool
}

// Store is the content-sqlite database: blobs under their digest and
// checkpoints under their key. It is not safe for concurrent use; the
// module's worker goroutine owns it.
type Store struct {
	db       *sql.DB
	opts     Options
	hashSize int
	count    int64 // objects in the table
	checked  bool  // quick_check ran at open

	load, insert, cpGet, cpPut *sql.Stmt
	// insertRows inserts storeRows rows in one statement (StoreAll).
	insertRows *sql.Stmt
	// deflater and inflater are reused: a flate.Writer costs ~1 MB to
	// make, which made every compressed store 7x slower
	deflater *flate.Writer
	inflater io.ReadCloser
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	dicts    dictState
}

// storeRows is how many blobs StoreAll inserts per statement: a
// statement's own cost (its call through database/sql, bind and reset)
// is then shared, which makes a row ~20% cheaper.
const storeRows = 32

const insertRow = "INSERT OR IGNORE INTO objects (hash, size, encoding, object) VALUES (?, ?, ?, ?)"

// Open opens (creating if needed) the database at o.Path. A database
// created with another hash algorithm is refused.
func Open(o Options) (*Store, error) {
	size, err := fluxcontent.HashSize(o.Hash)
	if err != nil {
		return nil, err
	}
	if o.JournalMode == "" {
		o.JournalMode = "WAL"
	}
	if o.Synchronous == "" {
		o.Synchronous = "NORMAL"
	}
	if o.Truncate {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			if err := os.Remove(o.Path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("truncate %s: %w", o.Path, err)
			}
		}
	}
	// The store holds every job's jobspec (environment included) and
	// output: only the instance owner may read it, even where the
	// directory is open to guests (a rundir holding their socket).
	// SQLite gives its journal files the database's mode.
	f, err := os.OpenFile(o.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.Path, err)
	}
	err = f.Chmod(0o600)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("chmod %s: %w", o.Path, err)
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Chmod(o.Path+suffix, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("chmod %s: %w", o.Path+suffix, err)
		}
	}
	q := url.Values{}
	// For a new file: blobs are ~1 KiB and a commit inserts hundreds at
	// random places of the hash index; with 8 KiB pages a commit writes
	// fewer of them (~20% less time per blob than 4 KiB in a benchmark of
	// 128k blobs; 16 KiB and more write too many bytes). An existing
	// database keeps its page size.
	q.Add("_pragma", "page_size(8192)")
	// one broker at a time: a second instance on the same file fails
	q.Add("_pragma", "locking_mode(EXCLUSIVE)")
	q.Add("_pragma", "journal_mode("+o.JournalMode+")")
	q.Add("_pragma", "synchronous("+o.Synchronous+")")
	q.Add("_pragma", "busy_timeout(1000)")
	dsn := "file:" + (&url.URL{Path: o.Path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.Path, err)
	}
	db.SetMaxOpenConns(1) // the exclusive lock belongs to one connection
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	s := &Store{db: db, opts: o, hashSize: size}
	if err := s.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", o.Path, err)
	}
	return s, nil
}

func (s *Store) init() error {
	ctx := context.Background()
	// quick_check reads every page (0.6 s for 390k objects): after a
	// clean close, which marks the database "closed", nothing has written
	// it since, and a damaged row read later is still an EIO error (every
	// blob is hashed as it is read), never wrong data.
	var state string
	err := s.db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'state'").Scan(&state)
	if s.opts.QuickCheck || err != nil || state != "closed" {
		var check string
		if err := s.db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil {
			return err
		}
		if check != "ok" {
			return fmt.Errorf("%w: quick_check: %s: %w", ErrCorrupt, check, syscall.EIO)
		}
		s.checked = true
	}
	if _, err := s.db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, "INSERT OR REPLACE INTO meta (key, value) VALUES ('state', 'open')"); err != nil {
		return fmt.Errorf("mark the database open: %w", err)
	}
	var hash string
	err = s.db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'hash'").Scan(&hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := s.db.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES ('hash', ?)", s.opts.Hash); err != nil {
			return fmt.Errorf("record hash algorithm: %w", err)
		}
	case err != nil:
		return err
	case hash != s.opts.Hash:
		return fmt.Errorf("database holds %s digests but content.hash is %s: %w", hash, s.opts.Hash, syscall.EINVAL)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT count(1) FROM objects").Scan(&s.count); err != nil {
		return err
	}
	if err := s.loadDicts(ctx); err != nil {
		return err
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.load, "SELECT size, encoding, object FROM objects WHERE hash = ?"},
		{&s.insert, insertRow},
		{&s.insertRows, insertRow + strings.Repeat(", (?, ?, ?, ?)", storeRows-1)},
		{&s.cpGet, "SELECT value FROM checkpt WHERE key = ?"},
		{&s.cpPut, "INSERT OR REPLACE INTO checkpt (key, value) VALUES (?, ?)"},
	} {
		st, err := s.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = st
	}
	return nil
}

// Close closes the database, marked closed cleanly (the next open skips
// quick_check).
func (s *Store) Close() error {
	for _, st := range []*sql.Stmt{s.load, s.insert, s.insertRows, s.cpGet, s.cpPut} {
		if st != nil {
			st.Close()
		}
	}
	_, err := s.db.Exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('state', 'closed')")
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Checked reports whether quick_check ran at open.
func (s *Store) Checked() bool { return s.checked }

// Count returns the number of stored objects.
func (s *Store) Count() int64 { return s.count }

// Path returns the database file.
func (s *Store) Path() string { return s.opts.Path }

// Tx is a group of operations committed together.
type Tx struct {
	s       *Store
	tx      *sql.Tx
	load    *sql.Stmt
	insert  *sql.Stmt
	rows    *sql.Stmt // insertRows, prepared for this transaction when first used
	args    []any
	cpGet   *sql.Stmt
	cpPut   *sql.Stmt
	added   int64
	scratch bytes.Buffer
	// dictionaries made in this transaction (dict.go): the last one's
	// id, and the store's current one and its use before them
	madeDict, prevDict uint64
	prevUsed           int
	dictBuf            []byte // dictEncode's scratch
}

// Begin starts a transaction.
func (s *Store) Begin() (*Tx, error) {
	tx, err := s.db.Begin()
	if err != nil {
		return nil, fmt.Errorf("begin: %w", sqliteErrno(err))
	}
	return &Tx{s: s, tx: tx,
		load: tx.Stmt(s.load), insert: tx.Stmt(s.insert),
		cpGet: tx.Stmt(s.cpGet), cpPut: tx.Stmt(s.cpPut)}, nil
}

// Commit makes the transaction's writes durable (as the synchronous
// pragma allows).
func (t *Tx) Commit() error {
	if err := t.tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", sqliteErrno(err))
	}
	t.s.count += t.added
	return nil
}

// Rollback abandons the transaction.
func (t *Tx) Rollback() {
	t.tx.Rollback()
	t.undoDicts()
}

// StoreAll adds the blobs (those not already there) and returns their
// digests, in order. known, if not nil, holds digests computed by the
// blobs' sender (nil or of the wrong size: computed here). On error none
// of them may be stored.
func (t *Tx) StoreAll(blobs, known [][]byte) ([][]byte, error) {
	digests := make([][]byte, len(blobs))
	for i, data := range blobs {
		if known != nil && len(known[i]) == t.s.hashSize {
			digests[i] = known[i]
			continue
		}
		d, err := fluxcontent.Sum(t.s.opts.Hash, data)
		if err != nil {
			return nil, err
		}
		digests[i] = d
	}
	i := 0
	for ; len(blobs)-i >= storeRows; i += storeRows {
		if t.rows == nil {
			t.rows = t.tx.Stmt(t.s.insertRows)
		}
		t.args = t.args[:0]
		for k := i; k < i+storeRows; k++ {
			t.args = t.appendRow(t.args, digests[k], blobs[k])
		}
		if err := t.exec(t.rows, t.args); err != nil {
			return nil, err
		}
	}
	for ; i < len(blobs); i++ {
		t.args = t.appendRow(t.args[:0], digests[i], blobs[i])
		if err := t.exec(t.insert, t.args); err != nil {
			return nil, err
		}
	}
	clear(t.args) // the blobs are not the transaction's to keep
	return digests, nil
}

// appendRow appends the columns of the row storing data under digest.
func (t *Tx) appendRow(args []any, digest, data []byte) []any {
	obj, enc := data, encodingRaw
	if len(data) >= compressThreshold {
		switch t.s.opts.Compress {
		case "deflate":
			if z, ok := t.deflate(data); ok {
				obj, enc = z, encodingDeflate
			}
		case "zstd":
			if z, ok := t.s.zstdEncode(data); ok {
				obj, enc = z, encodingZstd
			}
		case "s2":
			if z, smaller, tried := t.dictEncode(data); smaller {
				obj, enc = z, encodingS2Dict
			} else if tried {
				break // stored as it is
			} else if z := s2.Encode(nil, data); len(z) < len(data) {
				obj, enc = z, encodingS2
			}
		}
	}
	if obj == nil {
		obj = []byte{} // an empty blob is an empty BLOB, not NULL
	}
	return append(args, digest, len(data), enc, obj)
}

// exec runs an insert and counts the rows it added.
func (t *Tx) exec(st *sql.Stmt, args []any) error {
	res, err := st.Exec(args...)
	if err != nil {
		return fmt.Errorf("store: %w", sqliteErrno(err))
	}
	if n, err := res.RowsAffected(); err == nil {
		t.added += n
	}
	return nil
}

func (t *Tx) deflate(data []byte) ([]byte, bool) {
	t.scratch.Reset()
	w := t.s.deflater
	if w == nil {
		w, _ = flate.NewWriter(&t.scratch, flate.BestSpeed)
		t.s.deflater = w
	} else {
		w.Reset(&t.scratch)
	}
	w.Write(data)
	if w.Close() != nil || t.scratch.Len() >= len(data) {
		return nil, false
	}
	return bytes.Clone(t.scratch.Bytes()), true
}

// Load returns the blob with the given digest, checking that it hashes
// to the digest.
func (t *Tx) Load(digest []byte) ([]byte, error) {
	return t.s.loadWith(t.load, digest)
}

// Load returns the blob with the given digest outside a transaction.
func (s *Store) Load(digest []byte) ([]byte, error) {
	return s.loadWith(s.load, digest)
}

func (s *Store) loadWith(st *sql.Stmt, digest []byte) ([]byte, error) {
	if len(digest) != s.hashSize {
		return nil, fmt.Errorf("load: digest has %d bytes, want %d (%s): %w",
			len(digest), s.hashSize, s.opts.Hash, syscall.EPROTO)
	}
	var (
		size int64
		enc  int
		obj  []byte
	)
	err := st.QueryRow(digest).Scan(&size, &enc, &obj)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound{s.blobref(digest)}
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", s.blobref(digest), sqliteErrno(err))
	}
	data, err := s.decode(enc, obj, size)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v: %w", ErrCorrupt, s.blobref(digest), err, syscall.EIO)
	}
	sum, _ := fluxcontent.Sum(s.opts.Hash, data)
	if !bytes.Equal(sum, digest) {
		return nil, fmt.Errorf("%w %s: its data hashes to %x: %w", ErrCorrupt, s.blobref(digest), sum, syscall.EIO)
	}
	return data, nil
}

func (s *Store) decode(enc int, obj []byte, size int64) ([]byte, error) {
	var data []byte
	switch enc {
	case encodingRaw:
		data = obj
	case encodingDeflate:
		if s.inflater == nil {
			s.inflater = flate.NewReader(bytes.NewReader(obj))
		} else if err := s.inflater.(flate.Resetter).Reset(bytes.NewReader(obj), nil); err != nil {
			return nil, fmt.Errorf("inflate: %v", err)
		}
		r := s.inflater
		var err error
		data, err = io.ReadAll(io.LimitReader(r, size+1))
		if err != nil {
			return nil, fmt.Errorf("inflate: %v", err)
		}
	case encodingS2:
		n, err := s2.DecodedLen(obj)
		if err != nil || int64(n) != size {
			return nil, fmt.Errorf("s2: decoded length %d, recorded size %d (%v)", n, size, err)
		}
		if data, err = s2.Decode(nil, obj); err != nil {
			return nil, fmt.Errorf("s2: %v", err)
		}
	case encodingS2Dict:
		var err error
		if data, err = s.dictDecode(obj, size); err != nil {
			return nil, err
		}
	case encodingZstd:
		var err error
		if data, err = s.zstdDecode(obj, size); err != nil {
			return nil, fmt.Errorf("zstd: %v", err)
		}
	default:
		return nil, fmt.Errorf("unknown encoding %d", enc)
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("%d bytes, recorded size %d", len(data), size)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

func (s *Store) blobref(digest []byte) string {
	ref, err := fluxcontent.Format(s.opts.Hash, digest)
	if err != nil {
		return fmt.Sprintf("%x", digest)
	}
	return ref
}

// CheckpointPut stores a checkpoint value (JSON) under key.
func (t *Tx) CheckpointPut(key string, value json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, value); err != nil {
		return fmt.Errorf("checkpoint %s: value is not JSON: %v: %w", key, err, syscall.EPROTO)
	}
	if _, err := t.cpPut.Exec(key, buf.String()); err != nil {
		return fmt.Errorf("checkpoint %s: %w", key, sqliteErrno(err))
	}
	return nil
}

// CheckpointGet returns the checkpoint value under key. A value stored as
// a bare blobref (the oldest format) comes back as {"version":0,
// "rootref":REF,"sequence":0,"timestamp":0}.
func (t *Tx) CheckpointGet(key string) (json.RawMessage, error) {
	var v string
	err := t.cpGet.QueryRow(key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound{"checkpoint " + key}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", key, sqliteErrno(err))
	}
	if json.Valid([]byte(v)) {
		return json.RawMessage(v), nil
	}
	if fluxcontent.Validate(v) == nil {
		return json.Marshal(fluxcontent.Checkpoint{Version: 0, Rootref: v})
	}
	return nil, fmt.Errorf("%w: checkpoint %s is neither JSON nor a blobref: %w", ErrCorrupt, key, syscall.EIO)
}

// sqliteErrno attaches an errno to a database error by its SQLite result
// code, so an RPC answer says what kind of failure it was.
func sqliteErrno(err error) error {
	type coder interface{ Code() int }
	var c coder
	if !errors.As(err, &c) {
		return fmt.Errorf("%w: %w", err, syscall.EIO)
	}
	var errno syscall.Errno
	switch c.Code() & 0xff { // primary result code
	case 7: // SQLITE_NOMEM
		errno = syscall.ENOMEM
	case 3, 4, 8, 23: // SQLITE_PERM, SQLITE_ABORT, SQLITE_READONLY, SQLITE_AUTH
		errno = syscall.EPERM
	case 13: // SQLITE_FULL
		errno = syscall.ENOSPC
	case 18: // SQLITE_TOOBIG
		errno = syscall.EFBIG
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		errno = syscall.EBUSY
	case 11, 26: // SQLITE_CORRUPT, SQLITE_NOTADB
		return fmt.Errorf("%w: %w: %w", ErrCorrupt, err, syscall.EIO)
	default:
		errno = syscall.EIO
	}
	return fmt.Errorf("%w: %w", err, errno)
}
