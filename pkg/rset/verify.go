package rset

import (
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// Verify checks the resources a node reports (actual) against what was
// expected of it (expected): every rank of actual must be in expected,
// carry the same hostname when both name it, and have at least the cores
// and GPUs expected lists for it. Ranks of expected absent from actual are
// not checked. The first problem found, in rank order, is returned as an
// error wrapping ErrMismatch. Resources actual has beyond expectations
// are not an error; they are returned as extra (empty when none).
func Verify(expected, actual *R) (extra *R, err error) {
	var ah, eh func(int) string
	if actual.names != nil && expected.names != nil {
		ah, eh = actual.names.getter(actual.nranks), expected.names.getter(actual.nranks)
	}
	var b builder
	overlay(actual.spans, expected.spans, func(lo, hi uint, ia, ib int) {
		if err != nil || ia < 0 {
			return
		}
		ranks := idset.Range(lo, hi)
		if ib < 0 {
			err = errorf(ErrMismatch, "rank%s not in the expected set", bracketed(ranks))
			return
		}
		asp, esp := actual.spans[ia], expected.spans[ib]
		if ah != nil {
			for rank := lo; ; rank++ {
				a := ah(asp.pos + int(rank-asp.lo))
				e := eh(esp.pos + int(rank-esp.lo))
				if a != "" && e != "" && a != e {
					err = errorf(ErrMismatch, "rank%d hostname is %s, expected %s", rank, a, e)
					return
				}
				if rank == hi {
					break
				}
			}
		}
		ach, ech := actual.groups[asp.g].ch, expected.groups[esp.g].ch
		if missing := ech.diff(ach); !missing.empty() {
			err = errorf(ErrMismatch, "rank%s is missing %s", bracketed(ranks), missing.short()[1:])
			return
		}
		if more := ach.diff(ech); !more.empty() {
			b.add(b.slot(more), lo, hi)
		}
	})
	if err != nil {
		return nil, err
	}
	extra = &R{}
	extra.setGroups(b.build())
	extra.inheritNames(actual, nil)
	return extra, nil
}
