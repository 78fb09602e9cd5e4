package broker

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// joinConfig is the Config of a broker joining ti as rank at the size
// it believes in, wired to its parent's socket as flux start wires
// ranks.
func (ti *testInstance) joinConfig(rank, size, fanout uint32) Config {
	p := (rank - 1) / fanout
	return Config{
		Rank:           rank,
		Size:           size,
		Fanout:         fanout,
		Rundir:         filepath.Join(ti.dir, "j"+strconv.Itoa(int(rank))),
		ParentURI:      "ipc://" + filepath.Join(ti.brokerRundir(p), "tbon"),
		TBONTimeout:    3 * time.Second,
		ConnectTimeout: 10 * time.Second,
		LogStderrLevel: -1,
	}
}

func (ti *testInstance) brokerRundir(rank uint32) string {
	for _, b := range ti.brokers {
		if b.rank == rank {
			return b.cfg.Rundir
		}
	}
	ti.t.Fatalf("no broker of rank %d", rank)
	return ""
}

// join starts a broker joining ti (growing it) and waits until it runs.
// Its exit code arrives on ti.done like the others'.
func (ti *testInstance) join(rank, size, fanout uint32) *Broker {
	ti.t.Helper()
	return ti.joinWith(ti.joinConfig(rank, size, fanout))
}

func (ti *testInstance) joinWith(cfg Config) *Broker {
	ti.t.Helper()
	rank := cfg.Rank
	b, err := New(cfg)
	if err != nil {
		ti.t.Fatal(err)
	}
	b.ring.stderr = nil
	done := make(chan int, 1)
	ti.brokers = append(ti.brokers, b)
	ti.done = append(ti.done, done)
	go func() {
		code, err := b.Run()
		if err != nil {
			ti.t.Errorf("broker %d: %v", b.rank, err)
		}
		done <- code
	}()
	select {
	case <-b.Running():
	case code := <-done:
		done <- code
		ti.t.Fatalf("joining broker %d exited (%d) instead of running", rank, code)
	case <-time.After(30 * time.Second):
		ti.t.Fatalf("joining broker %d did not reach run state in 30s", rank)
	}
	return b
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func attrOf(b *Broker, name string) string {
	v, _, _ := b.attrs.get(name)
	return v
}

// allSize waits until every broker in bs has size n (attribute and
// topology).
func allSize(t *testing.T, bs []*Broker, n uint32) {
	t.Helper()
	want := strconv.Itoa(int(n))
	for _, b := range bs {
		waitFor(t, "rank "+strconv.Itoa(int(b.rank))+" has size "+want, func() bool {
			return b.Size() == n && attrOf(b, "size") == want
		})
	}
}

// rankOf asks rank to of its rank attribute through h.
func rankOf(ctx context.Context, h *flux.Handle, to uint32) (string, error) {
	var resp struct {
		Value string `json:"value"`
	}
	err := h.Call(ctx, "attr.get", to, map[string]string{"name": "rank"}, &resp)
	return resp.Value, err
}

func TestGrowAndShrink(t *testing.T) {
	const k = 2
	ti := startInProcess(t, 1, k, nil, nil)
	c := ctx(t)
	h0 := ti.handle(0)

	// 1 -> 2: rank 1 joins rank 0 (a leaf at size 1, listening anyway)
	ti.join(1, 2, k)
	allSize(t, ti.brokers, 2)
	if got, err := rankOf(c, h0, 1); err != nil || got != "1" {
		t.Fatalf("rank 0 -> 1: attr.get rank = %q, %v", got, err)
	}
	h1 := ti.handle(1)
	sub, err := h1.Subscribe(c, "grow.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h0.PublishSync(c, "grow.test", map[string]int{"n": 1}, false); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.Next(c); err != nil || m.Topic != "grow.test" {
		t.Fatalf("an event published at rank 0 did not reach rank 1: %v", err)
	}

	// 2 -> 5: rank 2 under 0, ranks 3 and 4 under rank 1 (a leaf until now)
	ti.join(2, 3, k)
	ti.join(3, 5, k)
	cfg := ti.joinConfig(4, 5, k)
	cfg.Hostlist = []string{"a", "b", "c", "d", "joiner4"} // its own entry is what it reports
	ti.joinWith(cfg)
	allSize(t, ti.brokers, 5)
	for _, b := range ti.brokers[:4] {
		waitFor(t, "rank "+strconv.Itoa(int(b.rank))+" knows rank 4's host", func() bool {
			return strings.HasSuffix(attrOf(b, "hostlist"), ",joiner4")
		})
	}
	for _, b := range ti.brokers {
		if got := attrOf(b, "tbon.maxlevel"); got != "2" {
			t.Errorf("rank %d: tbon.maxlevel = %s, want 2", b.rank, got)
		}
	}
	if got := attrOf(ti.brokers[1], "tbon.descendants"); got != "2" {
		t.Errorf("rank 1: tbon.descendants = %s, want 2", got)
	}
	if got, err := rankOf(c, h0, 4); err != nil || got != "4" {
		t.Fatalf("rank 0 -> 4: attr.get rank = %q, %v", got, err)
	}
	h4 := ti.handle(4)
	if got, err := rankOf(c, h4, 0); err != nil || got != "0" {
		t.Fatalf("rank 4 -> 0: attr.get rank = %q, %v", got, err)
	}
	if got, err := rankOf(c, h4, 2); err != nil || got != "2" {
		t.Fatalf("rank 4 -> 2: attr.get rank = %q, %v", got, err)
	}
	var st flux.OverlayStatus
	if err := h0.Call(c, "overlay.status", 1, nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 5 || len(st.Children) != 2 || st.Children[0].Rank != 3 || st.Children[1].Rank != 4 {
		t.Fatalf("rank 1 overlay status: %+v", st)
	}

	// refusals: a shrink out of range, one already running
	for _, n := range []int{0, 5, 9} {
		err := h0.Call(c, "overlay.shrink", 0, map[string]int{"size": n}, nil)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("overlay.shrink size %d: %v, want EINVAL naming the range", n, err)
		}
	}

	ti.brokers[0].shrinking.Store(true) // as while one runs
	err = h0.Call(c, "overlay.shrink", 0, map[string]int{"size": 3}, nil)
	if !errors.Is(err, syscall.EBUSY) || !strings.Contains(err.Error(), "already in progress") {
		t.Errorf("overlay.shrink while one runs: %v, want EBUSY", err)
	}
	ti.brokers[0].shrinking.Store(false)
	if err := ti.handle(1).Call(c, "overlay.shrink", 1, map[string]int{"size": 3}, nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("overlay.shrink sent to rank 1: %v, want EINVAL", err)
	}

	// 5 -> 2: ranks 2..4 exit 0, the rest have size 2
	if err := h0.Call(c, "overlay.shrink", 0, map[string]int{"size": 2}, nil); err != nil {
		t.Fatalf("overlay.shrink 2: %v", err)
	}
	for r := 2; r < 5; r++ {
		select {
		case code := <-ti.done[r]:
			if code != 0 {
				t.Errorf("rank %d exited %d after the shrink, want 0", r, code)
			}
			ti.done[r] <- code // for ti.stop
		case <-time.After(30 * time.Second):
			t.Fatalf("rank %d did not exit after the shrink", r)
		}
	}
	if ti.brokers[0].Size() != 2 {
		t.Fatalf("rank 0 size %d when overlay.shrink answered", ti.brokers[0].Size())
	}
	allSize(t, ti.brokers[:2], 2)
	_, err = rankOf(c, h0, 3)
	if !errors.Is(err, syscall.EHOSTUNREACH) || !strings.Contains(err.Error(), "rank 3") || !strings.Contains(err.Error(), "size 2") {
		t.Fatalf("request to rank 3 after the shrink: %v, want EHOSTUNREACH naming rank 3 and size 2", err)
	}
	waitFor(t, "rank 1 forgets its children", func() bool { return len(ti.brokers[1].overlay.childStates()) == 0 })

	// a rank that rejoins grows the instance again
	ti.brokers = ti.brokers[:2]
	done := ti.done
	ti.done = ti.done[:2]
	ti.join(2, 3, k)
	ti.done = append(ti.done, done[3:]...)
	allSize(t, ti.brokers, 3)
	if got, err := rankOf(c, h0, 2); err != nil || got != "2" {
		t.Fatalf("rank 0 -> rejoined 2: attr.get rank = %q, %v", got, err)
	}
}

func TestJoinRefused(t *testing.T) {
	const k = 2
	ti := startInProcess(t, 2, k, nil, nil)
	cases := []struct {
		name       string
		rank, size uint32
		parent     uint32
		want       syscall.Errno
		why        string
	}{
		{"not the parent's child", 2, 3, 1, syscall.EINVAL, "rank 2 is not a child of rank 1 (fanout 2)"},
		{"duplicate rank", 1, 2, 0, syscall.EEXIST, "rank 1 is already connected"},
		{"a root's grandchild", 3, 4, 0, syscall.EINVAL, "rank 3 is not a child of rank 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ti.joinConfig(tc.rank, tc.size, k)
			cfg.ParentURI = "ipc://" + filepath.Join(ti.brokerRundir(tc.parent), "tbon")
			b, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b.ring.stderr = nil
			_, err = b.Run()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("rank %d joining rank %d: %v, want %v: %s", tc.rank, tc.parent, err, tc.want, tc.why)
			}
		})
	}
	// the instance is as it was
	for _, b := range ti.brokers {
		if b.Size() != 2 {
			t.Errorf("rank %d size %d after refused joins", b.rank, b.Size())
		}
	}
	if got, err := rankOf(ctx(t), ti.handle(0), 1); err != nil || got != "1" {
		t.Fatalf("rank 0 -> 1 after refused joins: %q, %v", got, err)
	}
}

