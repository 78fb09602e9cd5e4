package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// testPool is 4 nodes × 4 cores (node[0-3]); nodes 2-3 have GPUs 0-1;
// nodes 0-1 have property "debug", nodes 2-3 "batch". All up.
func testPool(t testing.TB) *Pool {
	t.Helper()
	hl, _ := hostlist.Parse("node[0-1]")
	a, err := rset.NewNodes(idset.Range(0, 1), hl, idset.Range(0, 3), idset.Set{})
	if err != nil {
		t.Fatal(err)
	}
	hl, _ = hostlist.Parse("node[2-3]")
	b, err := rset.NewNodes(idset.Range(2, 3), hl, idset.Range(0, 3), idset.Range(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Append(b)
	if err != nil {
		t.Fatal(err)
	}
	r.SetProperty("debug", idset.Range(0, 1))
	r.SetProperty("batch", idset.Range(2, 3))
	p := NewPool(r)
	p.SetAvailable(idset.Range(0, 3), true)
	return p
}

func bigPool(t testing.TB, nodes, cores int) *Pool {
	t.Helper()
	hl, _ := hostlist.Parse(fmt.Sprintf("node[0-%d]", nodes-1))
	r, err := rset.NewNodes(idset.Range(0, uint(nodes-1)), hl, idset.Range(0, uint(cores-1)), idset.Set{})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(r)
	p.SetAvailable(idset.Range(0, uint(nodes-1)), true)
	return p
}

func TestAllocateFirstFit(t *testing.T) {
	props := func(s ...string) *jobspec.Constraint { return &jobspec.Constraint{Op: "properties", Values: s} }
	tests := []struct {
		name string
		req  Request
		want string // Summary, or the error kind's text
	}{
		{"one core", Request{Slots: 1, SlotCores: 1}, "rank0/core0"},
		{"slots pack onto the first node", Request{Slots: 3, SlotCores: 1}, "rank0/core[0-2]"},
		{"slots spill to the next node", Request{Slots: 5, SlotCores: 1}, "rank0/core[0-3] rank1/core0"},
		{"slot of 3 cores twice skips remainders", Request{Slots: 2, SlotCores: 3}, "rank[0-1]/core[0-2]"},
		{"gpu slot goes to gpu nodes", Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}, "rank2/core0,gpu0"},
		{"two nodes non-exclusive", Request{Nodes: 2, Slots: 2, SlotCores: 2}, "rank[0-1]/core[0-1]"},
		{"exclusive nodes take everything", Request{Nodes: 2, Slots: 2, SlotCores: 1, Exclusive: true}, "rank[0-1]/core[0-3]"},
		{"exclusive gpu nodes", Request{Nodes: 1, Slots: 1, SlotCores: 1, SlotGPUs: 2, Exclusive: true}, "rank2/core[0-3],gpu[0-1]"},
		{"constraint properties", Request{Slots: 1, SlotCores: 1, Constraint: props("batch")}, "rank2/core0"},
		{"constraint negated property", Request{Slots: 1, SlotCores: 1, Constraint: props("^debug")}, "rank2/core0"},
		{"constraint hostlist", Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "hostlist", Values: []string{"node3"}}}, "rank3/core0"},
		{"constraint ranks", Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "ranks", Values: []string{"1,3"}}}, "rank1/core0"},
		{"constraint or", Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "or", Args: []*jobspec.Constraint{
			{Op: "hostlist", Values: []string{"node3"}}, {Op: "ranks", Values: []string{"2"}}}}}, "rank2/core0"},
		{"constraint not", Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "not", Args: []*jobspec.Constraint{
			{Op: "ranks", Values: []string{"0-2"}}}}}, "rank3/core0"},
		{"too big now", Request{Slots: 17, SlotCores: 1}, ErrBusy.Error()},
		{"bad constraint", Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "hostlist", Values: []string{"node["}}}, ErrInvalid.Error()},
		{"no slots", Request{Slots: 0, SlotCores: 1}, ErrInvalid.Error()},
		{"uneven nodes", Request{Nodes: 2, Slots: 3, SlotCores: 1}, ErrInvalid.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(t)
			a, err := p.Allocate(&tt.req, 100)
			got := ""
			switch {
			case errors.Is(err, ErrBusy):
				got = ErrBusy.Error()
			case errors.Is(err, ErrInvalid):
				got = ErrInvalid.Error()
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			default:
				got = p.Summary(a)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q (err %v)", got, tt.want, err)
			}
		})
	}
}

