package cluster_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInteriorLost: five hosts in a tree of fanout 2 (rank 1 is the
// parent of ranks 3 and 4). Rank 1's host's link goes down: rank 0
// finds rank 1 lost and, with it, its subtree (flux overlay status
// shows 3 and 4 lost below it, their nodes offline, as flux-core does),
// and jobs still run on the two hosts left. When the link comes back
// rank 1's broker rejoins and its children rejoin below it.
func TestInteriorLost(t *testing.T) {
	t.Parallel() // its own hosts and bridge
	c, bin := failureCluster(t, 5, 2)
	r0 := rundirOf(c.Hosts[0])
	if out, _ := fluxCmd(t, bin, r0, "overlay", "status"); !strings.Contains(out, "1 node1: full\n│  ├─ 3 node3") {
		t.Logf("overlay status:\n%s", out)
	}
	if out, _ := fluxCmd(t, bin, r0, "overlay", "parentof", "3"); strings.TrimSpace(out) != "1" {
		t.Fatalf("rank 3's parent is %q, want 1", strings.TrimSpace(out))
	}
	interior := c.Hosts[1]
	if err := interior.LinkDown(); err != nil {
		t.Fatal(err)
	}
	linkUp := false
	t.Cleanup(func() {
		if !linkUp {
			interior.LinkUp()
		}
	})
	start := time.Now()
	poll(t, 3*failTimeout, "rank 1 lost", func() (bool, string) {
		st := overlayState(t, bin, r0, 1)
		return st == "lost", st
	})
	lost := time.Since(start)
	want := "node[1,3-4]"
	poll(t, 10*time.Second, "the subtree's nodes offline", func() (bool, string) {
		got := resourceSet(t, bin, r0, "offline")
		return got == want, got
	})
	t.Logf("interior link down: rank 1 lost after %v, its subtree's nodes %s offline after %v (tbon.timeout %v)",
		lost.Round(time.Millisecond), want, time.Since(start).Round(time.Millisecond), failTimeout)
	out, _ := fluxCmd(t, bin, r0, "overlay", "status", "--no-pretty")
	t.Logf("overlay status with rank 1 cut off:\n%s", out)
	// rank 0 learned the grandchildren's hostnames though they joined
	// rank 1 before rank 1 joined it
	for _, want := range []string{"3 node3: lost", "4 node4: lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("overlay status lacks %q", want)
		}
	}
	for _, rank := range []int{3, 4} {
		if st := overlayState(t, bin, r0, rank); st != "lost" {
			t.Errorf("rank %d (below the lost rank 1) is %q, want lost", rank, st)
		}
	}
	out, err := fluxCmd(t, bin, r0, "run", "-N2", "hostname")
	if err != nil {
		t.Fatalf("flux run -N2 with rank 1's subtree lost: %v: %s", err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	if want := []string{c.Hosts[0].Name, c.Hosts[2].Name}; !slices.Equal(got, want) {
		t.Errorf("flux run -N2 hostname printed %q, want %q", got, want)
	}

	if err := interior.LinkUp(); err != nil {
		t.Fatal(err)
	}
	linkUp = true
	start = time.Now()
	poll(t, 60*time.Second, "rank 1 and its subtree rejoined", func() (bool, string) {
		out, err := fluxCmd(t, bin, r0, "overlay", "status", "--summary", "--no-pretty", "--timeout=1s")
		return err == nil && strings.Contains(out, "full"), out
	})
	t.Logf("interior link up: rank 1 and ranks 3, 4 below it rejoined after %v", time.Since(start).Round(time.Millisecond))
	poll(t, 10*time.Second, "every node online", func() (bool, string) {
		got := resourceSet(t, bin, r0, "offline")
		return got == "", got
	})
	out, err = fluxCmd(t, bin, r0, "run", "-N5", "hostname")
	if err != nil {
		t.Fatalf("flux run -N5 after rank 1 came back: %v: %s", err, out)
	}
	if n := len(strings.Fields(out)); n != 5 {
		t.Errorf("flux run -N5 hostname printed %d names: %q", n, out)
	}
}
