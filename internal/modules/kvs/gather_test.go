package kvs

import "testing"

func TestGatherEstimate(t *testing.T) {
	ns := &namespace{}
	// few writers: never wait
	ns.noteWriters(3)
	if ns.gathering() {
		t.Fatal("gathering with 3 writers")
	}
	// many writers: wait while fewer than half have a commit ready
	ns.noteWriters(64)
	if ns.writers != 64 {
		t.Fatalf("estimate %d, want 64", ns.writers)
	}
	ns.ready = make([]*txn, 10)
	if !ns.gathering() {
		t.Fatal("not gathering with 10 of 64 writers ready")
	}
	ns.ready = make([]*txn, 32)
	if ns.gathering() {
		t.Fatal("gathering with half the writers ready")
	}
	// a timed-out gather lets the next batch go
	ns.ready = make([]*txn, 1)
	ns.gatherDone = true
	if ns.gathering() {
		t.Fatal("gathering after the wait timed out")
	}
	// the estimate decays by one a batch when fewer writers show up
	ns.noteWriters(1)
	if ns.writers != 63 || ns.gatherDone {
		t.Fatalf("after a small batch: estimate %d, gatherDone %v", ns.writers, ns.gatherDone)
	}
}
