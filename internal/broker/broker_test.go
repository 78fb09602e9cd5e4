package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// testInstance runs size brokers in this process, wired like flux start
// -s size wires them (unix-socket overlay), so routing can be tested with
// the race detector.
type testInstance struct {
	t       *testing.T
	brokers []*Broker
	done    []chan int
	dir     string
}

func startInProcess(t *testing.T, size int, fanout uint32, reg *module.Registry, mods []ModuleSpec) *testInstance {
	t.Helper()
	return startInProcessWith(t, size, fanout, reg, mods, nil)
}

// startInProcessWith is startInProcess with each broker's Config passed
// through edit (if not nil) before it is made.
func startInProcessWith(t *testing.T, size int, fanout uint32, reg *module.Registry, mods []ModuleSpec, edit func(*Config)) *testInstance {
	t.Helper()
	dir, err := os.MkdirTemp("", "fb")
	if err != nil {
		t.Fatal(err)
	}
	ti := &testInstance{t: t, dir: dir}
	for r := 0; r < size; r++ {
		cfg := Config{
			Rank:           uint32(r),
			Size:           uint32(size),
			Fanout:         fanout,
			Rundir:         filepath.Join(dir, strconv.Itoa(r)),
			Registry:       reg,
			Modules:        mods,
			TBONTimeout:    3 * time.Second,
			ConnectTimeout: 10 * time.Second,
			LogStderrLevel: -1,
		}
		if r > 0 {
			p := (uint32(r) - 1) / fanout
			cfg.ParentURI = "ipc://" + filepath.Join(dir, strconv.Itoa(int(p)), "tbon")
		}
		if edit != nil {
			edit(&cfg)
		}
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b.ring.stderr = nil
		ti.brokers = append(ti.brokers, b)
		done := make(chan int, 1)
		ti.done = append(ti.done, done)
		go func() {
			code, err := b.Run()
			if err != nil {
				t.Errorf("broker %d: %v", b.rank, err)
			}
			done <- code
		}()
	}
	// wait for quorum: rank 0's joined channel
	select {
	case <-ti.brokers[0].overlay.joined:
	case <-time.After(20 * time.Second):
		t.Fatal("brokers did not join in 20s")
	}
	t.Cleanup(ti.stop)
	return ti
}

func (ti *testInstance) stop() {
	ti.brokers[0].Shutdown(0)
	for i, d := range ti.done {
		select {
		case <-d:
		case <-time.After(30 * time.Second):
			ti.t.Errorf("broker %d did not exit", i)
		}
	}
	os.RemoveAll(ti.dir)
}

func (ti *testInstance) handle(rank int) *flux.Handle {
	ti.t.Helper()
	h, err := flux.Open(ti.brokers[rank].LocalURI())
	if err != nil {
		ti.t.Fatal(err)
	}
	ti.t.Cleanup(func() { h.Close() })
	return h
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestTopology(t *testing.T) {
	topo := topology{size: 8, fanout: 2}
	if got := topo.children(0); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("children(0)=%v", got)
	}
	if got := topo.children(3); fmt.Sprint(got) != "[7]" {
		t.Fatalf("children(3)=%v", got)
	}
	if c, ok := topo.childToward(0, 7); !ok || c != 1 {
		t.Fatalf("childToward(0,7)=%d,%v", c, ok)
	}
	if _, ok := topo.childToward(2, 7); ok {
		t.Fatal("7 is not below 2")
	}
	if got := topo.subtree(1); fmt.Sprint(got) != "[1 3 4 7]" {
		t.Fatalf("subtree(1)=%v", got)
	}
	if topo.depth(7) != 3 {
		t.Fatalf("depth(7)=%d", topo.depth(7))
	}
}

// TestRoutingToEveryRank sends attr.get to every rank from rank 0 and from
// the deepest leaf, and pings across the tree.
func TestRoutingToEveryRank(t *testing.T) {
	ti := startInProcess(t, 8, 2, nil, nil)
	for _, from := range []int{0, 7} {
		h := ti.handle(from)
		for r := 0; r < 8; r++ {
			var resp struct {
				Value string `json:"value"`
			}
			if err := h.Call(ctx(t), "attr.get", uint32(r), map[string]string{"name": "rank"}, &resp); err != nil {
				t.Fatalf("from %d to %d: %v", from, r, err)
			}
			if resp.Value != strconv.Itoa(r) {
				t.Fatalf("from %d to %d: rank %q", from, r, resp.Value)
			}
		}
	}
	h := ti.handle(0)
	var ping map[string]any
	if err := h.Call(ctx(t), "broker.ping", 7, map[string]any{"seq": 1}, &ping); err != nil {
		t.Fatal(err)
	}
	if ping["rank"].(float64) != 7 {
		t.Fatalf("ping answered by %v", ping["rank"])
	}
	// no such service
	err := h.Call(ctx(t), "nosuch.thing", flux.NodeidAny, nil, nil)
	if !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("want ENOSYS, got %v", err)
	}
	// no such rank
	err = h.Call(ctx(t), "attr.get", 99, map[string]string{"name": "rank"}, nil)
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("want EHOSTUNREACH, got %v", err)
	}
}

