package sched

// Decision is a pending job a policy chose to start, with the resources
// it took for it from the pool.
type Decision struct {
	Job   *Job
	Alloc *Alloc
}

// Policy decides, in one scheduling pass, which pending jobs to start.
// It allocates their resources from the pool; the caller removes the jobs
// from the queue and answers their requests. Policies hold no goroutines
// and do no I/O, so passes can be replayed in tests.
type Policy interface {
	Name() string
	Schedule(q *Queue, p *Pool, now float64) []Decision
}

// FCFS is first come, first served in queue order (priority, then submit
// time) with bounded lookahead: each pass considers the first Depth
// pending jobs and starts every one of them that fits now, so a job
// blocked at the head does not stop smaller jobs right behind it (there
// is no reservation). Depth 1 is strict FCFS: nothing passes a blocked
// head. Jobs deeper in the queue wait until those before them start.
type FCFS struct {
	Depth int
}

// DefaultQueueDepth is the FCFS lookahead when none is configured.
const DefaultQueueDepth = 8

var _ Policy = (*FCFS)(nil)

// Name implements Policy.
func (*FCFS) Name() string { return "fcfs" }

// Schedule implements Policy.
func (f *FCFS) Schedule(q *Queue, p *Pool, now float64) []Decision {
	depth := f.Depth
	if depth <= 0 {
		depth = DefaultQueueDepth
	}
	var out []Decision
	seen := 0
	for j := range q.All() {
		if seen >= depth {
			break
		}
		seen++
		if p.freeCores.max() == 0 {
			break // nothing free anywhere: no job can start
		}
		if j.Hold {
			continue
		}
		a, err := p.Allocate(j.Req, now)
		if err != nil {
			continue
		}
		out = append(out, Decision{Job: j, Alloc: a})
	}
	return out
}
