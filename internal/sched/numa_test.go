package sched

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// The NUMA layouts of the shared hwloc topologies, as the resource module
// reads them (internal/modules/resource TestHwlocNUMA checks these
// against the XML).
var topologies = []struct {
	name, cores, gpus, domains string
}{
	{"corona", "0-47", "0-7", `[{"cores":"0-23","gpus":"0-3"},{"cores":"24-47","gpus":"4-7"}]`},
	{"sierra", "0-43", "0-3", `[{"cores":"0-21","gpus":"0-1"},{"cores":"22-43","gpus":"2-3"}]`},
	{"ipa20", "0-111", "0-3", `[{"cores":"0-13"},{"cores":"14-27","gpus":"1"},{"cores":"28-41"},{"cores":"42-55","gpus":"0"},` +
		`{"cores":"56-69"},{"cores":"70-83","gpus":"3"},{"cores":"84-97"},{"cores":"98-111","gpus":"2"}]`},
	{"tuo.SPX", "0-95", "0-3", `[{"cores":"0-23","gpus":"0"},{"cores":"24-47","gpus":"1"},{"cores":"48-71","gpus":"2"},{"cores":"72-95","gpus":"3"}]`},
	{"tuo.TPX", "0-95", "0-11", `[{"cores":"0-23","gpus":"0-2"},{"cores":"24-47","gpus":"3-5"},{"cores":"48-71","gpus":"6-8"},{"cores":"72-95","gpus":"9-11"}]`},
	{"tuo.CPX", "0-95", "0-23", `[{"cores":"0-23","gpus":"0-5"},{"cores":"24-47","gpus":"6-11"},{"cores":"48-71","gpus":"12-17"},{"cores":"72-95","gpus":"18-23"}]`},
}

// numaPool is a pool of nodes alike with the given layout in R's
// scheduling key.
func numaPool(t testing.TB, nodes int, cores, gpus, domains string) (*Pool, []rset.NUMADomain) {
	t.Helper()
	hl, _ := hostlist.Parse(fmt.Sprintf("node[0-%d]", nodes-1))
	r, err := rset.NewNodes(idset.Range(0, uint(nodes-1)), hl, idset.MustParse(cores), idset.MustParse(gpus))
	if err != nil {
		t.Fatal(err)
	}
	var doms []rset.NUMADomain
	if err := json.Unmarshal([]byte(domains), &doms); err != nil {
		t.Fatal(err)
	}
	if err := r.SetNUMA([]rset.NUMAGroup{{Ranks: idset.Range(0, uint(nodes-1)), Domains: doms}}); err != nil {
		t.Fatal(err)
	}
	p := NewPool(r)
	p.SetAvailable(idset.Range(0, uint(nodes-1)), true)
	return p, doms
}

// placed returns the cores and GPUs of a (one node) and the domains they
// touch.
func placed(t *testing.T, p *Pool, a *Alloc, doms []rset.NUMADomain) (cores, gpus idset.Set, in []int) {
	t.Helper()
	r, err := rset.Parse(p.AppendR(nil, a))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(r.Scheduling()), rset.NUMAKey) {
		t.Fatalf("a job's R carries the instance's domains: %s", r.Scheduling())
	}
	for n := range r.All() {
		cores, gpus = cores.Union(n.Cores), gpus.Union(n.GPUs)
	}
	for d, dom := range doms {
		if !cores.Intersect(dom.Cores).Empty() || !gpus.Intersect(dom.GPUs).Empty() {
			in = append(in, d)
		}
	}
	return cores, gpus, in
}

func numaAlloc(t *testing.T, p *Pool, req Request) *Alloc {
	t.Helper()
	a, err := p.Allocate(&req, 0)
	if err != nil {
		t.Fatalf("%s: %v", &req, err)
	}
	return a
}

