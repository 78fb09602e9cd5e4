package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
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

// bankRow reads one bank (ok=false: there is none).
func (s *SQLStore) bankRow(ctx context.Context, x execer, name string) (Bank, bool, error) {
	b := Bank{Name: name}
	var active int
	err := s.row(ctx, x, "SELECT parent, shares, active FROM banks WHERE name = ?", name).Scan(&b.Parent, &b.Shares, &active)
	if errors.Is(err, sql.ErrNoRows) {
		return b, false, nil
	}
	b.Active = active != 0
	return b, err == nil, err
}

func (s *SQLStore) bankNames(ctx context.Context, x execer) string {
	rows, err := s.query(ctx, x, "SELECT name FROM banks WHERE active = 1 ORDER BY name")
	if err != nil {
		return "?"
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// activeBank checks that a bank exists and is active.
func (s *SQLStore) activeBank(ctx context.Context, x execer, name string) error {
	b, ok, err := s.bankRow(ctx, x, name)
	switch {
	case err != nil:
		return err
	case !ok:
		return errf(ErrNotFound, "bank %s is not in the accounting database (banks: %s)", name, s.bankNames(ctx, x))
	case !b.Active:
		return errf(ErrInvalid, "bank %s is inactive (deleted without --force): add it again to use it", name)
	}
	return nil
}

// AddBank implements Store. A bank deleted without --force comes back
// with the new shares and parent.
func (s *SQLStore) AddBank(ctx context.Context, b Bank) error {
	if err := checkName("bank", b.Name); err != nil {
		return err
	}
	if err := checkShares("bank "+b.Name, b.Shares); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		old, exists, err := s.bankRow(ctx, tx, b.Name)
		if err != nil {
			return err
		}
		if exists && old.Active {
			return errf(ErrExists, "bank %s already exists", b.Name)
		}
		if b.Parent == "" {
			var root string
			err := s.row(ctx, tx, "SELECT name FROM banks WHERE parent = '' AND active = 1 AND name <> ?", b.Name).Scan(&root)
			if err == nil {
				return errf(ErrInvalid, "bank %s needs --parent-bank: the root bank is %s", b.Name, root)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		} else if err := s.activeBank(ctx, tx, b.Parent); err != nil {
			return fmt.Errorf("--parent-bank=%s: %w", b.Parent, err)
		}
		if exists {
			_, err = s.exec(ctx, tx, "UPDATE banks SET parent = ?, shares = ?, active = 1 WHERE name = ?", b.Parent, b.Shares, b.Name)
		} else {
			_, err = s.exec(ctx, tx, "INSERT INTO banks (name, parent, shares, active) VALUES (?, ?, ?, 1)", b.Name, b.Parent, b.Shares)
		}
		return err
	})
}

// EditBank implements Store.
func (s *SQLStore) EditBank(ctx context.Context, e BankEdit) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, ok, err := s.bankRow(ctx, tx, e.Name); err != nil {
			return err
		} else if !ok {
			return errf(ErrNotFound, "bank %s is not in the accounting database (banks: %s)", e.Name, s.bankNames(ctx, tx))
		}
		if e.Shares != nil {
			if err := checkShares("bank "+e.Name, *e.Shares); err != nil {
				return err
			}
			if _, err := s.exec(ctx, tx, "UPDATE banks SET shares = ? WHERE name = ?", *e.Shares, e.Name); err != nil {
				return err
			}
		}
		if e.Parent != nil {
			p := *e.Parent
			if err := s.activeBank(ctx, tx, p); err != nil {
				return fmt.Errorf("--parent-bank=%s: %w", p, err)
			}
			// no cycles: the new parent may not be the bank or below it
			for cur := p; cur != ""; {
				if cur == e.Name {
					return errf(ErrInvalid, "--parent-bank=%s: it is %s or one of its sub-banks", p, e.Name)
				}
				b, _, err := s.bankRow(ctx, tx, cur)
				if err != nil {
					return err
				}
				cur = b.Parent
			}
			if _, err := s.exec(ctx, tx, "UPDATE banks SET parent = ? WHERE name = ?", p, e.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// subtree lists a bank and every bank below it.
func (s *SQLStore) subtree(ctx context.Context, x execer, name string) ([]string, error) {
	out := []string{name}
	for i := 0; i < len(out); i++ {
		rows, err := s.query(ctx, x, "SELECT name FROM banks WHERE parent = ?", out[i])
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DeleteBank implements Store. Without force it deactivates a bank that
// has no active sub-bank and no active user, and refuses the root bank;
// with force it removes the bank, its sub-banks and their associations.
func (s *SQLStore) DeleteBank(ctx context.Context, name string, force bool) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		b, ok, err := s.bankRow(ctx, tx, name)
		if err != nil {
			return err
		} else if !ok {
			return errf(ErrNotFound, "bank %s is not in the accounting database (banks: %s)", name, s.bankNames(ctx, tx))
		}
		if !force {
			if err := s.bankInUse(ctx, tx, b); err != nil {
				return err
			}
		}
		banks, err := s.subtree(ctx, tx, name)
		if err != nil {
			return err
		}
		users := map[string]bool{}
		for _, b := range banks {
			rows, err := s.query(ctx, tx, "SELECT username FROM associations WHERE bank = ?", b)
			if err != nil {
				return err
			}
			for rows.Next() {
				var u string
				if err := rows.Scan(&u); err != nil {
					rows.Close()
					return err
				}
				users[u] = true
			}
			rows.Close()
			stmts := []string{"UPDATE associations SET active = 0 WHERE bank = ?", "UPDATE banks SET active = 0 WHERE name = ?"}
			if force {
				stmts = []string{"DELETE FROM associations WHERE bank = ?", "DELETE FROM banks WHERE name = ?"}
			}
			for _, q := range stmts {
				if _, err := s.exec(ctx, tx, q, b); err != nil {
					return err
				}
			}
		}
		for u := range users {
			if err := s.fixUser(ctx, tx, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// bankInUse refuses to deactivate the root bank, or a bank with active
// sub-banks or users (delete-bank without --force): deactivating would
// take every one of them with it, and adding them back would not bring
// back their limits.
func (s *SQLStore) bankInUse(ctx context.Context, x execer, b Bank) error {
	if b.Parent == "" {
		return errf(ErrInvalid, "bank %s is the root bank: deleting it would deactivate every bank and association; "+
			"delete-bank %s --force removes them all from the database", b.Name, b.Name)
	}
	for _, q := range []struct{ what, sql string }{
		{"active sub-banks", "SELECT name FROM banks WHERE parent = ? AND active = 1 ORDER BY name"},
		{"active users", "SELECT username FROM associations WHERE bank = ? AND active = 1 ORDER BY username"},
	} {
		names, err := s.names(ctx, x, q.sql, b.Name)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			shown := names
			if len(shown) > 10 {
				shown = append(slices.Clone(shown[:10]), fmt.Sprintf("and %d more", len(names)-10))
			}
			return errf(ErrInvalid, "bank %s has %d %s (%s): delete them first, or delete-bank %s --force removes the bank, the banks below it and their associations",
				b.Name, len(names), q.what, strings.Join(shown, ", "), b.Name)
		}
	}
	return nil
}

// names is a query's first column.
func (s *SQLStore) names(ctx context.Context, x execer, q string, args ...any) ([]string, error) {
	rows, err := s.query(ctx, x, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Banks implements Store.
func (s *SQLStore) Banks(ctx context.Context) ([]Bank, error) {
	rows, err := s.query(ctx, s.db, "SELECT name, parent, shares, active FROM banks ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Bank
	for rows.Next() {
		var b Bank
		var active int
		if err := rows.Scan(&b.Name, &b.Parent, &b.Shares, &active); err != nil {
			return nil, err
		}
		b.Active = active != 0
		out = append(out, b)
	}
	return out, rows.Err()
}

// fixUser keeps a user's row true to their associations after some
// changed: a default bank that is no longer an active association gives
// way to the first active one (by name), and a user with no association
// left is removed with their projects.
func (s *SQLStore) fixUser(ctx context.Context, x execer, username string) error {
	var def string
	err := s.row(ctx, x, "SELECT default_bank FROM users WHERE username = ?", username).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	var n int
	if err := s.row(ctx, x, "SELECT count(*) FROM associations WHERE username = ?", username).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		for _, q := range []string{"DELETE FROM user_projects WHERE username = ?", "DELETE FROM users WHERE username = ?"} {
			if _, err := s.exec(ctx, x, q, username); err != nil {
				return err
			}
		}
		return nil
	}
	var active int
	err = s.row(ctx, x, "SELECT active FROM associations WHERE username = ? AND bank = ?", username, def).Scan(&active)
	if err == nil && active == 1 {
		return nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	next := ""
	err = s.row(ctx, x, "SELECT bank FROM associations WHERE username = ? AND active = 1 ORDER BY bank", username).Scan(&next)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	_, err = s.exec(ctx, x, "UPDATE users SET default_bank = ? WHERE username = ?", next, username)
	return err
}

// checkProjects checks that every project is in the database.
func (s *SQLStore) checkProjects(ctx context.Context, x execer, projects []string) error {
	for _, p := range projects {
		var n int
		if err := s.row(ctx, x, "SELECT count(*) FROM projects WHERE name = ?", p).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errf(ErrNotFound, "project %s is not in the accounting database: add it with flux account add-project %s", p, p)
		}
	}
	return nil
}

func (s *SQLStore) userProjects(ctx context.Context, x execer, username string) ([]string, error) {
	rows, err := s.query(ctx, x, "SELECT project FROM user_projects WHERE username = ? ORDER BY project", username)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *SQLStore) setProjects(ctx context.Context, x execer, username string, projects []string) error {
	if _, err := s.exec(ctx, x, "DELETE FROM user_projects WHERE username = ?", username); err != nil {
		return err
	}
	for _, p := range projects {
		if _, err := s.exec(ctx, x, "INSERT INTO user_projects (username, project) VALUES (?, ?)", username, p); err != nil {
			return err
		}
	}
	return nil
}

func nullInt(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}

// AddUser implements Store. A user's first bank becomes their default
// bank; projects add to the user's list, the first one being the
// default project unless DefaultProject names one.
func (s *SQLStore) AddUser(ctx context.Context, a Association) error {
	if err := checkName("user", a.Username); err != nil {
		return err
	}
	if a.Bank == "" {
		return errf(ErrInvalid, "user %s: --bank is required", a.Username)
	}
	if err := checkName("bank", a.Bank); err != nil {
		return err
	}
	who := fmt.Sprintf("user %s, bank %s", a.Username, a.Bank)
	if err := checkShares(who, a.Shares); err != nil {
		return err
	}
	if err := checkUserid("user "+a.Username, a.Userid); err != nil {
		return err
	}
	if err := checkLimits(who, a.Limits, false); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.activeBank(ctx, tx, a.Bank); err != nil {
			return err
		}
		if err := s.checkProjects(ctx, tx, a.Projects); err != nil {
			return err
		}
		if a.DefaultProject != "" {
			if err := s.checkProjects(ctx, tx, []string{a.DefaultProject}); err != nil {
				return fmt.Errorf("--default-project: %w", err)
			}
		}
		var active int
		err := s.row(ctx, tx, "SELECT active FROM associations WHERE username = ? AND bank = ?", a.Username, a.Bank).Scan(&active)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if exists && active == 1 {
			return errf(ErrExists, "user %s already belongs to bank %s", a.Username, a.Bank)
		}
		if err := s.useridFree(ctx, tx, a.Username, a.Userid); err != nil {
			return err
		}
		args := []any{a.Shares, nullInt(a.MaxRunningJobs), nullInt(a.MaxActiveJobs), nullInt(a.MaxNodes), nullInt(a.MaxCores),
			b2i(a.Exempt), b2i(a.Expedite), a.Username, a.Bank}
		if exists {
			_, err = s.exec(ctx, tx, `UPDATE associations SET shares = ?, max_running_jobs = ?, max_active_jobs = ?,
				max_nodes = ?, max_cores = ?, exempt = ?, expedite = ?, active = 1 WHERE username = ? AND bank = ?`, args...)
		} else {
			_, err = s.exec(ctx, tx, `INSERT INTO associations (shares, max_running_jobs, max_active_jobs, max_nodes,
				max_cores, exempt, expedite, username, bank, active) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`, args...)
		}
		if err != nil {
			return err
		}
		var uid int64
		var defProject string
		err = s.row(ctx, tx, "SELECT userid, default_project FROM users WHERE username = ?", a.Username).Scan(&uid, &defProject)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := s.exec(ctx, tx, "INSERT INTO users (username, userid, default_bank, default_project) VALUES (?, ?, ?, '')",
				a.Username, int64(a.Userid), a.Bank); err != nil {
				return err
			}
		} else if err != nil {
			return err
		} else if uint32(uid) != a.Userid {
			return errf(ErrInvalid, "user %s: --userid=%d: the accounting database has uid %d for %s (flux account edit-user %s --userid=UID changes it)",
				a.Username, a.Userid, uid, a.Username, a.Username)
		}
		have, err := s.userProjects(ctx, tx, a.Username)
		if err != nil {
			return err
		}
		projects := have
		for _, p := range append(slices.Clone(a.Projects), a.DefaultProject) {
			if p != "" && !slices.Contains(projects, p) {
				projects = append(projects, p)
			}
		}
		if err := s.setProjects(ctx, tx, a.Username, projects); err != nil {
			return err
		}
		switch {
		case a.DefaultProject != "":
			defProject = a.DefaultProject
		case defProject == "" && len(a.Projects) > 0:
			defProject = a.Projects[0]
		}
		if _, err := s.exec(ctx, tx, "UPDATE users SET default_project = ? WHERE username = ?", defProject, a.Username); err != nil {
			return err
		}
		return s.fixUser(ctx, tx, a.Username)
	})
}

// useridFree refuses uid when another user of the database has it: two
// names for one uid would merge their jobs, usage and privacy.
func (s *SQLStore) useridFree(ctx context.Context, x execer, username string, uid uint32) error {
	var other string
	err := s.row(ctx, x, "SELECT username FROM users WHERE userid = ? AND username <> ? ORDER BY username", int64(uid), username).Scan(&other)
	switch {
	case err == nil:
		return errUseridTaken(username, uid, other)
	case errors.Is(err, sql.ErrNoRows):
		return nil
	}
	return err
}

// setUserid changes a user's uid (edit-user --userid). The usage
// history written under the user's name was charged from the jobs of
// the old uid, someone else's when the uid was wrong: it goes, and the
// accounting module's next pass writes the days its archive still
// holds again under the right names.
func (s *SQLStore) setUserid(ctx context.Context, x execer, username string, uid uint32) error {
	var old int64
	if err := s.row(ctx, x, "SELECT userid FROM users WHERE username = ?", username).Scan(&old); err != nil {
		return err
	}
	if uint32(old) == uid {
		return nil
	}
	if err := s.useridFree(ctx, x, username, uid); err != nil {
		return err
	}
	if _, err := s.exec(ctx, x, "UPDATE users SET userid = ? WHERE username = ?", int64(uid), username); err != nil {
		return err
	}
	_, err := s.exec(ctx, x, "DELETE FROM usage_history WHERE username = ?", username)
	return err
}

// userBanks lists a user's banks, for errors.
func (s *SQLStore) userBanks(ctx context.Context, x execer, username string) string {
	rows, err := s.query(ctx, x, "SELECT bank FROM associations WHERE username = ? ORDER BY bank", username)
	if err != nil {
		return "?"
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b string
		if rows.Scan(&b) == nil {
			out = append(out, b)
		}
	}
	return strings.Join(out, ", ")
}

func (s *SQLStore) userExists(ctx context.Context, x execer, username string) error {
	var n int
	if err := s.row(ctx, x, "SELECT count(*) FROM users WHERE username = ?", username).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errf(ErrNotFound, "user %s is not in the accounting database", username)
	}
	return nil
}

func (s *SQLStore) assocExists(ctx context.Context, x execer, username, bank string) (active bool, err error) {
	var a int
	err = s.row(ctx, x, "SELECT active FROM associations WHERE username = ? AND bank = ?", username, bank).Scan(&a)
	if errors.Is(err, sql.ErrNoRows) {
		return false, errf(ErrNotFound, "user %s does not belong to bank %s (banks: %s)", username, bank, s.userBanks(ctx, x, username))
	}
	return a == 1, err
}

// EditUser implements Store.
func (s *SQLStore) EditUser(ctx context.Context, e UserEdit) error {
	who := "user " + e.Username
	if e.Bank != "" {
		who += ", bank " + e.Bank
	}
	if e.Shares != nil {
		if err := checkShares(who, *e.Shares); err != nil {
			return err
		}
	}
	if err := checkLimits(who, e.Limits, true); err != nil {
		return err
	}
	if e.Userid != nil {
		if err := checkUserid("user "+e.Username, *e.Userid); err != nil {
			return err
		}
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.userExists(ctx, tx, e.Username); err != nil {
			return err
		}
		where, args := "username = ?", []any{e.Username}
		if e.Bank != "" {
			if _, err := s.assocExists(ctx, tx, e.Username, e.Bank); err != nil {
				return err
			}
			where, args = "username = ? AND bank = ?", []any{e.Username, e.Bank}
		}
		set := func(col string, v any) error {
			_, err := s.exec(ctx, tx, "UPDATE associations SET "+col+" = ? WHERE "+where, append([]any{v}, args...)...)
			return err
		}
		if e.Shares != nil {
			if err := set("shares", *e.Shares); err != nil {
				return err
			}
		}
		cols := []string{"max_running_jobs", "max_active_jobs", "max_nodes", "max_cores"}
		for i, f := range e.Limits.fields() {
			if *f.v == nil {
				continue
			}
			var v any = **f.v
			if **f.v == -1 {
				v = nil
			}
			if err := set(cols[i], v); err != nil {
				return err
			}
		}
		if e.Exempt != nil {
			if err := set("exempt", b2i(*e.Exempt)); err != nil {
				return err
			}
		}
		if e.Expedite != nil {
			if err := set("expedite", b2i(*e.Expedite)); err != nil {
				return err
			}
		}
		if e.Userid != nil {
			if err := s.setUserid(ctx, tx, e.Username, *e.Userid); err != nil {
				return err
			}
		}
		if e.DefaultBank != nil {
			active, err := s.assocExists(ctx, tx, e.Username, *e.DefaultBank)
			if err != nil {
				return fmt.Errorf("--default-bank: %w", err)
			}
			if !active {
				return errf(ErrInvalid, "--default-bank=%s: user %s's association with bank %s is inactive", *e.DefaultBank, e.Username, *e.DefaultBank)
			}
			if _, err := s.exec(ctx, tx, "UPDATE users SET default_bank = ? WHERE username = ?", *e.DefaultBank, e.Username); err != nil {
				return err
			}
		}
		return s.editProjects(ctx, tx, e)
	})
}

// editProjects applies edit-user --projects and --default-project: a
// default project not in the new list gives way to its first one.
func (s *SQLStore) editProjects(ctx context.Context, tx *sql.Tx, e UserEdit) error {
	if e.Projects == nil && e.DefaultProject == nil {
		return nil
	}
	projects, err := s.userProjects(ctx, tx, e.Username)
	if err != nil {
		return err
	}
	var def string
	if err := s.row(ctx, tx, "SELECT default_project FROM users WHERE username = ?", e.Username).Scan(&def); err != nil {
		return err
	}
	if e.Projects != nil {
		if err := s.checkProjects(ctx, tx, *e.Projects); err != nil {
			return err
		}
		projects = nil
		for _, p := range *e.Projects {
			if !slices.Contains(projects, p) {
				projects = append(projects, p)
			}
		}
		if !slices.Contains(projects, def) {
			def = ""
			if len(projects) > 0 {
				def = projects[0]
			}
		}
	}
	if e.DefaultProject != nil {
		def = *e.DefaultProject
		if def != "" {
			if err := s.checkProjects(ctx, tx, []string{def}); err != nil {
				return fmt.Errorf("--default-project: %w", err)
			}
			if !slices.Contains(projects, def) {
				projects = append(projects, def)
			}
		}
	}
	if err := s.setProjects(ctx, tx, e.Username, projects); err != nil {
		return err
	}
	_, err = s.exec(ctx, tx, "UPDATE users SET default_project = ? WHERE username = ?", def, e.Username)
	return err
}

// DeleteUser implements Store.
func (s *SQLStore) DeleteUser(ctx context.Context, username, bank string, force bool) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.userExists(ctx, tx, username); err != nil {
			return err
		}
		if _, err := s.assocExists(ctx, tx, username, bank); err != nil {
			return err
		}
		q := "UPDATE associations SET active = 0 WHERE username = ? AND bank = ?"
		if force {
			q = "DELETE FROM associations WHERE username = ? AND bank = ?"
		}
		if _, err := s.exec(ctx, tx, q, username, bank); err != nil {
			return err
		}
		return s.fixUser(ctx, tx, username)
	})
}

