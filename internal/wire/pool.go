package wire

import (
	"encoding/json"
	"fmt"
)

// The job-pool protocol (job-pool.list, job-pool.items, job-pool.pull,
// job-pool.result; internal/modules/jobpool) as its clients decode it:
// flux pool and the children that pull work.

// Pool item states.
const (
	PoolPending  = "pending"  // waiting to be pulled
	PoolAssigned = "assigned" // pulled, no result yet
	PoolDone     = "done"     // result reported
)

// PoolResult is what became of a pulled jobspec, reported by the child
// that ran it.
type PoolResult struct {
	// Jobid is the job's id in the instance that ran it ("" if it
	// could not be submitted there).
	Jobid string `json:"jobid,omitempty"`
	// Result is the job's result (COMPLETED, FAILED, CANCELED,
	// TIMEOUT), or REFUSED when the child would not take the jobspec.
	Result     string `json:"result"`
	Waitstatus *int   `json:"waitstatus,omitempty"`
	// Note says why (an exception's type and note, or the refusal).
	Note string `json:"note,omitempty"`
}

// PoolReport is one item's result in a job-pool.done request: a child
// reports the items that ended since its last report in one request
// ({"pool": NAME, "results": [PoolReport...]}; {"pool", "id", "result"}
// reports one).
type PoolReport struct {
	ID     int64       `json:"id"`
	Result *PoolResult `json:"result"`
}

// MaxPoolReports bounds the results of one job-pool.done request.
const MaxPoolReports = 100000

// PoolItem is one pooled jobspec and what became of it.
type PoolItem struct {
	ID      int64           `json:"id"`
	Jobspec json.RawMessage `json:"jobspec,omitempty"`
	State   string          `json:"state"`
	// Child describes who pulled it last (the puller's own
	// description, e.g. "job ƒ3nX (2 nodes)").
	Child   string      `json:"child,omitempty"`
	Pulls   int         `json:"pulls,omitempty"` // times handed out
	TAdd    float64     `json:"t_add"`
	TAssign float64     `json:"t_assign,omitempty"`
	TDone   float64     `json:"t_done,omitempty"`
	Result  *PoolResult `json:"result,omitempty"`
}

// PoolInfo is one pool in job-pool.list.
type PoolInfo struct {
	Name     string `json:"name"`
	Userid   uint32 `json:"userid"`
	Closed   bool   `json:"closed"`
	Pending  int    `json:"pending"`
	Assigned int    `json:"assigned"`
	Done     int    `json:"done"`
	Waiting  int    `json:"waiting"` // pulls waiting for work
}

// CheckPoolName reports whether name may name a pool. (A loop, not a
// package-level regexp: compiling `{1,64}` cost every flux process 2% of
// its start-up.)
func CheckPoolName(name string) error {
	ok := len(name) >= 1 && len(name) <= 64
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if !ok {
		return fmt.Errorf("pool name %q: use 1 to 64 letters, digits, '-' or '_'", name)
	}
	return nil
}