func TestFeasible(t *testing.T) {
	tests := []struct {
		req  Request
		want string // "" feasible
	}{
		{Request{Slots: 16, SlotCores: 1}, ""},
		{Request{Nodes: 5, Slots: 5, SlotCores: 1}, "unsatisfiable request: requested 5 nodes but the instance has 4"},
		{Request{Slots: 1, SlotCores: 5}, "unsatisfiable request: requested 5 cores per slot but the largest node of the instance has 4"},
		{Request{Slots: 17, SlotCores: 1}, "unsatisfiable request: requested 17 cores but the instance has 16"},
		{Request{Slots: 1, SlotCores: 1, SlotGPUs: 3}, "unsatisfiable request: requested 3 GPUs per slot but the largest node of the instance has 2"},
		{Request{Slots: 3, SlotCores: 1, SlotGPUs: 2}, "unsatisfiable request: requested 6 GPUs but the instance has 4"},
		{Request{Nodes: 3, Slots: 3, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "properties", Values: []string{"debug"}}},
			"unsatisfiable request: requested 3 nodes but the constraints allow 2"},
		{Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "properties", Values: []string{"nosuch"}}},
			"unsatisfiable request: no node satisfies the constraints"},
		{Request{Nodes: 2, Slots: 2, SlotCores: 1, SlotGPUs: 1, Constraint: &jobspec.Constraint{Op: "ranks", Values: []string{"1-2"}}},
			"unsatisfiable request: requested 2 nodes with 1 core and 1 GPU each but the constraints allow only 1 such node"},
	}
	for _, tt := range tests {
		t.Run(tt.req.String(), func(t *testing.T) {
			p := testPool(t)
			// feasibility ignores what is down and allocated
			p.SetAvailable(idset.New(0), false)
			if _, err := p.Allocate(&Request{Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true}, 0); err != nil {
				t.Fatal(err)
			}
			err := p.Feasible(&tt.req)
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, ErrUnsatisfiable) {
					t.Fatalf("%v does not wrap ErrUnsatisfiable", err)
				}
			}
			if got != tt.want {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDownAndDrainedExcluded(t *testing.T) {
	p := testPool(t)
	p.SetAvailable(idset.Range(0, 2), false)
	a, err := p.Allocate(&Request{Slots: 4, SlotCores: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Summary(a); s != "rank3/core[0-3]" {
		t.Fatalf("got %s", s)
	}
	if _, err := p.Allocate(&Request{Slots: 1, SlotCores: 1}, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("allocated on down nodes: %v", err)
	}
	// resources freed while down are not offered until up again
	p.SetAvailable(idset.New(3), false)
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Allocate(&Request{Slots: 1, SlotCores: 1}, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("allocated on down nodes: %v", err)
	}
	p.SetAvailable(idset.New(1), true)
	a, err = p.Allocate(&Request{Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true}, 0)
	if err != nil || p.Summary(a) != "rank1/core[0-3]" {
		t.Fatalf("got %v %v", a, err)
	}
	_, free, _, _ := p.Counts()
	if free != 0 {
		t.Fatalf("free cores %d, want 0", free)
	}
}

func TestExpiration(t *testing.T) {
	p := testPool(t)
	a, _ := p.Allocate(&Request{Slots: 1, SlotCores: 1, Duration: 60}, 1000)
	if a.Start != 1000 || a.Expiration != 1060 {
		t.Fatalf("window %v-%v", a.Start, a.Expiration)
	}
	p.SetExpiration(1030)
	a, _ = p.Allocate(&Request{Slots: 1, SlotCores: 1, Duration: 60}, 1000)
	if a.Expiration != 1030 {
		t.Fatalf("expiration %v, want the instance's 1030", a.Expiration)
	}
	a, _ = p.Allocate(&Request{Slots: 1, SlotCores: 1}, 1000)
	if a.Expiration != 1030 {
		t.Fatalf("unlimited job expiration %v, want the instance's 1030", a.Expiration)
	}
}

func TestFreeClaimConflicts(t *testing.T) {
	p := testPool(t)
	a, _ := p.Allocate(&Request{Slots: 2, SlotCores: 1}, 0)
	if err := p.Claim(a); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim of allocated: %v", err)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(a); !errors.Is(err, ErrConflict) {
		t.Fatalf("double free: %v", err)
	}
	// round trip through R
	b, _ := p.Allocate(&Request{Nodes: 2, Slots: 2, SlotCores: 1, SlotGPUs: 1}, 0)
	r, err := rset.Parse(p.AppendR(nil, b))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.AllocFromR(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(c); err != nil {
		t.Fatal(err)
	}
	if err := p.Claim(c); err != nil {
		t.Fatal(err)
	}
	if got := p.Summary(p.Allocated()); got != "rank[2-3]/core0,gpu0" {
		t.Fatalf("allocated %q", got)
	}
	// unknown resources
	bad, _ := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"9","children":{"core":"0"}}]}}`))
	if _, err := p.AllocFromR(bad); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown rank: %v", err)
	}
	bad, _ = rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"7"}}]}}`))
	if _, err := p.AllocFromR(bad); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown core: %v", err)
	}
}

