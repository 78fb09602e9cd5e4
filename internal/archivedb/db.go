// Package archivedb is the job archive's database: its schema, and the
// reads and writes the job-archive module (which fills it) and flux usage
// (which reports from it, through the module or from a copy of the file)
// share. It is a file format, like a wire type: both sides import it,
// neither imports the other.
package archivedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/eventlog"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// schema is the archive: one row per inactive job, every field a plain
// column (numbers, text, and the job's jobspec, R and eventlog as the
// text the KVS holds), so that the sqlite3 command, a spreadsheet
// export or a script reads it without Flux, years later.
const schema = `
CREATE TABLE IF NOT EXISTS jobs (
	id INTEGER PRIMARY KEY,      -- the job ID (decimal)
	jobid TEXT NOT NULL,         -- the same in F58 (ƒ...)
	userid INTEGER NOT NULL,
	username TEXT NOT NULL,
	name TEXT NOT NULL,
	queue TEXT NOT NULL,
	bank TEXT NOT NULL,
	project TEXT NOT NULL,
	result TEXT NOT NULL,        -- COMPLETED, FAILED, CANCELED, TIMEOUT
	waitstatus INTEGER,          -- NULL when the job never ran
	exit_code INTEGER,
	exception_type TEXT NOT NULL,
	exception_note TEXT NOT NULL,
	t_submit REAL NOT NULL,
	t_run REAL NOT NULL,         -- 0 when the job never ran
	t_cleanup REAL NOT NULL,
	t_inactive REAL NOT NULL,
	duration REAL NOT NULL,      -- the time limit (0: none)
	ntasks INTEGER NOT NULL,
	nnodes INTEGER NOT NULL,
	ncores INTEGER NOT NULL,
	ngpus INTEGER NOT NULL,
	ranks TEXT NOT NULL,
	nodelist TEXT NOT NULL,
	cwd TEXT NOT NULL,
	jobspec TEXT NOT NULL,
	R TEXT NOT NULL,
	eventlog TEXT NOT NULL,
	peak_memory INTEGER,         -- bytes, the largest peak of any node (NULL: not measured)
	cpu_time REAL,               -- seconds of CPU, all nodes (NULL: not measured)
	usage TEXT NOT NULL DEFAULT '', -- per node: {"rank": {peak_memory, cpu_time}} (guest.usage)
	requeued_runs TEXT NOT NULL DEFAULT '' -- the runs a requeue on preemption ended: [{t_run, t_end, ncores}] (JSON; '' for none)
);
CREATE INDEX IF NOT EXISTS jobs_t_inactive ON jobs(t_inactive);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs(userid, t_run);
`

// Open opens (creating it if needed) the archive at path.
func Open(path string, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	if readOnly {
		q.Add("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		// jobspecs hold users' environments: the file is the owner's
		f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("job archive: %w", err)
		}
		f.Close()
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("job archive %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if readOnly {
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM jobs").Scan(&n); err != nil {
			db.Close()
			return nil, fmt.Errorf("job archive %s: %w", path, err)
		}
		return db, nil
	}
	if _, err := db.ExecContext(context.Background(), schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("job archive %s: %w", path, err)
	}
	if err := addColumns(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("job archive %s: %w", path, err)
	}
	return db, nil
}

// added are the columns later versions added to the jobs table, which
// an archive made before them gets when opened for writing (its old
// rows have them NULL or empty: not measured).
var added = []struct{ name, decl string }{
	{"peak_memory", "INTEGER"},
	{"cpu_time", "REAL"},
	{"usage", "TEXT NOT NULL DEFAULT ''"},
	{"requeued_runs", "TEXT NOT NULL DEFAULT ''"},
}

func addColumns(db *sql.DB) error {
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info('jobs')")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		have[n] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range added {
		if !have[c.name] {
			if _, err := db.ExecContext(ctx, "ALTER TABLE jobs ADD COLUMN "+c.name+" "+c.decl); err != nil {
				return err
			}
		}
	}
	return nil
}

