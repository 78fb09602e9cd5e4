// Package job is the Go client of Flux's job services: job states and
// results (RFC 21), job listings from job-list (RFC 43), job data and
// eventlog watches from job-info (RFC 41), and helpers built on them
// (wait for an event, wait for a job's result) for commands such as
// flux jobs, flux job status and flux submit --wait.
package job

import (
	"fmt"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// State is a job state (RFC 21), one bit each so sets of states are masks.
type State uint32

// Job states.
const (
	StateNew      State = 1
	StateDepend   State = 2
	StatePriority State = 4
	StateSched    State = 8
	StateRun      State = 16
	StateCleanup  State = 32
	StateInactive State = 64

	// StatePending is DEPEND, PRIORITY and SCHED.
	StatePending = StateDepend | StatePriority | StateSched
	// StateRunning is RUN and CLEANUP.
	StateRunning = StateRun | StateCleanup
	// StateActive is every state but INACTIVE (and NEW).
	StateActive = StatePending | StateRunning
)

var stateNames = []struct {
	s           State
	long, short string
}{
	{StateNew, "NEW", "N"},
	{StateDepend, "DEPEND", "D"},
	{StatePriority, "PRIORITY", "P"},
	{StateSched, "SCHED", "S"},
	{StateRun, "RUN", "R"},
	{StateCleanup, "CLEANUP", "C"},
	{StateInactive, "INACTIVE", "I"},
}

// String returns the state's name ("RUN"), or "(unknown)".
func (s State) String() string {
	for _, n := range stateNames {
		if n.s == s {
			return n.long
		}
	}
	return "(unknown)"
}

// Abbrev returns the one-letter abbreviation ("R").
func (s State) Abbrev() string {
	for _, n := range stateNames {
		if n.s == s {
			return n.short
		}
	}
	return "?"
}

// ParseState reads one state or state group name, case-insensitively:
// a state name (depend, priority, sched, run, cleanup, inactive, new) or
// its one-letter abbreviation, or pending, running, active.
func ParseState(name string) (State, error) {
	switch strings.ToLower(name) {
	case "pending":
		return StatePending, nil
	case "running":
		return StateRunning, nil
	case "active":
		return StateActive, nil
	}
	for _, n := range stateNames {
		if strings.EqualFold(name, n.long) || strings.EqualFold(name, n.short) {
			return n.s, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown job state %q", ErrInvalid, name)
}

// Result is an inactive job's result (RFC 21 / flux-core), a bit each.
type Result uint32

// Job results.
const (
	ResultCompleted Result = 1
	ResultFailed    Result = 2
	ResultCanceled  Result = 4
	ResultTimeout   Result = 8
)

var resultNames = []struct {
	r           Result
	long, short string
}{
	{ResultCompleted, "COMPLETED", "CD"},
	{ResultFailed, "FAILED", "F"},
	{ResultCanceled, "CANCELED", "CA"},
	{ResultTimeout, "TIMEOUT", "TO"},
}

// String returns the result's name ("COMPLETED").
func (r Result) String() string {
	for _, n := range resultNames {
		if n.r == r {
			return n.long
		}
	}
	return "(unknown)"
}

// Abbrev returns the short form ("CD").
func (r Result) Abbrev() string {
	for _, n := range resultNames {
		if n.r == r {
			return n.short
		}
	}
	return "?"
}

// ParseResult reads a result name or abbreviation, case-insensitively
// ("completed", "cd", "failed", "canceled", "cancelled", "timeout").
func ParseResult(name string) (Result, error) {
	if strings.EqualFold(name, "cancelled") {
		return ResultCanceled, nil
	}
	for _, n := range resultNames {
		if strings.EqualFold(name, n.long) || strings.EqualFold(name, n.short) {
			return n.r, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown job result %q", ErrInvalid, name)
}

// ParseStateOrResult reads one flux jobs --filter word: a state, state
// group or result name. Exactly one of the returned masks is non-zero.
func ParseStateOrResult(name string) (State, Result, error) {
	if s, err := ParseState(name); err == nil {
		return s, 0, nil
	}
	if r, err := ParseResult(name); err == nil {
		return 0, r, nil
	}
	return 0, 0, fmt.Errorf("%w: invalid filter %q: not a job state or result", ErrInvalid, name)
}

// KVSKey returns the KVS key of a job's item (RFC 16): job.<dothex>.key,
// or the job's directory when key is empty.
func KVSKey(id jobid.ID, key string) string {
	dir, _ := id.Encode(jobid.KVS)
	if key == "" {
		return dir
	}
	return dir + "." + key
}

// Submit flags (flux-core's FLUX_JOB_* values).
const (
	FlagDebug      = 0x02
	FlagWaitable   = 0x04
	FlagNoValidate = 0x08
)
