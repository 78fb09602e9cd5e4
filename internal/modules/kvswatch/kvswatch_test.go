package kvswatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/modules/kvs/kvstest"
	"github.com/fluxgo/fluxgo/internal/modules/kvswatch"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

func put(t *testing.T, h *flux.Handle, ns, key, val string, flags int) kvs.CommitResult {
	t.Helper()
	var txn kvs.Txn
	if flags&kvs.FlagAppend != 0 {
		txn.Append(key, []byte(val))
	} else {
		txn.Put(key, []byte(val))
	}
	res, err := kvs.Commit(brokertest.Ctx(t), h, ns, 0, &txn)
	if err != nil {
		t.Fatalf("commit %s: %v", key, err)
	}
	return res
}

func next(t *testing.T, w *kvs.Watcher) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := w.NextValue(ctx)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return string(v)
}

func watch(t *testing.T, h *flux.Handle, ns, key string, flags int) *kvs.Watcher {
	t.Helper()
	w, err := kvs.Watch(h, ns, key, flags)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func expectEnd(t *testing.T, w *kvs.Watcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v, err := w.NextValue(ctx); err != io.EOF {
		t.Fatalf("want end of stream, got %q, %v", v, err)
	}
}

func TestWatchValues(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 2})
	h0 := inst.Handle(0)
	for _, rank := range []int{0, 1} {
		t.Run(fmt.Sprint("rank", rank), func(t *testing.T) {
			h := inst.Handle(rank)
			key := fmt.Sprintf("w%d", rank)
			put(t, h0, "", key, "v0", 0)
			w := watch(t, h, "", key, kvs.FlagWatch)
			if v := next(t, w); v != "v0" {
				t.Fatalf("initial value %q", v)
			}
			put(t, h0, "", "unrelated", "x", 0)
			put(t, h0, "", key, "v1", 0)
			put(t, h0, "", key, "v1", 0) // same value: sent again without UNIQ
			put(t, h0, "", key, "v2", 0)
			for _, want := range []string{"v1", "v1", "v2"} {
				if v := next(t, w); v != want {
					t.Fatalf("got %q, want %q", v, want)
				}
			}
			if err := w.Cancel(); err != nil {
				t.Fatal(err)
			}
			expectEnd(t, w)
		})
	}
}

func TestWatchUniq(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	put(t, h, "", "u", "a", 0)
	w := watch(t, h, "", "u", kvs.FlagWatch|kvs.FlagWatchUniq)
	next(t, w)
	put(t, h, "", "u", "a", 0)
	put(t, h, "", "u", "b", 0)
	if v := next(t, w); v != "b" {
		t.Fatalf("uniq watch got %q", v)
	}
	// FULL notices a change through a replaced parent directory
	put(t, h, "", "p.q", "1", 0)
	wf := watch(t, h, "", "p.q", kvs.FlagWatch|kvs.FlagWatchFull)
	next(t, wf)
	var txn kvs.Txn
	txn.Unlink("p")
	txn.Put("p.q", []byte("2"))
	kvs.Commit(brokertest.Ctx(t), h, "", 0, &txn)
	var t2 kvs.Txn
	t2.Put("p2.q", []byte("3"))
	kvs.Commit(brokertest.Ctx(t), h, "", 0, &t2)
	if _, err := kvs.Copy(brokertest.Ctx(t), h, "", "p2", "", "p", 0); err != nil {
		t.Fatal(err)
	}
	if v := next(t, wf); v != "2" {
		t.Fatalf("full watch got %q", v)
	}
	if v := next(t, wf); v != "3" {
		t.Fatalf("full watch after dir copy got %q", v)
	}
}

// waitWatchers waits until the kvs-watch module of h's broker holds n
// watches, so that what a test does next happens after they are set.
func waitWatchers(t *testing.T, h *flux.Handle, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var st struct {
			Watchers int `json:"watchers"`
		}
		if err := h.Call(brokertest.Ctx(t), "kvs-watch.stats-get", flux.NodeidAny, nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.Watchers >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kvs-watch holds %d watches after 10 s, want %d", st.Watchers, n)
		}
	}
}

