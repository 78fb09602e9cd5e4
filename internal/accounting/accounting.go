// Package accounting is the accounting database of an instance (seed
// 003, issue 25): banks in a hierarchy with shares, users and their
// associations with banks (a default bank per user, shares, limits,
// exempt and expedite flags), projects and the users who may charge
// them (a default project per user).
//
// The instance's accounting module owns the database and serves it to
// flux account; job-ingest and the job manager's .accounting-limits
// plugin hold a Snapshot of it, pushed by the module after every change,
// and enforce it at submission (Index). This package is what they share:
// the Store (the database behind a small interface, SQL that SQLite and
// PostgreSQL both speak), the service's payloads (wire.go) and the
// enforcement rules (index.go). It imports no module.
package accounting

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// Bank is a node of the bank hierarchy. The one bank without a parent
// is the root.
type Bank struct {
	Name   string `json:"bank"`
	Parent string `json:"parent_bank"`
	Shares int64  `json:"shares"`
	Active bool   `json:"active"`
}

// Limits are an association's own limits. A nil field is unset: the
// [accounting] configuration's value applies (none: no limit); 0 is no
// limit.
type Limits struct {
	MaxRunningJobs *int `json:"max_running_jobs,omitempty"`
	MaxActiveJobs  *int `json:"max_active_jobs,omitempty"`
	MaxNodes       *int `json:"max_nodes,omitempty"`
	MaxCores       *int `json:"max_cores,omitempty"`
}

// fields names each limit as flux account spells it, for errors and
// tables.
func (l *Limits) fields() []struct {
	name string
	v    **int
} {
	return []struct {
		name string
		v    **int
	}{
		{"max-running-jobs", &l.MaxRunningJobs},
		{"max-active-jobs", &l.MaxActiveJobs},
		{"max-nodes", &l.MaxNodes},
		{"max-cores", &l.MaxCores},
	}
}

// Association is a user's membership of a bank, with what the user's
// row holds (default bank, projects) repeated on each of theirs.
type Association struct {
	Username string `json:"username"`
	Userid   uint32 `json:"userid"`
	Bank     string `json:"bank"`
	Shares   int64  `json:"shares"`
	Limits
	Exempt   bool `json:"exempt"`
	Expedite bool `json:"expedite"`
	Active   bool `json:"active"`
	// the user's: the bank and project of jobs that name none
	DefaultBank    string   `json:"default_bank"`
	Projects       []string `json:"projects"`
	DefaultProject string   `json:"default_project"`
	// JobUsage (decayed core-hours) and FairShare (in [0,1]) are the
	// last fair-share pass's, filled in by the accounting module for
	// view-user, list-users and view-bank (nil: no pass has seen the
	// association yet); the store does not keep them.
	JobUsage  *float64 `json:"job_usage,omitempty"`
	FairShare *float64 `json:"fairshare,omitempty"`
}

// Project is a project jobs may be charged to (flux submit --project).
type Project struct {
	Name string `json:"project"`
}

// UserEdit changes a user (flux account edit-user): nil fields stay as
// they are. Shares, limits and flags change the association with Bank,
// or every association of the user when Bank is "". A limit of -1
// unsets it (the configuration's applies again).
type UserEdit struct {
	Username       string    `json:"username"`
	Bank           string    `json:"bank,omitempty"`
	Userid         *uint32   `json:"userid,omitempty"`
	DefaultBank    *string   `json:"default_bank,omitempty"`
	Shares         *int64    `json:"shares,omitempty"`
	Limits         Limits    `json:"limits"`
	Exempt         *bool     `json:"exempt,omitempty"`
	Expedite       *bool     `json:"expedite,omitempty"`
	Projects       *[]string `json:"projects,omitempty"`
	DefaultProject *string   `json:"default_project,omitempty"`
}

// BankEdit changes a bank (flux account edit-bank).
type BankEdit struct {
	Name   string  `json:"bank"`
	Shares *int64  `json:"shares,omitempty"`
	Parent *string `json:"parent_bank,omitempty"`
}

// Store is the accounting database. Deleting without force deactivates
// (flux-accounting's rule: the history stays, new jobs are refused);
// force removes the rows.
type Store interface {
	AddBank(ctx context.Context, b Bank) error
	EditBank(ctx context.Context, e BankEdit) error
	DeleteBank(ctx context.Context, name string, force bool) error
	Banks(ctx context.Context) ([]Bank, error)

	AddUser(ctx context.Context, a Association) error
	EditUser(ctx context.Context, e UserEdit) error
	DeleteUser(ctx context.Context, username, bank string, force bool) error
	// Associations lists username's ("" for everyone's), by user then
	// bank, inactive ones included.
	Associations(ctx context.Context, username string) ([]Association, error)

	AddProject(ctx context.Context, name string) error
	DeleteProject(ctx context.Context, name string) error
	Projects(ctx context.Context) ([]Project, error)

	Close() error
}

// The store's errors wrap these errno values (the RPC boundary passes
// them on): a name that is not there, one already there, a value that
// is not allowed.
var (
	ErrNotFound = syscall.ENOENT
	ErrExists   = syscall.EEXIST
	ErrInvalid  = syscall.EINVAL
)

// Error is a store error: its text for the user, its kind for errors.Is
// and the errno an RPC answers with.
type Error struct {
	Kind syscall.Errno
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

func errf(kind syscall.Errno, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// IsNotFound reports whether err says a bank, user or project is not in
// the database.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