// Record is one archived job; as JSON it is one element of a
// job-archive.query response (the jobspec, R and eventlog texts are not
// sent).
type Record struct {
	ID            uint64  `json:"id"`
	Jobid         string  `json:"jobid"`
	Userid        uint32  `json:"userid"`
	Username      string  `json:"username"`
	Name          string  `json:"name"`
	Queue         string  `json:"queue"`
	Bank          string  `json:"bank"`
	Project       string  `json:"project"`
	Result        string  `json:"result"`
	Waitstatus    *int64  `json:"waitstatus,omitempty"` // nil: the job never ran
	ExitCode      *int64  `json:"exit_code,omitempty"`
	ExceptionType string  `json:"exception_type,omitempty"`
	ExceptionNote string  `json:"exception_note,omitempty"`
	TSubmit       float64 `json:"t_submit"`
	TRun          float64 `json:"t_run"`
	TCleanup      float64 `json:"t_cleanup"`
	TInactive     float64 `json:"t_inactive"`
	Duration      float64 `json:"duration"`
	Ntasks        int     `json:"ntasks"`
	Nnodes        int     `json:"nnodes"`
	Ncores        int     `json:"ncores"`
	Ngpus         int     `json:"ngpus"`
	Ranks         string  `json:"ranks"`
	Nodelist      string  `json:"nodelist"`
	Cwd           string  `json:"-"`
	Jobspec       string  `json:"-"`
	R             string  `json:"-"`
	Eventlog      string  `json:"-"`
	// PeakMemory (bytes, the largest of any node's) and CPUTime
	// (seconds, all nodes) come from the job's cgroups (guest.usage,
	// kept per node in Usage); nil when not measured.
	PeakMemory *int64   `json:"peak_memory,omitempty"`
	CPUTime    *float64 `json:"cpu_time,omitempty"`
	Usage      string   `json:"-"`
	// RequeuedRuns are the runs before the last that a requeue on
	// preemption ended (TRun and the rest are the last run's); Insert
	// fills them from the eventlog when nil.
	RequeuedRuns []Run `json:"requeued_runs,omitempty"`
}

// Run is one run of a job: it started at TRun and ended at TEnd on
// Ncores cores.
type Run struct {
	TRun   float64 `json:"t_run"`
	TEnd   float64 `json:"t_end"`
	Ncores int     `json:"ncores"`
}

// RequeuedRuns reads the runs a requeue ended from a job's eventlog:
// each from a start event to its run's finish (or, if the run wrote
// none, its requeue event). The eventlog does not say how many cores
// an earlier run had; a requeued job asks for the same resources again,
// so each is given ncores (the last run's).
func RequeuedRuns(log string, ncores int) []Run {
	if !strings.Contains(log, `"requeue"`) {
		return nil
	}
	evs, err := eventlog.Parse([]byte(log))
	if err != nil {
		return nil
	}
	var runs []Run
	var start, end float64
	for _, ev := range evs {
		switch ev.Name {
		case "start":
			start, end = ev.Timestamp, 0
		case "finish":
			if start > 0 {
				end = ev.Timestamp
			}
		case "requeue":
			if start > 0 {
				if end <= 0 {
					end = ev.Timestamp
				}
				if end > start {
					runs = append(runs, Run{TRun: start, TEnd: end, Ncores: ncores})
				}
			}
			start, end = 0, 0
		}
	}
	return runs
}

// SetUsage fills PeakMemory, CPUTime and Usage from a job's guest.usage
// text ({"<rank>": {"peak_memory": bytes, "cpu_time": seconds}, ...}).
// Text that does not parse is kept in Usage and sets neither figure.
func (r *Record) SetUsage(text string) {
	r.Usage = text
	var per map[string]struct {
		Peak *int64   `json:"peak_memory"`
		CPU  *float64 `json:"cpu_time"`
	}
	if text == "" || json.Unmarshal([]byte(text), &per) != nil {
		return
	}
	for _, u := range per {
		if u.Peak != nil && (r.PeakMemory == nil || *u.Peak > *r.PeakMemory) {
			v := *u.Peak
			r.PeakMemory = &v
		}
		if u.CPU != nil {
			if r.CPUTime == nil {
				r.CPUTime = new(float64)
			}
			*r.CPUTime += *u.CPU
		}
	}
}