// TestRejoinLearnsSize: a broker restarted as it was booted (believing
// in the boot size) learns the grown size from its parent's answer.
func TestRejoinLearnsSize(t *testing.T) {
	const k = 2
	ti := startInProcess(t, 3, k, nil, nil)
	ti.join(3, 4, k)
	allSize(t, ti.brokers, 4)
	ti.brokers[2].Shutdown(0)
	select {
	case code := <-ti.done[2]:
		ti.done[2] <- code
	case <-time.After(30 * time.Second):
		t.Fatal("rank 2 did not exit")
	}
	// its goodbye marks it offline before its link is torn down: a
	// hello in between is refused as a duplicate, and the joining broker
	// tries again (joinParent)
	waitFor(t, "rank 0 sees rank 2 leave", func() bool {
		for _, cs := range ti.brokers[0].overlay.childStates() {
			if cs.rank == 2 {
				return cs.state == stateOffline
			}
		}
		return false
	})
	b := ti.join(2, 3, k)
	if b.Size() != 4 || attrOf(b, "size") != "4" {
		t.Fatalf("rank 2 rejoined with size %d (attribute %s), want 4", b.Size(), attrOf(b, "size"))
	}
	if got, err := rankOf(ctx(t), ti.handle(len(ti.brokers)-1), 3); err != nil || got != "3" {
		t.Fatalf("rejoined rank 2 -> 3: %q, %v", got, err)
	}
}