func TestWaitCreate(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 2})
	h0, h1 := inst.Handle(0), inst.Handle(1)
	done := make(chan string, 1)
	go func() {
		v, err := kvs.WaitCreate(brokertest.Ctx(t), h1, "", "later")
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- string(v)
	}()
	waitWatchers(t, h1, 1) // the wait is in place before the key comes
	put(t, h0, "", "other", "x", 0)
	put(t, h0, "", "later", "here", 0)
	if v := <-done; v != "here" {
		t.Fatalf("waitcreate: %s", v)
	}
	// without WAITCREATE, a missing key is ENOENT
	w := watch(t, h1, "", "missing", kvs.FlagWatch)
	if _, err := w.NextValue(brokertest.Ctx(t)); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("watch of missing key: %v", err)
	}
	// waitcreate on a namespace that does not exist yet
	w = watch(t, h1, "future", "k", kvs.FlagWatch|kvs.FlagWaitCreate)
	waitWatchers(t, h1, 1)
	if err := kvs.NamespaceCreate(brokertest.Ctx(t), h0, "future", kvs.OwnerDefault, ""); err != nil {
		t.Fatal(err)
	}
	put(t, h0, "future", "k", "created", 0)
	if v := next(t, w); v != "created" {
		t.Fatalf("namespace waitcreate: %q", v)
	}
	// removing the namespace ends the stream cleanly
	if err := kvs.NamespaceRemove(brokertest.Ctx(t), h0, "future"); err != nil {
		t.Fatal(err)
	}
	expectEnd(t, w)
}

// An eventlog watch on a follower sees every appended entry exactly once
// and in order, while appends race with the watch's own lookups.
func TestWatchAppendExactlyOnce(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 3})
	h0, h2 := inst.Handle(0), inst.Handle(2)
	put(t, h0, "", "ev", "e0\n", kvs.FlagAppend)
	w := watch(t, h2, "", "ev", kvs.FlagWatch|kvs.FlagWatchAppend)
	const n = 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i < n; i++ {
			var txn kvs.Txn
			txn.Append("ev", []byte(fmt.Sprintf("e%d\n", i)))
			if i%7 == 0 { // several appends in one transaction
				i++
				txn.Append("ev", []byte(fmt.Sprintf("e%d\n", i)))
			}
			txn.Put("noise", []byte("x"))
			if _, err := kvs.Commit(brokertest.Ctx(t), h0, "", 0, &txn); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var got strings.Builder
	for strings.Count(got.String(), "\n") < n {
		got.WriteString(next(t, w))
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("got %d entries, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l != fmt.Sprintf("e%d", i) {
			t.Fatalf("entry %d is %q", i, l)
		}
	}
	// overwriting an appended key ends the watch with EINVAL
	put(t, h0, "", "ev", "replaced", 0)
	_, err := w.NextValue(brokertest.Ctx(t))
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("after overwrite: %v", err)
	}
}

// TestWatchAppendInlineGrowth: a value kept inline grows in place, then
// turns into a valref whose first blob holds more than was sent: the
// watcher sends each byte once.
func TestWatchAppendInlineGrowth(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	put(t, h, "", "log", "start\n", kvs.FlagAppend)
	w := watch(t, h, "", "log", kvs.FlagWatch|kvs.FlagWatchAppend)
	if got := next(t, w); got != "start\n" {
		t.Fatalf("first answer %q", got)
	}
	want := ""
	for _, n := range []int{100, 100, 1200, 50, 3000, 10} {
		chunk := strings.Repeat(string(rune('a'+n%26)), n-1) + "\n"
		put(t, h, "", "log", chunk, kvs.FlagAppend)
		want += chunk
	}
	got := ""
	for len(got) < len(want) {
		got += next(t, w)
	}
	if got != want {
		t.Fatalf("appended data sent as %d bytes, want %d (same: %v)", len(got), len(want), strings.HasPrefix(want, got))
	}
	// an inline value overwritten ends the watch
	put(t, h, "", "small", "a", kvs.FlagAppend)
	ws := watch(t, h, "", "small", kvs.FlagWatch|kvs.FlagWatchAppend)
	if got := next(t, ws); got != "a" {
		t.Fatalf("first answer %q", got)
	}
	put(t, h, "", "small", "bcd", 0)
	if _, err := ws.NextValue(brokertest.Ctx(t)); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("after overwrite of an inline value: %v", err)
	}
}

// TestWatchAppendRandomSizes: appends of random sizes, some several to a
// transaction, take the value through inline growth and into blobs while
// watchers started at different times follow it: each watcher's answers,
// joined, are the whole final value.
func TestWatchAppendRandomSizes(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 2})
	h0, h1 := inst.Handle(0), inst.Handle(1)
	rng := rand.New(rand.NewPCG(1, 2))
	put(t, h0, "", "log", "0\n", kvs.FlagAppend)
	want := "0\n"
	var watchers []*kvs.Watcher
	for i := 1; i <= 40; i++ {
		if i%8 == 1 {
			h := h0
			if len(watchers)%2 == 1 {
				h = h1
			}
			watchers = append(watchers, watch(t, h, "", "log", kvs.FlagWatch|kvs.FlagWatchAppend))
		}
		var txn kvs.Txn
		for j := 0; j < 1+rng.IntN(3); j++ {
			n := 1 + rng.IntN(600)
			if rng.IntN(10) == 0 {
				n += 1500
			}
			entry := fmt.Sprintf("%d.%d %s\n", i, j, strings.Repeat("x", n))
			txn.Append("log", []byte(entry))
			want += entry
		}
		if _, err := kvs.Commit(brokertest.Ctx(t), h0, "", 0, &txn); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range watchers {
		got := ""
		for len(got) < len(want) {
			got += next(t, w)
		}
		if got != want {
			t.Fatalf("watcher %d: %d bytes, want %d (a prefix: %v)", i, len(got), len(want), strings.HasPrefix(want, got))
		}
	}
}