const insertSQL = `INSERT OR IGNORE INTO jobs (id, jobid, userid, username, name, queue, bank, project,
	result, waitstatus, exit_code, exception_type, exception_note, t_submit, t_run, t_cleanup, t_inactive,
	duration, ntasks, nnodes, ncores, ngpus, ranks, nodelist, cwd, jobspec, R, eventlog, peak_memory, cpu_time, usage,
	requeued_runs)
	VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// Insert writes records in one transaction (a job already there is left
// as it is) and returns how many were new.
func Insert(ctx context.Context, db *sql.DB, recs []Record) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, insertSQL)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n := 0
	for _, r := range recs {
		runs := r.RequeuedRuns
		if runs == nil {
			runs = RequeuedRuns(r.Eventlog, r.Ncores)
		}
		var runsText []byte
		if len(runs) > 0 {
			runsText, _ = json.Marshal(runs)
		}
		res, err := st.ExecContext(ctx, int64(r.ID), r.Jobid, r.Userid, r.Username, r.Name, r.Queue, r.Bank, r.Project,
			r.Result, r.Waitstatus, r.ExitCode, r.ExceptionType, r.ExceptionNote, r.TSubmit, r.TRun, r.TCleanup, r.TInactive,
			r.Duration, r.Ntasks, r.Nnodes, r.Ncores, r.Ngpus, r.Ranks, r.Nodelist, r.Cwd, r.Jobspec, r.R, r.Eventlog,
			r.PeakMemory, r.CPUTime, r.Usage, string(runsText))
		if err != nil {
			return 0, fmt.Errorf("job %s: %w", r.Jobid, err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			n++
		}
	}
	return n, tx.Commit()
}

// LastInactive is the newest t_inactive archived (0 for none).
func LastInactive(ctx context.Context, db *sql.DB) (float64, error) {
	var t sql.NullFloat64
	if err := db.QueryRowContext(ctx, "SELECT max(t_inactive) FROM jobs").Scan(&t); err != nil {
		return 0, err
	}
	return t.Float64, nil
}

// Filter selects the records a query returns.
type Filter struct {
	Since, Until float64
	// Inactive selects the jobs that became inactive in [Since, Until)
	// (flux usage --jobs); otherwise the jobs that ran in it.
	Inactive bool
	// Userid, when set, keeps only that user's jobs.
	Userid *uint32
}

// Query calls fn with each record the filter selects, in job ID order
// (without the jobspec, R and eventlog texts). An error from fn stops it.
func Query(ctx context.Context, db *sql.DB, f Filter, fn func(Record) error) error {
	q := `SELECT id, jobid, userid, username, name, queue, bank, project, result, waitstatus, exit_code,
		exception_type, exception_note, t_submit, t_run, t_cleanup, t_inactive, duration, ntasks, nnodes, ncores,
		ngpus, ranks, nodelist, peak_memory, cpu_time, requeued_runs FROM jobs WHERE `
	args := []any{f.Since, f.Until}
	if f.Inactive {
		q += `t_inactive >= ? AND t_submit < ?`
	} else {
		q += `t_run > 0 AND (CASE WHEN t_cleanup > 0 THEN t_cleanup ELSE t_inactive END) > ? AND t_run < ?`
	}
	if f.Userid != nil {
		q += ` AND userid = ?`
		args = append(args, *f.Userid)
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return fmt.Errorf("job archive: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r Record
		var id int64
		var runs string
		if err := rows.Scan(&id, &r.Jobid, &r.Userid, &r.Username, &r.Name, &r.Queue, &r.Bank, &r.Project, &r.Result,
			&r.Waitstatus, &r.ExitCode, &r.ExceptionType, &r.ExceptionNote, &r.TSubmit, &r.TRun, &r.TCleanup,
			&r.TInactive, &r.Duration, &r.Ntasks, &r.Nnodes, &r.Ncores, &r.Ngpus, &r.Ranks, &r.Nodelist,
			&r.PeakMemory, &r.CPUTime, &runs); err != nil {
			return fmt.Errorf("job archive: %w", err)
		}
		if runs != "" {
			if err := json.Unmarshal([]byte(runs), &r.RequeuedRuns); err != nil {
				return fmt.Errorf("job archive: job %s: requeued_runs: %w", r.Jobid, err)
			}
		}
		r.ID = uint64(id)
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Has reports whether the job is archived.
func Has(ctx context.Context, db *sql.DB, id uint64) (bool, error) {
	var one int
	err := db.QueryRowContext(ctx, "SELECT 1 FROM jobs WHERE id = ?", int64(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// idsPerQuery bounds the ids one Archived statement binds (SQLite's
// limit on a statement's parameters is 32766; a smaller statement
// keeps each step short).
const idsPerQuery = 500

// Archived returns which of ids are archived, with one query per
// idsPerQuery of them (instead of a Has for each).
func Archived(ctx context.Context, db *sql.DB, ids []uint64) (map[uint64]bool, error) {
	have := make(map[uint64]bool)
	var q strings.Builder
	args := make([]any, 0, min(len(ids), idsPerQuery))
	for start := 0; start < len(ids); start += idsPerQuery {
		chunk := ids[start:min(start+idsPerQuery, len(ids))]
		q.Reset()
		q.WriteString("SELECT id FROM jobs WHERE id IN (")
		args = args[:0]
		for i, id := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
			args = append(args, int64(id))
		}
		q.WriteByte(')')
		rows, err := db.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("job archive: %w", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("job archive: %w", err)
			}
			have[uint64(id)] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("job archive: %w", err)
		}
	}
	return have, nil
}

// QueryRequest is the job-archive.query payload (the module's wire
// contract lives here, beside the records it carries).
type QueryRequest struct {
	Since float64 `json:"since"`
	Until float64 `json:"until"`
	// Inactive: the jobs that became inactive in [since, until), not
	// those that ran in it.
	Inactive bool `json:"inactive,omitempty"`
	// Cluster: for a report of how the instance's node time was spent
	// (the owner's only).
	Cluster bool `json:"cluster,omitempty"`
}

// QueryResponse is one response of the stream.
type QueryResponse struct {
	Records []Record `json:"records"`
	// ResourceEventlog and R: for a cluster report, the instance's
	// resource eventlog and R, in the first response (the module reads
	// them for operators, whom the primary KVS namespace refuses).
	ResourceEventlog string          `json:"resource_eventlog,omitempty"`
	R                json.RawMessage `json:"R,omitempty"`
}