// Associations implements Store.
func (s *SQLStore) Associations(ctx context.Context, username string) ([]Association, error) {
	q := `SELECT a.username, u.userid, a.bank, a.shares, a.max_running_jobs, a.max_active_jobs, a.max_nodes,
		a.max_cores, a.exempt, a.expedite, a.active, u.default_bank, u.default_project
		FROM associations a JOIN users u ON a.username = u.username`
	var args []any
	if username != "" {
		q += " WHERE a.username = ?"
		args = append(args, username)
	}
	q += " ORDER BY a.username, a.bank"
	rows, err := s.query(ctx, s.db, q, args...)
	if err != nil {
		return nil, err
	}
	var out []Association
	for rows.Next() {
		var a Association
		var uid int64
		var lim [4]sql.NullInt64
		var exempt, expedite, active int
		if err := rows.Scan(&a.Username, &uid, &a.Bank, &a.Shares, &lim[0], &lim[1], &lim[2], &lim[3],
			&exempt, &expedite, &active, &a.DefaultBank, &a.DefaultProject); err != nil {
			rows.Close()
			return nil, err
		}
		a.Userid = uint32(uid)
		for i, f := range a.Limits.fields() {
			if lim[i].Valid {
				v := int(lim[i].Int64)
				*f.v = &v
			}
		}
		a.Exempt, a.Expedite, a.Active = exempt != 0, expedite != 0, active != 0
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// every user's projects in one query, not one per user (10k round
	// trips to a PostgreSQL server cost a second)
	pq, pargs := "SELECT username, project FROM user_projects", []any{}
	if username != "" {
		pq += " WHERE username = ?"
		pargs = append(pargs, username)
	}
	prows, err := s.query(ctx, s.db, pq+" ORDER BY username, project", pargs...)
	if err != nil {
		return nil, err
	}
	defer prows.Close()
	projects := map[string][]string{}
	for prows.Next() {
		var u, p string
		if err := prows.Scan(&u, &p); err != nil {
			return nil, err
		}
		projects[u] = append(projects[u], p)
	}
	if err := prows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Projects = projects[out[i].Username]
	}
	return out, nil
}

