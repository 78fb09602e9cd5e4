package jobmanager

import (
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

type allocCounts struct {
	QueueLength  int `json:"queue_length"`
	AllocPending int `json:"alloc_pending"`
	Running      int `json:"running"`
}

// waitCounts polls job-manager.alloc-query until it answers want.
func (e *env) waitCounts(want allocCounts) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got allocCounts
		if err := e.h.Call(brokertest.Ctx(e.t), "job-manager.alloc-query", flux.NodeidAny, nil, &got); err != nil {
			e.t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("alloc-query: %+v, want %+v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAllocQueryCounts: flux queue status -v's numbers are the jobs
// waiting to be offered to the scheduler, the alloc requests it has not
// answered and the jobs running.
func TestAllocQueryCounts(t *testing.T) {
	e := start(t, true) // the scheduler answers no alloc request
	e.waitCounts(allocCounts{})
	a := e.submit("true", 16, nil)
	e.waitEvent(a, "priority")
	e.waitCounts(allocCounts{AllocPending: 1})
	// a held job is not waiting for the scheduler
	e.submit("true", 0, nil)
	e.waitCounts(allocCounts{AllocPending: 1})
	// stopping the queue takes the request back; its jobs wait out of
	// the scheduler's queue (flux-core counts none of them)
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.queue-start", flux.NodeidAny, map[string]any{"start": false}, nil); err != nil {
		t.Fatal(err)
	}
	e.submit("true", 16, nil)
	e.waitCounts(allocCounts{})

	r := start(t, false)
	id := r.submit("sleep", 16, nil)
	r.waitEvent(id, "start")
	r.waitCounts(allocCounts{Running: 1})
}
