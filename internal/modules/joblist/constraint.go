package joblist

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// matcher tests one record against a compiled constraint.
type matcher func(r *record) bool

// constraint is a compiled RFC 31 / RFC 43 constraint object.
type constraint struct {
	match matcher
	// states can match at all: lists holding no such state are skipped.
	states job.State
}

const allStates = job.StateActive | job.StateInactive

// hostlistLimit and ranksLimit bound the size of hostlist and ranks
// operands (RFC 43 allows a limit to keep matching fast).
const (
	hostlistLimit = 1 << 16
	ranksLimit    = 1 << 16
)

func constraintErr(format string, args ...any) error {
	return flux.NewError(syscall.EPROTO, "invalid payload: constraint object invalid: "+fmt.Sprintf(format, args...))
}

// compileConstraint compiles raw (absent or null: match everything).
func compileConstraint(raw json.RawMessage) (*constraint, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return &constraint{match: func(*record) bool { return true }, states: allStates}, nil
	}
	return compileObject(raw)
}

func compileObject(raw json.RawMessage) (*constraint, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, constraintErr("constraint must be an object")
	}
	if len(obj) == 0 {
		return &constraint{match: func(*record) bool { return true }, states: allStates}, nil
	}
	if len(obj) > 1 {
		return nil, constraintErr("constraint object must have exactly one operator")
	}
	for op, val := range obj {
		return compileOp(op, val)
	}
	panic("unreachable")
}