func TestPartialRemove(t *testing.T) {
	p := testPool(t)
	a, _ := p.Allocate(&Request{Nodes: 2, Slots: 2, SlotCores: 2}, 0)
	r, _ := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}}]}}`))
	part, err := p.AllocFromR(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(part); err != nil {
		t.Fatal(err)
	}
	a.Remove(part)
	if got := p.Summary(a); got != "rank1/core[0-1]" {
		t.Fatalf("rest %q", got)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	if !p.Allocated().Empty() {
		t.Fatalf("still allocated: %s", p.Summary(p.Allocated()))
	}
}

// TestAppendRMatchesRset checks the hand-written encoder against pkg/rset
// on random allocations: same resources, hostnames, properties, times.
func TestAppendRMatchesRset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := testPool(t)
	for iter := 0; iter < 300; iter++ {
		req := Request{Slots: 1 + rng.IntN(6), SlotCores: 1 + rng.IntN(2)}
		if rng.IntN(3) == 0 {
			req.SlotGPUs = 1
		}
		if rng.IntN(3) == 0 {
			req.Nodes = 1
			req.Slots = 1
		}
		a, err := p.Allocate(&req, float64(iter))
		if err != nil {
			p = testPool(t)
			continue
		}
		doc := p.AppendR(nil, a)
		got, err := rset.Parse(doc)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		want := p.Inventory().Intersect(got)
		if !got.Ranks().Equal(want.Ranks()) || got.NCores() != a.NCores() || got.NGPUs() != a.NGPUs() {
			t.Fatalf("%s: resources differ from the inventory's", doc)
		}
		for n := range got.All() {
			host, _ := p.Inventory().Host(n.Rank)
			if n.Hostname != host {
				t.Fatalf("%s: rank %d host %q want %q", doc, n.Rank, n.Hostname, host)
			}
			wantProps := p.Inventory().RankProperties(n.Rank)
			if fmt.Sprint(got.RankProperties(n.Rank)) != fmt.Sprint(wantProps) {
				t.Fatalf("%s: rank %d properties %v want %v", doc, n.Rank, got.RankProperties(n.Rank), wantProps)
			}
		}
		if got.StartTime() != float64(iter) || got.String() != p.Summary(a) {
			t.Fatalf("%s: short form %q, summary %q", doc, got.String(), p.Summary(a))
		}
	}
}

// TestInvariantsRandom allocates and frees at random on a bigger pool and
// checks that allocations never overlap and the indexes stay right.
func TestInvariantsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := bigPool(t, 37, 5)
	var live []*Alloc
	used := map[[2]int]bool{}
	for iter := 0; iter < 5000; iter++ {
		if len(live) > 0 && rng.IntN(2) == 0 {
			k := rng.IntN(len(live))
			a := live[k]
			live = append(live[:k], live[k+1:]...)
			for _, na := range a.Nodes {
				for pos := na.cores.next(0); pos >= 0; pos = na.cores.next(pos + 1) {
					delete(used, [2]int{int(na.node), pos})
				}
			}
			if err := p.Free(a); err != nil {
				t.Fatal(err)
			}
			continue
		}
		req := Request{Slots: 1 + rng.IntN(8), SlotCores: 1 + rng.IntN(3)}
		if rng.IntN(4) == 0 {
			req.Nodes = 1 + rng.IntN(3)
			req.Slots = req.Nodes
			req.Exclusive = rng.IntN(2) == 0
		}
		a, err := p.Allocate(&req, 0)
		if errors.Is(err, ErrBusy) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.NCores() < req.Slots*req.SlotCores {
			t.Fatalf("%s got %d cores", req.String(), a.NCores())
		}
		for _, na := range a.Nodes {
			for pos := na.cores.next(0); pos >= 0; pos = na.cores.next(pos + 1) {
				key := [2]int{int(na.node), pos}
				if used[key] {
					t.Fatalf("core %v allocated twice", key)
				}
				used[key] = true
			}
		}
		live = append(live, a)
		// the indexes agree with the per-node counts
		total := 0
		for i := range p.nodes {
			if p.freeCores.get(i) != p.nodes[i].nCores || int(p.nodes[i].nCores) != p.nodes[i].coreFree.count() {
				t.Fatalf("node %d index out of date", i)
			}
			total += int(p.nodes[i].nCores)
		}
		if _, free, _, _ := p.Counts(); free != total || total+len(used) != 37*5 {
			t.Fatalf("free %d, counted %d, used %d", free, total, len(used))
		}
	}
}

func TestFromJobspec(t *testing.T) {
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: 4, CoresPerTask: 2, GPUsPerTask: 1, NNodes: 2, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	js.SetDuration(30)
	js.SetConstraints(&jobspec.Constraint{Op: "properties", Values: []string{"batch"}})
	r, err := FromJobspec(js)
	if err != nil {
		t.Fatal(err)
	}
	if r.Nodes != 2 || r.Slots != 4 || r.SlotCores != 2 || r.SlotGPUs != 1 || !r.Exclusive || r.Duration != 30 || r.Constraint == nil {
		t.Fatalf("request %+v", r)
	}
	if r.key() != `{"properties":["batch"]}` {
		t.Fatalf("key %s", r.key())
	}
}

// TestAllocateTinyDuration: a duration too small to move the start time
// (1e-30 s) still gives an R that ends after it starts (RFC 20).
func TestAllocateTinyDuration(t *testing.T) {
	p := bigPool(t, 1, 2)
	now := 1.7962271736595454e+09
	a, err := p.Allocate(&Request{Slots: 1, SlotCores: 1, Duration: 1e-30}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !(a.Expiration > a.Start) {
		t.Fatalf("start %v expiration %v", a.Start, a.Expiration)
	}
}
