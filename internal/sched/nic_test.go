package sched

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// The shared topologies' domains with their NICs, as the resource module
// reads them from the hwloc XML (internal/modules/resource TestHwlocNUMA):
// corona's fabric is on its second socket only; ipa20's first domain has
// only management Ethernet; sierra has fabric NICs on both sockets.
const (
	coronaNICs = `[{"cores":"0-23","gpus":"0-3","socket":0},` +
		`{"cores":"24-47","gpus":"4-7","socket":1,"nics":["hsi0","mlx5_0","eno1","eno2"]}]`
	sierraNICs = `[{"cores":"0-21","gpus":"0-1","socket":0,"nics":["hsi0","mlx5_0","hsi1","mlx5_1","enP5p1s0f0","enP5p1s0f1"]},` +
		`{"cores":"22-43","gpus":"2-3","socket":1,"nics":["hsi2","mlx5_2","hsi3","mlx5_3"]}]`
	ipa20NICs = `[{"cores":"0-13","socket":0,"nics":["eno8303","eno8403"]},{"cores":"14-27","gpus":"1","socket":0,"nics":["ibp94s0","mlx5_2"]},` +
		`{"cores":"28-41","socket":0},{"cores":"42-55","gpus":"0","socket":0,"nics":["hsi0","mlx5_0","ibs2f1","mlx5_1"]},` +
		`{"cores":"56-69","socket":1},{"cores":"70-83","gpus":"3","socket":1,"nics":["ibp218s0","mlx5_3"]},` +
		`{"cores":"84-97","socket":1},{"cores":"98-111","gpus":"2","socket":1}]`
)

// claimOn marks cores and GPUs of rank as allocated.
func claimOn(t *testing.T, p *Pool, rank uint, cores, gpus string) {
	t.Helper()
	r, err := rset.NewNodes(idset.New(rank), nil, idset.MustParse(cores), idset.MustParse(gpus))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.AllocFromR(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Claim(a); err != nil {
		t.Fatal(err)
	}
}

// nodeCores returns the cores and GPUs a holds on rank.
func nodeCores(t *testing.T, p *Pool, a *Alloc, rank uint) (cores, gpus idset.Set) {
	t.Helper()
	r, err := rset.Parse(p.AppendR(nil, a))
	if err != nil {
		t.Fatal(err)
	}
	for n := range r.All() {
		if n.Rank == rank {
			return n.Cores, n.GPUs
		}
	}
	t.Fatalf("the allocation has nothing on rank %d", rank)
	return
}

// TestNICDomain: on corona, a job spanning nodes gets each node's slot
// in the domain of the fabric NIC, under every fit; a job on one node is
// placed as before (the lowest domain that fits); without the nic
// plugin the spanning job is too.
func TestNICDomain(t *testing.T) {
	nicDom := idset.MustParse("24-47")
	for _, fit := range []Fit{FirstFit, WorstFit, BestFit, HighID} {
		t.Run(fit.String(), func(t *testing.T) {
			p, _ := numaPool(t, 2, "0-47", "0-7", coronaNICs)
			p.SetFit(fit)
			if p.nics != 2 {
				t.Fatalf("%d nodes with NICs in some domains, want 2", p.nics)
			}
			a := numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 2, SlotGPUs: 1})
			for rank := range uint(2) {
				cores, gpus := nodeCores(t, p, a, rank)
				if !cores.Difference(nicDom).Empty() || !gpus.Difference(idset.MustParse("4-7")).Empty() {
					t.Errorf("-N2: rank %d got cores %s gpus %s, want them in the NIC's domain (24-47, 4-7)", rank, cores, gpus)
				}
			}
			p.Free(a)
			one := numaAlloc(t, p, Request{Nodes: 1, Slots: 1, SlotCores: 2, SlotGPUs: 1})
			for rank := range p.Ranks(one).All() {
				if cores, _ := nodeCores(t, p, one, rank); !cores.Intersect(nicDom).Empty() {
					t.Errorf("-N1: cores %s in the NIC's domain, want domain 0 (placed as before)", cores)
				}
			}
			p.Free(one)
			// slots without a node count, more than one node holds:
			// the second node's share goes to the NIC's domain
			if fit == FirstFit {
				many := numaAlloc(t, p, Request{Slots: 60, SlotCores: 1})
				if cores, _ := nodeCores(t, p, many, 1); cores.Count() != 12 || !cores.Difference(nicDom).Empty() {
					t.Errorf("-n60: rank 1 got cores %s, want 12 of 24-47", cores)
				}
				p.Free(many)
			}
			p.SetProfile(DefaultProfile().WithoutPreference("nic"))
			b := numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 2, SlotGPUs: 1})
			for rank := range uint(2) {
				if cores, _ := nodeCores(t, p, b, rank); !cores.Intersect(nicDom).Empty() {
					t.Errorf("nic plugin off: rank %d got cores %s, want domain 0", rank, cores)
				}
			}
		})
	}
}