// TestNUMASlots: on every shared topology, under every Fit, a slot's
// cores and GPUs come from one domain while one has room, and from
// several only when none does.
func TestNUMASlots(t *testing.T) {
	for _, topo := range topologies {
		for _, fit := range []Fit{FirstFit, WorstFit, BestFit} {
			t.Run(topo.name+"/"+fit.String(), func(t *testing.T) {
				p, doms := numaPool(t, 1, topo.cores, topo.gpus, topo.domains)
				p.SetFit(fit)
				// gpuDom: the lowest domain with a GPU; nextGPU: another
				gpuDom, nextGPU := -1, -1
				for d, dom := range doms {
					switch {
					case dom.GPUs.Empty():
					case gpuDom < 0:
						gpuDom = d
					case nextGPU < 0:
						nextGPU = d
					}
				}
				cg := Request{Slots: 1, SlotCores: 2, SlotGPUs: 1}

				// 1. a -c2 -g1 slot lands in one domain
				a := numaAlloc(t, p, cg)
				if _, _, in := placed(t, p, a, doms); len(in) != 1 {
					t.Fatalf("-c2 -g1 spans domains %v", in)
				}
				p.Free(a)

				// 2. the bug: a job holds all of the first GPU
				// domain's cores; the next -c2 -g1 gets cores and a GPU
				// of another domain, not cores there and a GPU here
				size := doms[gpuDom].Cores.Count()
				held, err := p.AllocFromR(rWith(t, doms[gpuDom].Cores, idset.Set{}))
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Claim(held); err != nil {
					t.Fatal(err)
				}
				a = numaAlloc(t, p, cg)
				_, gpus, in := placed(t, p, a, doms)
				if len(in) != 1 || in[0] == gpuDom || gpus.Count() != 1 {
					t.Fatalf("after domain %d's cores went: -c2 -g1 got gpus %s in domains %v", gpuDom, gpus, in)
				}
				p.Free(a)
				p.Free(held)

				// 3. a domain's remainder too small for the slot: the
				// slot goes to another domain whole
				left, err := p.AllocFromR(rWith(t, firstN(doms[gpuDom].Cores, size-1), idset.Set{}))
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Claim(left); err != nil {
					t.Fatal(err)
				}
				a = numaAlloc(t, p, cg)
				if _, _, in := placed(t, p, a, doms); len(in) != 1 || in[0] == gpuDom {
					t.Fatalf("1 core left in domain %d: -c2 -g1 went to domains %v", gpuDom, in)
				}
				p.Free(a)
				p.Free(left)

				// 4. a slot bigger than any domain still fits, spread
				big := numaAlloc(t, p, Request{Slots: 1, SlotCores: size + 2, SlotGPUs: 1})
				if cores, _, in := placed(t, p, big, doms); cores.Count() != size+2 || len(in) < 2 {
					t.Fatalf("-c%d: cores %s in domains %v", size+2, cores, in)
				}
				p.Free(big)

				// 5. several slots on the node: each in one domain
				if nextGPU >= 0 {
					many := numaAlloc(t, p, Request{Slots: 2, SlotCores: 2, SlotGPUs: 1})
					if _, gpus, _ := placed(t, p, many, doms); gpus.Count() != 2 {
						t.Fatalf("2 slots: gpus %s", gpus)
					}
					p.Free(many)
				}
				// 6. a whole node is a whole node
				excl := numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true})
				if c, g, _ := placed(t, p, excl, doms); c.String() != topo.cores || g.String() != topo.gpus {
					t.Fatalf("exclusive: cores %s gpus %s", c, g)
				}
				p.Free(excl)
				if _, free, _, freeG := p.Counts(); free != idset.MustParse(topo.cores).Count() || freeG != idset.MustParse(topo.gpus).Count() {
					t.Fatalf("not all free at the end: %d cores %d gpus", free, freeG)
				}
			})
		}
	}
}

// TestNUMAHoles: best-fit and first-fit put a slot in the fullest domain
// that holds it (big holes stay big); worst-fit in the emptiest.
func TestNUMAHoles(t *testing.T) {
	topo := topologies[0] // corona
	for _, tc := range []struct {
		fit  Fit
		want string
	}{
		{FirstFit, "20-21"}, {BestFit, "20-21"}, {WorstFit, "24-25"},
	} {
		p, doms := numaPool(t, 1, topo.cores, topo.gpus, topo.domains)
		p.SetFit(tc.fit)
		numaAlloc(t, p, Request{Slots: 1, SlotCores: 20}) // cores 0-19: 4 left in domain 0
		a := numaAlloc(t, p, Request{Slots: 1, SlotCores: 2, SlotGPUs: 1})
		cores, _, in := placed(t, p, a, doms)
		if cores.String() != tc.want || len(in) != 1 {
			t.Errorf("%v: cores %s in domains %v, want %s", tc.fit, cores, in, tc.want)
		}
	}
}

// TestNUMAIssue24 is the report as it happened: corona, a job of
// 24 cores, then -n1 -c2 -g1 (sched-simple's default worst-fit).
func TestNUMAIssue24(t *testing.T) {
	topo := topologies[0]
	p, doms := numaPool(t, 1, topo.cores, topo.gpus, topo.domains)
	p.SetFit(WorstFit)
	first := numaAlloc(t, p, Request{Slots: 1, SlotCores: 24})
	if c, _, _ := placed(t, p, first, doms); c.String() != "0-23" {
		t.Fatalf("-c24 got cores %s", c)
	}
	a := numaAlloc(t, p, Request{Slots: 1, SlotCores: 2, SlotGPUs: 1})
	if c, g, _ := placed(t, p, a, doms); c.String() != "24-25" || g.String() != "4" {
		t.Fatalf("-c2 -g1 got cores %s gpu %s, want 24-25 and 4", c, g)
	}
}

