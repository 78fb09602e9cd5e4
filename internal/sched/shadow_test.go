package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// 4 domains of 4 cores and 1 GPU on a 16-core, 4-GPU node.
const numa16 = `[{"cores":"0-3","gpus":"0"},{"cores":"4-7","gpus":"1"},{"cores":"8-11","gpus":"2"},{"cores":"12-15","gpus":"3"}]`

// backfillSim is one side of TestEarliestMatchesLegacy: a pool, a
// queue, the running jobs and a policy.
type backfillSim struct {
	p       *Pool
	q       *Queue
	pol     *Backfill
	running []*Alloc
	resv    []Reservation
	tracked bool // told of starts and ends instead of Running
}

type searchKind int

const (
	oldSearch     searchKind = iota // earliestLegacy
	sweepSearch                     // shadow, Running swept each pass
	trackedSearch                   // shadow, Started and Ended
)

func newBackfillSim(t *testing.T, name string, reserve int, domains bool, fit Fit, kind searchKind) *backfillSim {
	p, _ := numaPool(t, 48, "0-15", "0-3", numa16)
	if !domains {
		for i := range p.nodes {
			p.nodes[i].doms = nil
		}
	}
	p.SetFit(fit)
	p.SetAvailable(idset.MustParse("5,17"), false)
	s := &backfillSim{p: p, q: NewQueue(), pol: NewBackfill(name, 24, reserve)}
	switch kind {
	case oldSearch:
		legacy(s.pol)
	case trackedSearch:
		s.tracked = true
	}
	if !s.tracked {
		s.pol.Running = func() []*Alloc { return s.running }
	}
	s.pol.Reservations = func(r []Reservation) { s.resv = r }
	return s
}

// randomJob draws a job from a mix of small shared, multi-slot,
// GPU, whole-node and unlimited requests.
func randomJob(rng *rand.Rand, id uint64) *Job {
	var r Request
	switch rng.IntN(6) {
	case 0:
		r = Request{Slots: 1, SlotCores: 1 + rng.IntN(4)}
	case 1:
		r = Request{Slots: 1, SlotCores: 1 + rng.IntN(2), SlotGPUs: 1}
	case 2:
		r = Request{Slots: 1 + rng.IntN(8), SlotCores: 1 + rng.IntN(8)}
	case 3:
		n := 1 + rng.IntN(6)
		r = Request{Nodes: n, Slots: n, SlotCores: 16, Exclusive: true}
	case 4:
		r = Request{Slots: 2, SlotCores: 4, SlotGPUs: 2}
	default:
		n := 1 + rng.IntN(3)
		r = Request{Nodes: n, Slots: 2 * n, SlotCores: 2 + rng.IntN(5)}
	}
	if rng.IntN(20) != 0 { // 1 in 20 without a time limit
		r.Duration = float64(10 + rng.IntN(300))
	}
	return &Job{ID: id, Priority: int64(rng.IntN(3)), TSubmit: float64(id), Req: &r}
}

// pass runs one pass and describes its decisions and reservations.
func (s *backfillSim) pass(now float64) string {
	var b strings.Builder
	for _, d := range s.pol.Schedule(s.q, s.p, now) {
		s.q.Remove(d.Job.ID)
		s.running = append(s.running, d.Alloc)
		if s.tracked {
			s.pol.Started(d.Alloc)
		}
		fmt.Fprintf(&b, "start %d %s [%g-%g]\n", d.Job.ID, s.p.Summary(d.Alloc), d.Alloc.Start, d.Alloc.Expiration)
	}
	for _, r := range s.resv {
		fmt.Fprintf(&b, "resv %d %g-%g %s\n", r.Job.ID, r.Start, r.End, s.p.Summary(r.Alloc))
	}
	_, fc, _, fg := s.p.Counts()
	fmt.Fprintf(&b, "free %d cores %d gpus\n", fc, fg)
	return b.String()
}