// TestNICNodeChoice: a spanning job passes over a node whose NIC domain
// is full for one with room there; a node set aside only for its NIC is
// used before one that would split the slot; with every node's NIC
// domain full the job still runs.
func TestNICNodeChoice(t *testing.T) {
	for _, fit := range []Fit{FirstFit, WorstFit, BestFit} {
		t.Run(fit.String(), func(t *testing.T) {
			p, _ := numaPool(t, 4, "0-47", "0-7", coronaNICs)
			claimOn(t, p, 0, "0-23", "4-7")  // node0 splits: cores in 0, GPUs in 1
			claimOn(t, p, 1, "24-47", "4-7") // node1: NIC domain full, domain 0 free
			claimOn(t, p, 3, "24-47", "4-7") // node3: likewise
			p.SetFit(fit)
			a := numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 2, SlotGPUs: 1})
			got := p.Ranks(a)
			if !got.Contains(2) || got.Contains(0) {
				t.Errorf("-N2 went to %s, want rank 2 and one of 1 or 3 (0 splits)", got)
			}
			if cores, _ := nodeCores(t, p, a, 2); !cores.Difference(idset.MustParse("24-47")).Empty() {
				t.Errorf("rank 2: cores %s, want the NIC's domain", cores)
			}
			p.Free(a)
			claimOn(t, p, 2, "24-47", "4-7") // no NIC domain has room anywhere
			b := numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 2, SlotGPUs: 1})
			if got := p.Ranks(b); got.Contains(0) {
				t.Errorf("-N2 went to %s: node0 splits while others hold the slot whole", got)
			}
		})
	}
}

// TestNICTopologies: on sierra (fabric on both sockets) the plugin has
// nothing to choose; on ipa20 a spanning job's slot goes to a domain with
// a fabric NIC, not the first domain (management Ethernet only); a slot
// bigger than any NIC domain is placed as numa places it.
func TestNICTopologies(t *testing.T) {
	p, _ := numaPool(t, 2, "0-43", "0-3", sierraNICs)
	if p.nics != 0 {
		t.Errorf("sierra: %d nodes with NICs in some domains, want 0", p.nics)
	}
	a := numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 2})
	if cores, _ := nodeCores(t, p, a, 0); !cores.Difference(idset.MustParse("0-21")).Empty() {
		t.Errorf("sierra: cores %s, want domain 0", cores)
	}

	p, _ = numaPool(t, 2, "0-111", "0-3", ipa20NICs)
	a = numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 4})
	if cores, _ := nodeCores(t, p, a, 0); !cores.Difference(idset.MustParse("14-27")).Empty() {
		t.Errorf("ipa20: cores %s, want domain 1 (14-27: mlx5_2), not 0 (Ethernet only)", cores)
	}
	p.Free(a)
	big := numaAlloc(t, p, Request{Nodes: 2, Slots: 2, SlotCores: 20})
	if cores, _ := nodeCores(t, p, big, 0); cores.Count() != 20 {
		t.Errorf("ipa20: a 20-core slot got %s", cores)
	}
}
