package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteDuplicate is SQLiteDialect's Duplicate: a PRIMARY KEY or UNIQUE
// constraint refused the row (the key: SQLite's message, which names
// the table's columns).
func sqliteDuplicate(err error) (bool, string) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false, ""
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return true, se.Error()
	}
	return false, ""
}

// OpenSQLite opens (creating it if needed, mode 0600: it names every
// user) the accounting database file at path.
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("accounting database: %w", err)
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("accounting database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s, err := NewSQLStore(ctx, db, SQLiteDialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