// TestNUMAMalformed: a malformed or partial record leaves matching as
// without domains.
func TestNUMAMalformed(t *testing.T) {
	r, err := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-3","gpu":"0-1"}}]},` +
		`"scheduling":{"fluxgo.numa":[{"ranks":"0","domains":"nonsense"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(r)
	p.SetAvailable(idset.New(0), true)
	if p.nodes[0].doms != nil {
		t.Fatal("domains from a malformed record")
	}
	if got := p.AppendR(nil, numaAlloc(t, p, Request{Slots: 1, SlotCores: 1})); strings.Contains(string(got), "scheduling") {
		t.Fatalf("job R %s", got)
	}
}

func rWith(t *testing.T, cores, gpus idset.Set) *rset.R {
	t.Helper()
	r, err := rset.NewNodes(idset.New(0), nil, cores, gpus)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func firstN(s idset.Set, n int) idset.Set {
	var out idset.Set
	for id := range s.All() {
		if out.Count() == n {
			break
		}
		out.Add(id)
	}
	return out
}

// TestNUMANodeChoice: a node whose free cores and GPUs are in different
// domains is passed over for a node with a domain that has room, under
// every fit, and used when no other node can hold the slot.
func TestNUMANodeChoice(t *testing.T) {
	for _, fit := range []Fit{FirstFit, WorstFit, BestFit} {
		t.Run(fit.String(), func(t *testing.T) {
			tp := topologies[0] // corona: 2 x (24 cores, 4 GPUs)
			p, doms := numaPool(t, 3, tp.cores, tp.gpus, tp.domains)
			p.SetFit(FirstFit)
			// node0: cores 20-23 free in domain 0, GPUs 4-7 in domain 1
			numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 20, SlotGPUs: 4})
			numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 24})
			// node1: the same; node2 untouched
			numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 20, SlotGPUs: 4})
			numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 24})
			p.SetFit(fit)
			for _, req := range []Request{{Slots: 1, SlotCores: 2, SlotGPUs: 1}, {Nodes: 1, Slots: 1, SlotCores: 2, SlotGPUs: 1}} {
				a := numaAlloc(t, p, req)
				if got := p.Ranks(a).String(); got != "2" {
					t.Fatalf("%s went to rank %s, want 2 (ranks 0-1 would split it)", &req, got)
				}
				if _, _, in := placed(t, p, a, doms); len(in) != 1 {
					t.Errorf("%s: in domains %v", &req, in)
				}
				if err := p.Free(a); err != nil {
					t.Fatal(err)
				}
			}
			// node2 full: the split nodes are used rather than nothing
			full := numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 48, SlotGPUs: 8})
			if got := p.Ranks(full).String(); got != "2" {
				t.Fatalf("the whole node went to %s", got)
			}
			a := numaAlloc(t, p, Request{Slots: 2, SlotCores: 2, SlotGPUs: 1})
			if got := p.Ranks(a).Count(); got == 0 {
				t.Fatal("no nodes")
			}
		})
	}
}

// TestNUMANodeChoiceSlots: a request for slots without a node count
// takes on each node the slots its domains hold whole, and the rest
// from nodes that do not split them before splitting any.
func TestNUMANodeChoiceSlots(t *testing.T) {
	tp := topologies[0]
	p, _ := numaPool(t, 2, tp.cores, tp.gpus, tp.domains)
	// node0: domain 0 has 4 cores and no GPU, domain 1 4 GPUs and no core
	numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 20, SlotGPUs: 4})
	numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 24})
	a := numaAlloc(t, p, Request{Slots: 3, SlotCores: 2, SlotGPUs: 1})
	if got := p.Ranks(a).String(); got != "1" {
		t.Errorf("3 slots went to %s, want 1 (node0 splits every slot)", got)
	}
}

// TestNUMAGrow: nodes added by Grow bring their domains (R's scheduling
// key of the growth), and Shrink forgets them.
func TestNUMAGrow(t *testing.T) {
	tp := topologies[0]
	p, doms := numaPool(t, 1, tp.cores, tp.gpus, tp.domains)
	hl, _ := hostlist.Parse("node1")
	r, err := rset.NewNodes(idset.Range(1, 1), hl, idset.MustParse(tp.cores), idset.MustParse(tp.gpus))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetNUMA([]rset.NUMAGroup{{Ranks: idset.Range(1, 1), Domains: doms}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Grow(r); err != nil {
		t.Fatal(err)
	}
	p.SetAvailable(idset.Range(0, 1), true)
	if p.numa != 2 || p.nodes[1].doms == nil {
		t.Fatalf("after Grow: %d nodes with domains", p.numa)
	}
	// rank 0 full: the slot goes to the grown node, in one domain
	numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 48, SlotGPUs: 8}) // rank 0, whole
	a := numaAlloc(t, p, Request{Slots: 1, SlotCores: 2, SlotGPUs: 1})
	if _, _, in := placed(t, p, a, doms); len(in) != 1 {
		t.Errorf("a grown node's slot is in domains %v", in)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := p.Shrink(idset.Range(1, 1)); err != nil {
		t.Fatal(err)
	}
	if p.numa != 1 {
		t.Errorf("after Shrink: %d nodes with domains, want 1", p.numa)
	}
}