func TestWatchAppendWaitCreate(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	w := watch(t, h, "", "log", kvs.FlagWatch|kvs.FlagWatchAppend|kvs.FlagWaitCreate)
	waitWatchers(t, h, 1)
	put(t, h, "", "log", "a", kvs.FlagAppend)
	put(t, h, "", "log", "b", kvs.FlagAppend)
	put(t, h, "", "log", "c", kvs.FlagAppend)
	var got string
	for len(got) < 3 {
		got += next(t, w)
	}
	if got != "abc" {
		t.Fatalf("got %q", got)
	}
	// a directory can't be watched for appends
	put(t, h, "", "dir.x", "1", 0)
	wd := watch(t, h, "", "dir", kvs.FlagWatch|kvs.FlagWatchAppend)
	if _, err := wd.NextValue(brokertest.Ctx(t)); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("append watch of dir: %v", err)
	}
}

func stats(t *testing.T, h *flux.Handle) int {
	var s struct {
		Watchers int `json:"watchers"`
	}
	if err := h.Call(brokertest.Ctx(t), "kvs-watch.stats-get", flux.NodeidAny, nil, &s); err != nil {
		t.Fatal(err)
	}
	return s.Watchers
}

func TestDisconnectDropsWatchers(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	put(t, h, "", "d", "1", 0)
	c := inst.Handle(0)
	for i := 0; i < 5; i++ {
		w := watch(t, c, "", "d", kvs.FlagWatch)
		next(t, w)
	}
	if n := stats(t, h); n != 5 {
		t.Fatalf("%d watchers, want 5", n)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for stats(t, h) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("watchers not dropped after disconnect: %d", stats(t, h))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchAppendLongLogInPieces: a log of many appended blobs, watched
// once it is long, arrives in several answers of at most kvswatch.LoadWindow
// blobs each, every byte once and in order.
func TestWatchAppendLongLogInPieces(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	const n = 5*kvswatch.LoadWindow + 3
	want := ""
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("%04d %s\n", i, strings.Repeat("x", 200))
		put(t, h, "", "log", line, kvs.FlagAppend)
		want += line
	}
	w := watch(t, h, "", "log", kvs.FlagWatch|kvs.FlagWatchAppend)
	got, answers := "", 0
	for len(got) < len(want) {
		piece := next(t, w)
		// (the first blob may hold several appends: small ones are kept
		// inline until the value grows)
		if c := strings.Count(piece, "\n"); c > 2*kvswatch.LoadWindow {
			t.Fatalf("answer %d holds %d appends, more than the %d blobs of a window", answers, c, kvswatch.LoadWindow)
		}
		got += piece
		answers++
	}
	if got != want {
		t.Fatalf("the log arrived as %d bytes in %d answers, want %d bytes (a prefix: %v)", len(got), answers, len(want), strings.HasPrefix(want, got))
	}
	if answers < n/kvswatch.LoadWindow-1 {
		t.Fatalf("the log arrived in %d answers, want at least %d", answers, n/kvswatch.LoadWindow-1)
	}
}

// TestWatchAppendRewrittenWhole: a log rewritten whole (a job shell puts
// its copy again after a crash) that begins with what went out goes on:
// only the new tail is sent; one that does not ends the watch.
func TestWatchAppendRewrittenWhole(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	want := ""
	for i := 0; i < 40; i++ {
		line := fmt.Sprintf("%04d %s\n", i, strings.Repeat("y", 300))
		put(t, h, "", "log", line, kvs.FlagAppend)
		want += line
	}
	w := watch(t, h, "", "log", kvs.FlagWatch|kvs.FlagWatchAppend)
	got := ""
	for len(got) < len(want) {
		got += next(t, w)
	}
	// the same content and more, in one put
	tail := "tail 1\n"
	put(t, h, "", "log", want+tail, 0)
	if piece := next(t, w); piece != tail {
		t.Fatalf("after a rewrite beginning with what went out: %q, want %q", piece, tail)
	}
	// then appends go on
	put(t, h, "", "log", "tail 2\n", kvs.FlagAppend)
	if piece := next(t, w); piece != "tail 2\n" {
		t.Fatalf("append after the rewrite: %q", piece)
	}
	// a rewrite that changes what went out ends the watch
	put(t, h, "", "log", "X"+want[1:]+tail+"tail 2\nmore\n", 0)
	if _, err := w.NextValue(brokertest.Ctx(t)); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("after a rewrite changing what went out: %v", err)
	}
}
