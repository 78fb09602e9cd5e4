package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Users and their associations: defaults, uids, projects, limits.

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