func compileList(op string, val json.RawMessage) ([]*constraint, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(val, &items); err != nil {
		return nil, constraintErr("operator %s requires an array", op)
	}
	out := make([]*constraint, 0, len(items))
	for _, it := range items {
		c, err := compileObject(it)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func compileOp(op string, val json.RawMessage) (*constraint, error) {
	switch op {
	case "and", "or", "not":
		subs, err := compileList(op, val)
		if err != nil {
			return nil, err
		}
		and := func(r *record) bool {
			for _, s := range subs {
				if !s.match(r) {
					return false
				}
			}
			return true
		}
		switch op {
		case "and":
			st := allStates
			for _, s := range subs {
				st &= s.states
			}
			return &constraint{match: and, states: st}, nil
		case "not":
			return &constraint{match: func(r *record) bool { return !and(r) }, states: allStates}, nil
		}
		var st job.State
		for _, s := range subs {
			st |= s.states
		}
		if len(subs) == 0 {
			return &constraint{match: func(*record) bool { return false }, states: 0}, nil
		}
		return &constraint{match: func(r *record) bool {
			for _, s := range subs {
				if s.match(r) {
					return true
				}
			}
			return false
		}, states: st}, nil
	case "userid":
		var ids []int64
		if err := json.Unmarshal(val, &ids); err != nil {
			return nil, constraintErr("userid value must be an array of integers")
		}
		set := make(map[uint32]bool, len(ids))
		for _, id := range ids {
			if id < 0 || id > math.MaxUint32 {
				return nil, constraintErr("invalid userid %d", id)
			}
			if id == math.MaxUint32 { // FLUX_USERID_UNKNOWN: any user
				return &constraint{match: func(*record) bool { return true }, states: allStates}, nil
			}
			set[uint32(id)] = true
		}
		return &constraint{match: func(r *record) bool { return set[r.userid] }, states: allStates}, nil
	case "name", "queue":
		var names []string
		if err := json.Unmarshal(val, &names); err != nil {
			return nil, constraintErr("%s value must be an array of strings", op)
		}
		set := make(map[string]bool, len(names))
		for _, n := range names {
			set[n] = true
		}
		if op == "name" {
			return &constraint{match: func(r *record) bool { return set[r.lab().name] }, states: allStates}, nil
		}
		return &constraint{match: func(r *record) bool { q := r.lab().queue; return q != "" && set[q] }, states: allStates}, nil
	case "states":
		mask, err := parseMaskList(val, func(s string) (uint32, error) {
			st, err := job.ParseState(s)
			return uint32(st), err
		})
		if err != nil {
			return nil, constraintErr("states: %v", err)
		}
		st := job.State(mask)
		return &constraint{match: func(r *record) bool { return r.State&st != 0 }, states: st}, nil
	case "results":
		mask, err := parseMaskList(val, func(s string) (uint32, error) {
			res, err := job.ParseResult(s)
			return uint32(res), err
		})
		if err != nil {
			return nil, constraintErr("results: %v", err)
		}
		res := job.Result(mask)
		return &constraint{match: func(r *record) bool {
			return r.State == job.StateInactive && r.Result&res != 0
		}, states: job.StateInactive}, nil
	case "hostlist":
		var items []string
		if err := json.Unmarshal(val, &items); err != nil {
			return nil, constraintErr("hostlist value must be an array of strings")
		}
		hosts := map[string]bool{}
		for _, s := range items {
			hl, err := hostlist.Parse(s)
			if err != nil {
				return nil, constraintErr("invalid hostlist %q", s)
			}
			for h := range hl.All() {
				hosts[h] = true
				if len(hosts) > hostlistLimit {
					return nil, constraintErr("too many hosts in hostlist constraint")
				}
			}
		}
		return &constraint{match: func(r *record) bool {
			if r.nodelist == "" {
				return false
			}
			hl, err := hostlist.Parse(r.nodelist)
			if err != nil {
				return false
			}
			for h := range hl.All() {
				if hosts[h] {
					return true
				}
			}
			return false
		}, states: allStates}, nil
	case "ranks":
		var items []string
		if err := json.Unmarshal(val, &items); err != nil {
			return nil, constraintErr("ranks value must be a string (in an array of strings)")
		}
		var want idset.Set
		for _, s := range items {
			ids, err := idset.Parse(s)
			if err != nil {
				return nil, constraintErr("invalid ranks %q", s)
			}
			want = want.Union(ids)
		}
		if want.Count() > ranksLimit {
			return nil, constraintErr("too many ranks in ranks constraint")
		}
		return &constraint{match: func(r *record) bool {
			if r.ranks == "" {
				return false
			}
			got, err := idset.Parse(r.ranks)
			return err == nil && !got.Intersect(want).Empty()
		}, states: allStates}, nil
	case "t_submit", "t_depend", "t_priority", "t_sched", "t_run", "t_cleanup", "t_inactive":
		return compileTime(op, val)
	}
	return nil, constraintErr("unknown constraint operator %q", op)
}

// parseMaskList reads an array of integers (bitmasks) and names.
func parseMaskList(val json.RawMessage, name func(string) (uint32, error)) (uint32, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(val, &items); err != nil {
		return 0, fmt.Errorf("value must be an array")
	}
	var mask uint32
	for _, it := range items {
		var n int64
		if json.Unmarshal(it, &n) == nil {
			if n < 0 || n > math.MaxUint32 {
				return 0, fmt.Errorf("invalid value %d", n)
			}
			mask |= uint32(n)
			continue
		}
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			return 0, fmt.Errorf("values must be integers or strings")
		}
		m, err := name(s)
		if err != nil {
			return 0, err
		}
		mask |= m
	}
	return mask, nil
}

func compileTime(op string, val json.RawMessage) (*constraint, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(val, &items); err != nil || len(items) != 1 {
		return nil, constraintErr("%s requires exactly one comparison", op)
	}
	var expr string
	if err := json.Unmarshal(items[0], &expr); err != nil {
		return nil, constraintErr("%s comparison must be a string", op)
	}
	var cmpOp string
	for _, p := range []string{">=", "<=", ">", "<"} {
		if strings.HasPrefix(expr, p) {
			cmpOp = p
			break
		}
	}
	if cmpOp == "" {
		return nil, constraintErr("%s comparison %q needs a >, <, >= or <= prefix", op, expr)
	}
	t, err := strconv.ParseFloat(strings.TrimSpace(expr[len(cmpOp):]), 64)
	if err != nil || t < 0 {
		return nil, constraintErr("%s: invalid timestamp in %q", op, expr)
	}
	var get func(r *record) float64
	var need job.State
	switch op {
	case "t_submit":
		get = func(r *record) float64 { return r.TSubmit }
	case "t_depend":
		get, need = func(r *record) float64 { return r.TDepend }, job.StateDepend
	case "t_priority":
		get, need = func(r *record) float64 { return r.TPriority }, job.StatePriority
	case "t_sched":
		get, need = func(r *record) float64 { return r.TSched }, job.StateSched
	case "t_run":
		get, need = func(r *record) float64 { return r.TRun }, job.StateRun
	case "t_cleanup":
		get, need = func(r *record) float64 { return r.TCleanup }, job.StateCleanup
	case "t_inactive":
		get, need = func(r *record) float64 { return r.TInactive }, job.StateInactive
	}
	states := allStates
	if op == "t_inactive" {
		states = job.StateInactive
	}
	return &constraint{match: func(r *record) bool {
		if need != 0 && r.Entered&need == 0 {
			return false
		}
		v := get(r)
		switch cmpOp {
		case ">=":
			return v >= t
		case "<=":
			return v <= t
		case ">":
			return v > t
		}
		return v < t
	}, states: states}, nil
}
