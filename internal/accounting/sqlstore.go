package accounting

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// schema is the accounting database, one statement per element, in SQL
// that SQLite and PostgreSQL both take: no AUTOINCREMENT, no booleans
// (flags are INTEGER 0/1), names as keys. A NULL limit is unset (the
// configuration's applies).
var schema = []string{
	`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS banks (
		name TEXT PRIMARY KEY,
		parent TEXT NOT NULL DEFAULT '',   -- '' for the root bank
		shares BIGINT NOT NULL,
		active INTEGER NOT NULL DEFAULT 1
	)`,
	`CREATE TABLE IF NOT EXISTS users (
		username TEXT PRIMARY KEY,
		userid BIGINT NOT NULL,
		default_bank TEXT NOT NULL DEFAULT '',
		default_project TEXT NOT NULL DEFAULT ''
	)`,
	`CREATE TABLE IF NOT EXISTS associations (
		username TEXT NOT NULL,
		bank TEXT NOT NULL,
		shares BIGINT NOT NULL,
		max_running_jobs INTEGER,
		max_active_jobs INTEGER,
		max_nodes INTEGER,
		max_cores INTEGER,
		exempt INTEGER NOT NULL DEFAULT 0,
		expedite INTEGER NOT NULL DEFAULT 0,
		active INTEGER NOT NULL DEFAULT 1,
		PRIMARY KEY (username, bank)
	)`,
	`CREATE TABLE IF NOT EXISTS projects (name TEXT PRIMARY KEY)`,
	`CREATE TABLE IF NOT EXISTS user_projects (
		username TEXT NOT NULL,
		project TEXT NOT NULL,
		PRIMARY KEY (username, project)
	)`,
	usageHistorySchema,
}

// schemaVersion is written to schema_version in a new database; a later
// version that changes the tables migrates from the one it finds.
const schemaVersion = 1

// Dialect is what differs between SQL databases for this store: how a
// query's parameters are written.
type Dialect struct {
	Name string
	// Placeholder returns the n-th (from 1) parameter: "?" for SQLite,
	// "$n" for PostgreSQL.
	Placeholder func(n int) string
	// Duplicate reports whether err is the database refusing a row whose
	// key is already there, and says which key ("" if it cannot).
	Duplicate func(err error) (bool, string)
}

// SQLiteDialect is SQLite's.
var SQLiteDialect = Dialect{Name: "sqlite", Placeholder: func(int) string { return "?" }, Duplicate: sqliteDuplicate}

// PostgresDialect is PostgreSQL's.
var PostgresDialect = Dialect{Name: "postgres", Placeholder: func(n int) string { return "$" + strconv.Itoa(n) }, Duplicate: postgresDuplicate}

// SQLStore is the Store over a database/sql connection.
type SQLStore struct {
	db *sql.DB
	d  Dialect
}

var _ Store = (*SQLStore)(nil)

// NewSQLStore makes the tables if they are not there and returns the
// store; it owns db from now on (Close closes it).
func NewSQLStore(ctx context.Context, db *sql.DB, d Dialect) (*SQLStore, error) {
	s := &SQLStore{db: db, d: d}
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("accounting database schema: %w", err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM schema_version").Scan(&n); err != nil {
		return nil, fmt.Errorf("accounting database: %w", err)
	}
	if n == 0 {
		if _, err := s.exec(ctx, db, "INSERT INTO schema_version (version) VALUES (?)", schemaVersion); err != nil {
			return nil, fmt.Errorf("accounting database: %w", err)
		}
	}
	return s, nil
}

// Close implements Store.
func (s *SQLStore) Close() error { return s.db.Close() }

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// rebind writes a query's "?" parameters in the dialect's way.
func (s *SQLStore) rebind(q string) string {
	if s.d.Placeholder == nil || s.d.Name == SQLiteDialect.Name {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString(s.d.Placeholder(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *SQLStore) exec(ctx context.Context, x execer, q string, args ...any) (sql.Result, error) {
	return x.ExecContext(ctx, s.rebind(q), args...)
}

func (s *SQLStore) query(ctx context.Context, x execer, q string, args ...any) (*sql.Rows, error) {
	return x.QueryContext(ctx, s.rebind(q), args...)
}

func (s *SQLStore) row(ctx context.Context, x execer, q string, args ...any) *sql.Row {
	return x.QueryRowContext(ctx, s.rebind(q), args...)
}

// tx runs fn in a transaction, committed if fn returns nil.
//
// Every write checks first that what it adds is not there (and says so
// with ErrExists), but another client of the same database (a second
// connection to a PostgreSQL server) may add it between that check and
// the insert: the database then refuses the row (SQLSTATE 23505,
// SQLite's UNIQUE constraint). fn runs again, so that its check sees the
// other client's row and gives the same error as it would have (or, if
// the row was only the user's, adds the association). Each refusal
// means another client's transaction committed, so this ends; after
// txRuns refusals it is ErrExists naming the key.
func (s *SQLStore) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	for run := 1; ; run++ {
		err := s.tx1(ctx, fn)
		dup, key := s.duplicate(err)
		if !dup {
			return err
		}
		if run == txRuns {
			if key == "" {
				key = "the row"
			}
			return errf(ErrExists, "the accounting database already has %s (written by another client at the same time)", key)
		}
	}
}

// txRuns bounds the runs of a transaction that the database refuses
// as a duplicate.
const txRuns = 5

func (s *SQLStore) tx1(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// duplicate applies the dialect's Duplicate (none: never).
func (s *SQLStore) duplicate(err error) (bool, string) {
	if err == nil || s.d.Duplicate == nil {
		return false, ""
	}
	return s.d.Duplicate(err)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
