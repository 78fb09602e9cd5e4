package jobarchive

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"

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
	eventlog TEXT NOT NULL
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
	return db, nil
}

// Record is one archived job.
type Record struct {
	ID                                 uint64
	Jobid, Username, Name, Queue       string
	Bank, Project, Result              string
	Userid                             uint32
	Waitstatus, ExitCode               sql.NullInt64
	ExceptionType, ExceptionNote       string
	TSubmit, TRun, TCleanup, TInactive float64
	Duration                           float64
	Ntasks, Nnodes, Ncores, Ngpus      int
	Ranks, Nodelist, Cwd               string
	Jobspec, R, Eventlog               string
}

const insertSQL = `INSERT OR IGNORE INTO jobs (id, jobid, userid, username, name, queue, bank, project,
	result, waitstatus, exit_code, exception_type, exception_note, t_submit, t_run, t_cleanup, t_inactive,
	duration, ntasks, nnodes, ncores, ngpus, ranks, nodelist, cwd, jobspec, R, eventlog)
	VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

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
		res, err := st.ExecContext(ctx, int64(r.ID), r.Jobid, r.Userid, r.Username, r.Name, r.Queue, r.Bank, r.Project,
			r.Result, r.Waitstatus, r.ExitCode, r.ExceptionType, r.ExceptionNote, r.TSubmit, r.TRun, r.TCleanup, r.TInactive,
			r.Duration, r.Ntasks, r.Nnodes, r.Ncores, r.Ngpus, r.Ranks, r.Nodelist, r.Cwd, r.Jobspec, r.R, r.Eventlog)
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
