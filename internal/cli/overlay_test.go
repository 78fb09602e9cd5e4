package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
)

func TestSubtreeStatus(t *testing.T) {
	n := func(s string) *overlayNode { return &overlayNode{status: s} }
	tests := []struct {
		children []*overlayNode
		want     string
	}{
		{nil, "full"},
		{[]*overlayNode{n("full"), n("full")}, "full"},
		{[]*overlayNode{n("full"), n("offline")}, "partial"},
		{[]*overlayNode{n("partial"), n("full")}, "partial"},
		{[]*overlayNode{n("offline"), n("lost")}, "degraded"},
		{[]*overlayNode{n("degraded"), n("partial")}, "degraded"},
	}
	for _, tt := range tests {
		if got := subtreeStatus(tt.children); got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.children, got, tt.want)
		}
	}
}

func TestTbonShape(t *testing.T) {
	sh := tbonShape{size: 8, fanout: 2}
	if got := sh.children(3); len(got) != 1 || got[0] != 7 {
		t.Errorf("children(3) = %v", got)
	}
	if got := sh.children(5); len(got) != 0 {
		t.Errorf("children(5) = %v", got)
	}
	if p, ok := sh.parent(6); !ok || p != 2 {
		t.Errorf("parent(6) = %d %v", p, ok)
	}
	if _, ok := sh.parent(0); ok {
		t.Error("rank 0 has a parent")
	}
}

// sampleTree is rank 0 with a child 1 whose child 4 did not answer, and a
// lost child 2 whose child 5 can't be asked.
func sampleTree() *overlayNode {
	return &overlayNode{rank: 0, host: "n0", status: "degraded", duration: 150, rtt: 2 * time.Millisecond,
		children: []*overlayNode{
			{rank: 1, host: "n1", status: "degraded", duration: 90, rtt: time.Millisecond,
				children: []*overlayNode{
					{rank: 3, host: "n3", status: "full", duration: 80, rtt: time.Millisecond},
					{rank: 4, host: "n4", errText: "no answer within 0.5s", status: "degraded", duration: 80},
				}},
			{rank: 2, host: "n2", status: "lost", duration: 3,
				children: []*overlayNode{{rank: 5, host: "n5", status: "lost", duration: -1, ghost: true}}},
		}}
}

func TestOverlayPrinter(t *testing.T) {
	tests := []struct {
		name string
		p    overlayPrinter
		want string
	}{
		{"pretty", overlayPrinter{pretty: true, ghosts: true}, `0 n0: degraded
├─ 1 n1: degraded
│  ├─ 3 n3: full
│  └─ 4 n4: no answer within 0.5s
└─ 2 n2: lost
   └─ 5 n5: lost
`},
		{"verbose", overlayPrinter{pretty: true, ghosts: true, verbose: 2}, `0 n0: degraded for 2.5m (2.000 ms)
├─ 1 n1: degraded for 1.5m (1.000 ms)
│  ├─ 3 n3: full for 1.33333m (1.000 ms)
│  └─ 4 n4: no answer within 0.5s
└─ 2 n2: lost for 3s
   └─ 5 n5: lost
`},
		{"no ghosts, no pretty", overlayPrinter{}, `0 n0: degraded
1 n1: degraded
3 n3: full
4 n4: no answer within 0.5s
2 n2: lost
`},
		{"down", overlayPrinter{pretty: true, ghosts: true, down: true}, `0 n0: degraded
├─ 1 n1: degraded
│  └─ 4 n4: no answer within 0.5s
└─ 2 n2: lost
   └─ 5 n5: lost
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.p.w = &out
			tt.p.print(sampleTree(), "", "")
			if out.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tt.want)
			}
		})
	}
}

func TestOverlayLookup(t *testing.T) {
	hosts, err := hostlist.Parse("node[0-3],login")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target, want string
		err          bool
	}{
		{"0", "node0", false},
		{"1-3", "node[1-3]", false},
		{"0,4", "node0,login", false},
		{"node2", "2", false},
		{"node[1-2],login", "1-2,4", false},
		{"7", "", true},
		{"nohost", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			got, err := overlayLookup(hosts, tt.target)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func overlayStatusString(t *testing.T, tb *testBrokers, o overlayStatusOptions) string {
	t.Helper()
	if o.rank == "" {
		o.rank = "0"
	}
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	var out bytes.Buffer
	if err := overlayStatus(testCtx(t), tb.handle(t), o, false, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestOverlayStatus(t *testing.T) {
	tb := startBrokers(t, 5, false)
	want := `0 node0: full
├─ 1 node1: full
│  ├─ 3 node3: full
│  └─ 4 node4: full
└─ 2 node2: full
`
	if got := overlayStatusString(t, tb, overlayStatusOptions{}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := overlayStatusString(t, tb, overlayStatusOptions{rank: "1", noPretty: true}); got != "1 node1: full\n3 node3: full\n4 node4: full\n" {
		t.Errorf("--rank=1 --no-pretty:\n%s", got)
	}
	if got := overlayStatusString(t, tb, overlayStatusOptions{summary: true}); got != "full\n" {
		t.Errorf("--summary: %q", got)
	}
	if got := overlayStatusString(t, tb, overlayStatusOptions{verbose: 2}); !strings.Contains(got, "├─ 1 node1: full for ") || !strings.Contains(got, " ms)\n") {
		t.Errorf("-vv:\n%s", got)
	}

	// A broker that shuts down cleanly is offline; its parent's subtree
	// and rank 0's are then partial.
	tb.brokers[4].Shutdown(0)
	<-tb.done[4]
	tb.done[4] <- 0 // for cleanup
	got := overlayStatusString(t, tb, overlayStatusOptions{wait: "partial"})
	want = `0 node0: partial
├─ 1 node1: partial
│  ├─ 3 node3: full
│  └─ 4 node4: offline
└─ 2 node2: full
`
	if got != want {
		t.Errorf("after rank 4 left:\n%s\nwant\n%s", got, want)
	}
	if got := overlayStatusString(t, tb, overlayStatusOptions{down: true}); got != "0 node0: partial\n└─ 1 node1: partial\n   └─ 4 node4: offline\n" {
		t.Errorf("--down:\n%s", got)
	}
}

func TestOverlayStatusErrors(t *testing.T) {
	tb := startBrokers(t, 2, false)
	h := tb.handle(t)
	for _, o := range []overlayStatusOptions{{rank: "2"}, {rank: "any"}, {rank: "x"}} {
		if err := overlayStatus(testCtx(t), h, o, false, &bytes.Buffer{}); err == nil {
			t.Errorf("--rank=%s accepted", o.rank)
		}
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	err := overlayStatus(ctx, h, overlayStatusOptions{rank: "0", wait: "lost", timeout: time.Second}, false, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "waiting for lost") {
		t.Errorf("--wait=lost on a healthy instance: %v", err)
	}
}
