package accounting

import (
	"context"
	"database/sql"
	"sort"
	"strings"
)

// Projects.

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