// TestEarliestMatchesLegacy runs random workloads through the
// reservation search in a shadow copy and through the old search (which
// freed and reclaimed running jobs in the pool itself) side by side, and
// wants the same decisions and reservations in every pass: EASY, hybrid
// and conservative, every fit, with and without NUMA domains, with jobs
// left running past their expiration and jobs without one.
func TestEarliestMatchesLegacy(t *testing.T) {
	for _, pol := range []struct {
		name    string
		reserve int
	}{{"easy", 0}, {"hybrid", 3}, {"conservative", 0}} {
		for _, fit := range []Fit{FirstFit, BestFit, WorstFit} {
			for _, domains := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/domains=%v", pol.name, fit, domains), func(t *testing.T) {
					sims := [3]*backfillSim{
						newBackfillSim(t, pol.name, pol.reserve, domains, fit, oldSearch),
						newBackfillSim(t, pol.name, pol.reserve, domains, fit, sweepSearch),
						newBackfillSim(t, pol.name, pol.reserve, domains, fit, trackedSearch),
					}
					rng := rand.New(rand.NewPCG(7, uint64(fit)))
					id := uint64(1)
					now := 1.0
					reserved := 0
					steps := 400
					if pol.name == "conservative" {
						steps = 150 // every pass makes up to 24 reservations
					}
					for step := range steps {
						// free some jobs: those past their expiration
						// only sometimes (they linger, as a job being
						// killed does), others early at times
						var keep []int
						for k, a := range sims[0].running {
							over := a.Expiration > 0 && a.Expiration <= now
							if over && rng.IntN(3) == 0 || rng.IntN(40) == 0 {
								for _, s := range sims {
									if err := s.p.Free(s.running[k]); err != nil {
										t.Fatal(err)
									}
									if s.tracked {
										s.pol.Ended(s.running[k])
									}
								}
								continue
							}
							keep = append(keep, k)
						}
						for _, s := range sims {
							var left []*Alloc
							for _, k := range keep {
								left = append(left, s.running[k])
							}
							s.running = left
						}
						for range rng.IntN(6) {
							j := randomJob(rng, id)
							id++
							for _, s := range sims {
								c := *j
								r := *j.Req
								c.Req = &r
								if s.p.Feasible(c.Req) == nil {
									s.q.Add(&c)
								}
							}
						}
						if rng.IntN(25) == 0 { // a node goes down or comes back
							ids := idset.MustParse(fmt.Sprint(rng.IntN(48)))
							up := rng.IntN(2) == 0
							for _, s := range sims {
								s.p.SetAvailable(ids, up)
							}
						}
						old := sims[0].pass(now)
						for k, s := range sims[1:] {
							if cur := s.pass(now); cur != old {
								t.Fatalf("step %d at %g:\nold search:\n%snew search (%s):\n%s", step, now, old, [...]string{"swept", "tracked"}[k], cur)
							}
						}
						cur := old
						reserved += strings.Count(cur, "resv ")
						now += float64(1 + rng.IntN(15))
					}
					if reserved == 0 {
						t.Error("no reservation was made: the workload does not test the search")
					}
				})
			}
		}
	}
}

// TestShadowRelease: releasing into the shadow leaves it as Free on the
// pool would, indexes included, and does not touch the pool.
func TestShadowRelease(t *testing.T) {
	p, _ := numaPool(t, 40, "0-15", "0-3", numa16)
	p.SetAvailable(idset.MustParse("3"), false)
	rng := rand.New(rand.NewPCG(1, 1))
	var running []*Alloc
	for id := uint64(0); ; id++ {
		a, err := p.Allocate(randomJob(rng, id).Req, 0)
		if err != nil {
			break
		}
		running = append(running, a)
	}
	before := p.Summary(p.Allocated())
	var s shadow
	sp := s.of(p)
	rel := running[:len(running)/2]
	s.release(append(slices.Clone(rel), rel[0])) // twice: the second is refused
	if got := p.Summary(p.Allocated()); got != before {
		t.Fatalf("the pool changed: %s, was %s", got, before)
	}
	for _, a := range rel {
		if err := p.Free(a); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sp.Summary(sp.Allocated()), p.Summary(p.Allocated()); got != want {
		t.Errorf("shadow holds %s, Free leaves %s", got, want)
	}
	c1, f1, g1, h1 := sp.Counts()
	c2, f2, g2, h2 := p.Counts()
	if c1 != c2 || f1 != f2 || g1 != g2 || h1 != h2 {
		t.Errorf("shadow counts %d %d %d %d, pool's %d %d %d %d", c1, f1, g1, h1, c2, f2, g2, h2)
	}
	for _, tr := range [][2]*maxTree{{sp.freeCores, p.freeCores}, {sp.freeGPUs, p.freeGPUs}, {sp.idle, p.idle}} {
		if !slices.Equal(tr[0].t, tr[1].t) {
			t.Errorf("shadow index differs from the pool's")
		}
	}
}

// TestTrackedOddCallers: a policy told of starts and ends answers as one
// sweeping Running does when the caller frees a job past its expiration
// without saying so (the due jobs are then given back one by one, and
// the freed one is skipped as Free refuses it), and when the clock goes
// back.
func TestTrackedOddCallers(t *testing.T) {
	sims := [2]*backfillSim{
		newBackfillSim(t, "easy", 0, true, FirstFit, sweepSearch),
		newBackfillSim(t, "easy", 0, true, FirstFit, trackedSearch),
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for id := uint64(1); id <= 300; id++ {
		j := randomJob(rng, id)
		for _, s := range sims {
			c, r := *j, *j.Req
			c.Req = &r
			if s.p.Feasible(c.Req) == nil {
				s.q.Add(&c)
			}
		}
	}
	reserved := 0
	for _, now := range []float64{1, 50, 400, 30, 500, 600} {
		if now == 500 {
			// free a job past its expiration without telling
			for k, a := range sims[0].running {
				if a.Expiration > 0 && a.Expiration <= now {
					for _, s := range sims {
						s.p.Free(s.running[k])
					}
					break
				}
			}
		}
		want := sims[0].pass(now)
		if got := sims[1].pass(now); got != want {
			t.Fatalf("at %g:\nswept:\n%stracked:\n%s", now, want, got)
		}
		reserved += strings.Count(want, "resv ")
	}
	if reserved == 0 {
		t.Error("no reservation was made")
	}
}
