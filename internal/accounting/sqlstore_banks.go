package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Banks: the bank tree, its shares and who may delete what.

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
