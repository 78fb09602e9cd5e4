package accounting

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
)

// usageHistorySchema keeps each association's usage per period (the
// start of a day, in seconds since the epoch): what flux-accounting's
// job_usage_factor_table keeps per period, readable for months after
// the jobs' decayed usage has gone to nothing.
const usageHistorySchema = `CREATE TABLE IF NOT EXISTS usage_history (
		username TEXT NOT NULL,
		bank TEXT NOT NULL,
		period_start BIGINT NOT NULL,
		jobs BIGINT NOT NULL,
		core_hours DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (username, bank, period_start)
	)`

// UsagePeriod is one association's (or, with Username "", one bank's)
// usage in the period starting at Start.
type UsagePeriod struct {
	Username  string  `json:"username,omitempty"`
	Bank      string  `json:"bank"`
	Start     int64   `json:"period_start"`
	Jobs      int64   `json:"jobs"`
	CoreHours float64 `json:"core_hours"`
}

// UsageFilter selects and groups the usage history.
type UsageFilter struct {
	// Username and Bank keep one user's and one bank's periods ("":
	// every one).
	Username, Bank string
	// Since and Until keep the periods starting in [Since, Until)
	// (Until 0: no end).
	Since, Until int64
	// Group: "" or "association" (a row per user and bank), "user" (a
	// user's banks summed: Bank is "") or "bank" (a bank's users
	// summed: Username is "").
	Group string
	// Total sums the periods too: a row per group, Start the first
	// period's.
	Total bool
}

// The UsageFilter groups.
const (
	GroupAssociation = "association"
	GroupUser        = "user"
	GroupBank        = "bank"
)

// UsageStore is the usage history a store keeps beside the associations.
type UsageStore interface {
	// SetUsage writes each period's totals, replacing what was there
	// (the module's pass recomputes a period from the archive).
	SetUsage(ctx context.Context, ps []UsagePeriod) error
	// UsageHistory lists the periods f selects, by period then user
	// then bank (Total: by user then bank).
	UsageHistory(ctx context.Context, f UsageFilter) ([]UsagePeriod, error)
	// LastUsagePeriod is the start of the newest period written (0:
	// none).
	LastUsagePeriod(ctx context.Context) (int64, error)
}

var _ UsageStore = (*SQLStore)(nil)

// SetUsage implements UsageStore.
func (s *SQLStore) SetUsage(ctx context.Context, ps []UsagePeriod) error {
	for _, p := range ps {
		if err := checkName("user", p.Username); err != nil {
			return err
		}
		if err := checkName("bank", p.Bank); err != nil {
			return err
		}
		if p.Jobs < 0 || p.CoreHours < 0 || p.CoreHours != p.CoreHours {
			return errf(ErrInvalid, "usage of %s:%s at %d: jobs=%d core-hours=%g: must be 0 or more", p.Username, p.Bank, p.Start, p.Jobs, p.CoreHours)
		}
	}
	// many rows a statement: one round trip per row to a PostgreSQL
	// server made the first pass over a 10k-user archive take minutes
	return s.tx(ctx, func(tx *sql.Tx) error {
		for len(ps) > 0 {
			n := min(len(ps), usageBatch)
			var b strings.Builder
			b.WriteString("INSERT INTO usage_history (username, bank, period_start, jobs, core_hours) VALUES ")
			args := make([]any, 0, 5*n)
			for i, p := range ps[:n] {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?)")
				args = append(args, p.Username, p.Bank, p.Start, p.Jobs, p.CoreHours)
			}
			b.WriteString(" ON CONFLICT (username, bank, period_start) DO UPDATE SET jobs = excluded.jobs, core_hours = excluded.core_hours")
			if _, err := s.exec(ctx, tx, b.String(), args...); err != nil {
				return fmt.Errorf("usage history: %w", err)
			}
			ps = ps[n:]
		}
		return nil
	})
}

// usageBatch is the rows an INSERT of SetUsage writes (5 parameters
// each: far below SQLite's and PostgreSQL's limits).
const usageBatch = 500

// LastUsagePeriod implements UsageStore.
func (s *SQLStore) LastUsagePeriod(ctx context.Context) (int64, error) {
	var last sql.NullInt64
	if err := s.row(ctx, s.db, "SELECT max(period_start) FROM usage_history").Scan(&last); err != nil {
		return 0, fmt.Errorf("usage history: %w", err)
	}
	return last.Int64, nil
}

// UsageHistory implements UsageStore.
func (s *SQLStore) UsageHistory(ctx context.Context, f UsageFilter) ([]UsagePeriod, error) {
	var user, bank string
	switch f.Group {
	case "", GroupAssociation:
		user, bank = "username", "bank"
	case GroupUser:
		user, bank = "username", "''"
	case GroupBank:
		user, bank = "''", "bank"
	default:
		return nil, errf(ErrInvalid, "usage history: group %q: want association, user or bank", f.Group)
	}
	keys := []string{}
	for _, k := range []string{user, bank} {
		if k != "''" {
			keys = append(keys, k)
		}
	}
	start, group, order := "period_start", strings.Join(append(slices.Clone(keys), "period_start"), ", "), "period_start, "+strings.Join(keys, ", ")
	if f.Total {
		start, group, order = "min(period_start)", strings.Join(keys, ", "), strings.Join(keys, ", ")
	}
	until := f.Until
	if until <= 0 {
		until = math.MaxInt64
	}
	q := "SELECT " + user + ", " + bank + ", " + start + ", sum(jobs), sum(core_hours) FROM usage_history" +
		" WHERE period_start >= ? AND period_start < ? AND (? = '' OR username = ?) AND (? = '' OR bank = ?)" +
		" GROUP BY " + group + " ORDER BY " + order
	rows, err := s.query(ctx, s.db, q, f.Since, until, f.Username, f.Username, f.Bank, f.Bank)
	if err != nil {
		return nil, fmt.Errorf("usage history: %w", err)
	}
	defer rows.Close()
	out := []UsagePeriod{}
	for rows.Next() {
		var p UsagePeriod
		if err := rows.Scan(&p.Username, &p.Bank, &p.Start, &p.Jobs, &p.CoreHours); err != nil {
			return nil, fmt.Errorf("usage history: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
