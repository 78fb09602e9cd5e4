package shellproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/pmi"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// shellKVS is the PMI key-value space of one job as seen by one shell.
// A barrier completes when every task of the job has entered it: the
// shell gathers its local tasks' puts, sends them to the leader shell
// (job-shell.pmi-fence), and the leader answers every shell with the
// puts of all of them.
type shellKVS struct {
	j *job

	mu      sync.Mutex
	vals    map[string]string
	pending []pmi.KeyValue
	arrived int
	round   chan struct{}
	err     error
}

var (
	_ pmi.KVS     = (*shellKVS)(nil)
	_ pmi.Aborter = (*shellKVS)(nil)
)

func newShellKVS(j *job) *shellKVS {
	return &shellKVS{j: j, vals: make(map[string]string), round: make(chan struct{})}
}

func (k *shellKVS) preput(key, val string) {
	k.mu.Lock()
	k.vals[key] = val
	k.mu.Unlock()
}

// Fence implements pmi.KVS.
func (k *shellKVS) Fence(ctx context.Context, rank int, puts []pmi.KeyValue) error {
	k.mu.Lock()
	k.pending = append(k.pending, puts...)
	k.arrived++
	ch := k.round
	local := k.j.plan.Counts[k.j.idx]
	if k.arrived == local {
		batch := k.pending
		k.pending = nil
		k.arrived = 0
		k.mu.Unlock()
		k.j.x.h.Post(func() { k.exchange(batch) })
	} else {
		k.mu.Unlock()
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// exchange sends this shell's puts to the leader and completes the round
// with everyone's (runs on the module goroutine).
func (k *shellKVS) exchange(puts []pmi.KeyValue) {
	j := k.j
	kv := make([][2]string, len(puts))
	for i, p := range puts {
		kv[i] = [2]string{p.Key, p.Value}
	}
	leader := uint32(j.plan.Ranks[0])
	f, err := j.x.h.RPC("job-shell.pmi-fence", leader, map[string]any{
		"id": j.id, "index": j.idx, "nshells": j.group.size(len(j.plan.Ranks)), "group": j.group.n, "puts": kv,
	}, 0)
	if err != nil {
		k.complete(nil, err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err != nil {
			k.complete(nil, err)
			return
		}
		var resp struct {
			Puts [][2]string `json:"puts"`
		}
		if err := m.UnmarshalPayload(&resp); err != nil {
			k.complete(nil, err)
			return
		}
		k.complete(resp.Puts, nil)
	})
}

func (k *shellKVS) complete(puts [][2]string, err error) {
	k.mu.Lock()
	for _, p := range puts {
		k.vals[p[0]] = p[1]
	}
	k.err = err
	close(k.round)
	k.round = make(chan struct{})
	k.mu.Unlock()
}

// merge adds puts made by the shells of a growth (leader).
func (k *shellKVS) merge(puts [][2]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range puts {
		k.vals[p[0]] = p[1]
	}
}

// all returns every key put so far.
func (k *shellKVS) all() [][2]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([][2]string, 0, len(k.vals))
	for key, v := range k.vals {
		out = append(out, [2]string{key, v})
	}
	return out
}

// Get implements pmi.KVS.
func (k *shellKVS) Get(_ context.Context, _ int, key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.vals[key]
	if !ok {
		return "", fmt.Errorf("%q: %w", key, pmi.ErrNotFound)
	}
	return v, nil
}

// Abort implements pmi.Aborter.
func (k *shellKVS) Abort(rank, exitcode int, msg string) {
	k.j.abort(rank, exitcode, msg)
}

// fenceKey names a barrier round being gathered: the job and the group
// of its shells (0: those it started with; n: those of its nth growth).
type fenceKey struct {
	id    jobid.ID
	group int
}

// leaderFence gathers one barrier round at the leader shell.
type leaderFence struct {
	nshells int
	puts    [][2]string
	waiting []*flux.Request
	seen    map[int]bool
}

// pmiFence (leader) collects a shell's puts; once every shell of the job
// has arrived, it answers them all with the union.
func (x *host) pmiFence(r *flux.Request) {
	var req struct {
		ID      jobid.ID    `json:"id"`
		Index   int         `json:"index"`
		NShells int         `json:"nshells"`
		Group   int         `json:"group"`
		Puts    [][2]string `json:"puts"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "pmi-fence is for job shells only")
		return
	}
	key := fenceKey{req.ID, req.Group}
	lf := x.fences[key]
	if lf == nil {
		n := req.NShells
		if j := x.jobs[req.ID]; j != nil {
			for _, g := range j.groups {
				if g.n == req.Group {
					n = g.count // the group now: some of its shells may be gone
				}
			}
		}
		lf = &leaderFence{nshells: n, seen: map[int]bool{}}
		x.fences[key] = lf
	}
	if lf.seen[req.Index] {
		r.RespondError(errors.New("duplicate pmi-fence from one shell"))
		return
	}
	lf.seen[req.Index] = true
	lf.puts = append(lf.puts, req.Puts...)
	lf.waiting = append(lf.waiting, r)
	if len(lf.waiting) < lf.nshells {
		return
	}
	delete(x.fences, key)
	puts := lf.puts
	if j := x.jobs[req.ID]; req.Group > 0 && j != nil && j.kvs != nil {
		// the shells of a growth join a job whose other shells are past
		// their barriers: they get everything those put (the leader has
		// it all), then their own, which the leader keeps for the shells
		// of later growths
		puts = append(j.kvs.all(), puts...)
		j.kvs.merge(lf.puts)
	}
	resp := map[string]any{"puts": puts}
	for _, w := range lf.waiting {
		w.Respond(resp)
	}
}