// TestEventsInOrderEverywhere publishes events from two ranks and checks
// every rank's subscriber sees all of them in sequence order.
func TestEventsInOrderEverywhere(t *testing.T) {
	const size, n = 8, 200
	ti := startInProcess(t, size, 2, nil, nil)
	subs := make([]*flux.Subscription, size)
	for r := 0; r < size; r++ {
		s, err := ti.handle(r).Subscribe(ctx(t), "test.")
		if err != nil {
			t.Fatal(err)
		}
		subs[r] = s
	}
	pubs := []*flux.Handle{ti.handle(0), ti.handle(5)}
	var wg sync.WaitGroup
	for i, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < n; k++ {
				if err := p.Publish("test.ev", map[string]int{"pub": i, "k": k}, false); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var ref []uint32
	for r, s := range subs {
		var seqs []uint32
		last := map[int]int{0: -1, 1: -1}
		for len(seqs) < 2*n {
			m, err := s.Next(ctx(t))
			if err != nil {
				t.Fatalf("rank %d after %d events: %v", r, len(seqs), err)
			}
			var p struct{ Pub, K int }
			m.UnmarshalPayload(&p)
			if p.K != last[p.Pub]+1 {
				t.Fatalf("rank %d: publisher %d event %d after %d", r, p.Pub, p.K, last[p.Pub])
			}
			last[p.Pub] = p.K
			if len(seqs) > 0 && m.Seq != seqs[len(seqs)-1]+1 {
				t.Fatalf("rank %d: seq %d after %d", r, m.Seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, m.Seq)
		}
		if ref == nil {
			ref = seqs
		} else if fmt.Sprint(ref) != fmt.Sprint(seqs) {
			t.Fatalf("rank %d saw a different event order", r)
		}
	}
}

// TestClientService registers a service from a client handle and calls it
// from another rank; it disappears when the client disconnects.
func TestClientService(t *testing.T) {
	ti := startInProcess(t, 3, 2, nil, nil)
	svc := ti.handle(0)
	if err := svc.RegisterService(ctx(t), "echo"); err != nil {
		t.Fatal(err)
	}
	svc.HandleFunc("echo.hello", func(r *flux.Request) {
		r.Respond(map[string]any{"uid": r.Userid(), "payload": string(r.Msg.JSON())})
	})
	sctx, cancel := context.WithCancel(context.Background())
	go svc.Serve(sctx)
	defer cancel()
	h := ti.handle(2)
	var resp map[string]any
	if err := h.Call(ctx(t), "echo.hello", flux.NodeidAny, map[string]int{"x": 1}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp["payload"] != `{"x":1}` {
		t.Fatalf("resp %v", resp)
	}
	if err := svc.RegisterService(ctx(t), "echo"); err != nil {
		t.Fatalf("re-register by same client: %v", err)
	}
	other := ti.handle(0)
	if err := other.RegisterService(ctx(t), "echo"); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("duplicate service: %v", err)
	}
	svc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := h.Call(ctx(t), "echo.hello", flux.NodeidAny, nil, nil)
		if errors.Is(err, syscall.ENOSYS) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service still answers after disconnect: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamingAndCancel checks a streaming RPC ends with ENODATA.
func TestStreamingDmesg(t *testing.T) {
	ti := startInProcess(t, 1, 2, nil, nil)
	h := ti.handle(0)
	for i := 0; i < 3; i++ {
		if err := h.Call(ctx(t), "log.append", flux.NodeidAny, map[string]any{"message": fmt.Sprintf("hello %d", i), "severity": 6}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f, err := h.RPC("log.dmesg", flux.NodeidAny, map[string]any{"follow": false}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := f.Next(ctx(t))
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatal(err)
			}
			break
		}
		var e flux.LogEntry
		m.UnmarshalPayload(&e)
		// the broker's own lines ("broker running ...") may come
		// before or after ours on a loaded machine
		if strings.HasPrefix(e.Message, "hello ") {
			got = append(got, e.Message)
		}
	}
	if want := []string{"hello 0", "hello 1", "hello 2"}; !slices.Equal(got, want) {
		t.Fatalf("dmesg: %q, want %q in order", got, want)
	}
}

type panicModule struct{}

func (panicModule) Name() string { return "boom" }
func (panicModule) Run(ctx context.Context, h *flux.Handle, args []string) error {
	h.HandleFunc("boom.now", func(r *flux.Request) { panic("kaboom") })
	h.HandleFunc("boom.ok", func(r *flux.Request) { r.Respond(nil) })
	return h.Serve(ctx)
}

// TestModulePanic checks a panicking module is unloaded, its caller gets
// an error instead of hanging, and the broker keeps serving.
func TestModulePanic(t *testing.T) {
	reg := module.NewRegistry()
	reg.Register("boom", func() module.Module { return panicModule{} })
	ti := startInProcess(t, 2, 2, reg, []ModuleSpec{{Name: "boom", Ranks: "0"}})
	h := ti.handle(1)
	// the module loads in the background: wait until it answers
	for {
		err := h.Call(ctx(t), "boom.ok", flux.NodeidAny, nil, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOSYS) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	err := h.Call(ctx(t), "boom.now", flux.NodeidAny, nil, nil)
	if !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("call into panicking module: %v", err)
	}
	if err := h.Call(ctx(t), "boom.ok", flux.NodeidAny, nil, nil); !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("module still loaded: %v", err)
	}
	var ml struct {
		Mods []flux.ModuleInfo `json:"mods"`
	}
	if err := h.Call(ctx(t), "module.list", 0, nil, &ml); err != nil {
		t.Fatal(err)
	}
	for _, m := range ml.Mods {
		if m.Name == "boom" {
			t.Fatal("boom still listed")
		}
	}
	// and it can be loaded again
	if err := h.Call(ctx(t), "module.load", 0, map[string]any{"name": "boom"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx(t), "boom.ok", flux.NodeidAny, nil, nil); err != nil {
		t.Fatal(err)
	}
}

type attachModule struct{}

// testAttachment stands for the member "n" of a payload; with n < 0 it
// has no wire form.
type testAttachment int

func (a testAttachment) Payload(partial []byte) ([]byte, error) {
	if a < 0 {
		return nil, errors.New("test attachment without a wire form")
	}
	return jsonwire.WithMember(partial, "n", []byte(strconv.Itoa(int(a))))
}

func (attachModule) Name() string { return "attach" }
func (attachModule) Run(ctx context.Context, h *flux.Handle, args []string) error {
	h.HandleFunc("attach.only", func(r *flux.Request) { r.RespondAttached(nil, testAttachment(2)) })
	h.HandleFunc("attach.both", func(r *flux.Request) { r.RespondAttached([]byte(`{"m":1}`), testAttachment(3)) })
	h.HandleFunc("attach.nowire", func(r *flux.Request) { r.RespondAttached(nil, testAttachment(-1)) })
	return h.Serve(ctx)
}

// TestAttachmentLeavingBroker: a response with an in-process companion
// reaches a client on the local socket, or another rank, with the
// payload the companion stands for (merged with the payload sent beside
// it); one whose companion has no wire form arrives as an EPROTO error
// naming the topic, not as an empty success.
func TestAttachmentLeavingBroker(t *testing.T) {
	reg := module.NewRegistry()
	reg.Register("attach", func() module.Module { return attachModule{} })
	ti := startInProcess(t, 2, 2, reg, []ModuleSpec{{Name: "attach", Ranks: "0"}})
	for _, rank := range []int{0, 1} {
		h := ti.handle(rank)
		var got struct{ M, N int }
		for {
			err := h.Call(ctx(t), "attach.both", 0, nil, &got)
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.ENOSYS) {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // the module is loading
		}
		if got.M != 1 || got.N != 3 {
			t.Fatalf("rank %d: attach.both payload %+v, want m 1 and n 3", rank, got)
		}
		got.M, got.N = 0, 0
		if err := h.Call(ctx(t), "attach.only", 0, nil, &got); err != nil || got.N != 2 {
			t.Fatalf("rank %d: attach.only: %+v %v, want n 2", rank, got, err)
		}
		err := h.Call(ctx(t), "attach.nowire", 0, nil, nil)
		if !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "attach.nowire") {
			t.Fatalf("rank %d: attach.nowire from outside the broker: %v, want EPROTO naming the topic", rank, err)
		}
	}
}

// TestLeafLost closes a leaf broker abruptly: requests to it fail fast and
// its parent reports it lost.
func TestLeafLost(t *testing.T) {
	ti := startInProcess(t, 4, 2, nil, nil)
	leaf := ti.brokers[3]
	// simulate a crash: drop its overlay link without goodbye
	leaf.overlay.mu.Lock()
	leaf.overlay.parent.conn.Close()
	leaf.overlay.mu.Unlock()
	h := ti.handle(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st struct {
			Children []struct {
				Rank   uint32 `json:"rank"`
				Status string `json:"status"`
			} `json:"children"`
		}
		if err := h.Call(ctx(t), "overlay.status", 1, nil, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Children) == 1 && st.Children[0].Status == stateLost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 3 not reported lost: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	err := h.Call(ctx(t), "attr.get", 3, map[string]string{"name": "rank"}, nil)
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("want EHOSTUNREACH, got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("failing took %v", d)
	}
}

// svcModule answers svc.hello and records the routes of the
// svc.disconnect requests it gets (svc.seen lists them).
type svcModule struct {
	mu     sync.Mutex
	seen   []string
	hellos int
}

func (*svcModule) Name() string { return "svc" }
func (s *svcModule) Run(ctx context.Context, h *flux.Handle, args []string) error {
	h.HandleFunc("svc.hello", func(r *flux.Request) {
		s.mu.Lock()
		s.hellos++
		s.mu.Unlock()
		r.Respond(nil)
	})
	h.HandleFunc("svc.disconnect", func(r *flux.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Msg.RouteString())
		s.mu.Unlock()
	})
	h.HandleFunc("svc.seen", func(r *flux.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		r.Respond(map[string]any{"seen": s.seen, "hellos": s.hellos})
	})
	return h.Serve(ctx)
}

// userModule says hello to svc once loaded.
type userModule struct{}

func (userModule) Name() string { return "user" }
func (userModule) Run(ctx context.Context, h *flux.Handle, args []string) error {
	if err := h.Call(ctx, "svc.hello", 0, nil, nil); err != nil {
		return err
	}
	return h.Serve(ctx)
}

// TestModuleUnloadDisconnects: the services a module used hear of its
// unloading, as those a local client used hear of its disconnecting.
func TestModuleUnloadDisconnects(t *testing.T) {
	svc := &svcModule{}
	reg := module.NewRegistry()
	reg.Register("svc", func() module.Module { return svc })
	reg.Register("user", func() module.Module { return userModule{} })
	ti := startInProcess(t, 1, 2, reg, []ModuleSpec{{Name: "svc", Ranks: "0"}})
	h := ti.handle(0)
	for {
		err := h.Call(ctx(t), "svc.hello", 0, nil, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOSYS) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.Call(ctx(t), "module.load", 0, map[string]any{"name": "user"}, nil); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Seen   []string
		Hellos int
	}
	waitFor := func(what string, cond func(seen) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var resp seen
			if err := h.Call(ctx(t), "svc.seen", 0, nil, &resp); err != nil {
				t.Fatal(err)
			}
			if cond(resp) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, resp)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// the test's own hello, then the module's
	waitFor("the module's hello", func(s seen) bool { return s.Hellos == 2 })
	if err := h.Call(ctx(t), "module.remove", 0, map[string]any{"name": "user"}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor("svc.disconnect from the module", func(s seen) bool {
		return len(s.Seen) == 1 && strings.Contains(s.Seen[0], "user")
	})
}

// TestGuestLogLine: a guest's log line names its userid and stays one
// line: it cannot pass for a module's, forge lines of its own, or set its
// time.
func TestGuestLogLine(t *testing.T) {
	ti := startInProcess(t, 1, 2, nil, nil)
	h := ti.handle(0)
	req := message.NewRequest("log.append", flux.NodeidAny, nil)
	req.MarshalPayload(map[string]any{"severity": 0, "name": "broker", "message": "fake\nbroker.err[0]: forged", "timestamp": 1})
	req.Userid, req.Rolemask = 4242, message.RoleUser
	f, err := h.SendRequest(req, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range ti.brokers[0].ring.snapshot() {
		if strings.Contains(e.Message, "forged") {
			found = true
			if e.Name != "broker[uid 4242]" || strings.Contains(e.Message, "\n") || e.Timestamp == 1 {
				t.Errorf("guest's line: %+v", e)
			}
		}
	}
	if !found {
		t.Fatal("the guest's line is not in the ring")
	}
}
