package sched

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// FuzzConstraint compiles RFC 31 constraints written as flux-core's
// --requires queries (a user's) over a pool: an error or a node set,
// never a panic.
func FuzzConstraint(f *testing.F) {
	for _, s := range []string{
		"debug", "^batch", "debug|batch", "host:node[0-2]", "rank:1-3", "not (debug or host:node3)",
		"-debug & batch", "'a b'", "((((debug))))", "hosts:'node[1-4]' && ranks:0", "x y z", "(", ")", "|",
	} {
		f.Add(s)
	}
	p := testPool(f)
	f.Fuzz(func(t *testing.T, q string) {
		if len(q) > 512 {
			return
		}
		c, err := jobspec.ParseConstraintQuery(q)
		if err != nil {
			return
		}
		if b, err := p.compile(c, 0); err == nil && len(b) > len(p.nodes) {
			t.Fatalf("%q: a bitset of %d words for %d nodes", q, len(b), len(p.nodes))
		}
	})
}
