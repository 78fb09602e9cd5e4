package pmi

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// MemKVS is an in-memory KVS for a process group whose members are all
// served by one Server (a job's tasks on a single node, or tests). Puts
// become visible when the barrier they were fenced in completes; a later
// put of the same key by another process replaces the value.
type MemKVS struct {
	// OnAbort, if set, is called (once per abort request) when a process
	// aborts the group, after waiting fences have been released.
	OnAbort func(rank, exitcode int, msg string)

	mu      sync.Mutex
	size    int
	vals    map[string]string
	entered int
	batch   []KeyValue
	done    chan struct{} // closed when the current barrier completes
	abortC  chan struct{} // closed by the first abort
	aborted error
	final   map[int]bool
}

var (
	_ KVS       = (*MemKVS)(nil)
	_ Aborter   = (*MemKVS)(nil)
	_ Finalizer = (*MemKVS)(nil)
)

// NewMemKVS returns an empty store for a group of size processes.
func NewMemKVS(size int) *MemKVS {
	return &MemKVS{size: size, vals: make(map[string]string),
		done: make(chan struct{}), abortC: make(chan struct{}), final: make(map[int]bool)}
}

// Preput stores a value before any process runs, such as
// PMI_process_mapping.
func (k *MemKVS) Preput(key, value string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.vals[key] = value
}

// Fence enters rank into the current barrier and waits for the others.
// A cancelled ctx returns early, but the entry still counts.
func (k *MemKVS) Fence(ctx context.Context, rank int, puts []KeyValue) error {
	k.mu.Lock()
	if k.aborted != nil {
		k.mu.Unlock()
		return k.aborted
	}
	k.batch = append(k.batch, puts...)
	k.entered++
	wait := k.done
	if k.entered == k.size {
		for _, kv := range k.batch {
			k.vals[kv.Key] = kv.Value
		}
		k.batch, k.entered = nil, 0
		close(k.done)
		k.done = make(chan struct{})
	}
	k.mu.Unlock()
	select {
	case <-wait:
		return nil
	case <-k.abortC:
		select {
		case <-wait: // the barrier completed before the abort
			return nil
		default:
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.aborted
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get returns a value made visible by a completed barrier (or Preput).
func (k *MemKVS) Get(_ context.Context, _ int, key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.vals[key]
	if !ok {
		return "", fmt.Errorf("%q: %w", key, ErrNotFound)
	}
	return v, nil
}

// Abort fails every current and future Fence and calls OnAbort.
func (k *MemKVS) Abort(rank, exitcode int, msg string) {
	k.mu.Lock()
	if k.aborted == nil {
		k.aborted = fmt.Errorf("%w by rank %d (exit code %d)", ErrAborted, rank, exitcode)
		close(k.abortC)
	}
	k.mu.Unlock()
	if k.OnAbort != nil {
		k.OnAbort(rank, exitcode, msg)
	}
}

// Finalize records that rank finalized.
func (k *MemKVS) Finalize(rank int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.final[rank] = true
}

// Finalized reports how many processes have finalized.
func (k *MemKVS) Finalized() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.final)
}

// MappingBlock is one block of PMI_process_mapping (RFC 13): Nodes
// consecutive nodes starting at node ID Node, each with PPN processes.
type MappingBlock struct {
	Node, Nodes, PPN int
}

// ProcessMapping renders PMI_process_mapping: "(vector,(0,2,4))".
func ProcessMapping(blocks ...MappingBlock) string {
	var b strings.Builder
	b.WriteString("(vector")
	for _, bl := range blocks {
		fmt.Fprintf(&b, ",(%d,%d,%d)", bl.Node, bl.Nodes, bl.PPN)
	}
	b.WriteString(")")
	return b.String()
}