// AddProject implements Store.
func (s *SQLStore) AddProject(ctx context.Context, name string) error {
	if err := checkName("project", name); err != nil {
		return err
	}
	if name == AnyProject {
		return errf(ErrInvalid, "project %s is every user's already (the project of jobs that name none): it cannot be added", name)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := s.row(ctx, tx, "SELECT count(*) FROM projects WHERE name = ?", name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errf(ErrExists, "project %s already exists", name)
		}
		_, err := s.exec(ctx, tx, "INSERT INTO projects (name) VALUES (?)", name)
		return err
	})
}

// DeleteProject implements Store. A project that is some user's
// default stays until their default changes.
func (s *SQLStore) DeleteProject(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.checkProjects(ctx, tx, []string{name}); err != nil {
			return err
		}
		rows, err := s.query(ctx, tx, "SELECT username FROM users WHERE default_project = ? ORDER BY username", name)
		if err != nil {
			return err
		}
		var users []string
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return err
			}
			users = append(users, u)
		}
		rows.Close()
		if len(users) > 0 {
			sort.Strings(users)
			return errf(ErrInvalid, "project %s is the default project of %s: change it first (flux account edit-user USER --default-project=OTHER)",
				name, strings.Join(users, ", "))
		}
		for _, q := range []string{"DELETE FROM user_projects WHERE project = ?", "DELETE FROM projects WHERE name = ?"} {
			if _, err := s.exec(ctx, tx, q, name); err != nil {
				return err
			}
		}
		return nil
	})
}

// Projects implements Store.
func (s *SQLStore) Projects(ctx context.Context) ([]Project, error) {
	rows, err := s.query(ctx, s.db, "SELECT name FROM projects ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Project
	for rows.Next() {
		var p Project
		if err := rows.Scan(&p.Name); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
