package pmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// group runs size clients against one Server over pipes.
func group(t *testing.T, size int) (*Server, []*Client, chan error) {
	t.Helper()
	kvs := NewMemKVS(size)
	kvs.Preput("PMI_process_mapping", ProcessMapping(MappingBlock{0, 1, size}))
	s := &Server{Info: Info{Size: size, KVSName: "job-1"}, KVS: kvs}
	clients := make([]*Client, size)
	errs := make(chan error, size)
	for r := 0; r < size; r++ {
		c, sc := net.Pipe()
		go func() {
			errs <- s.ServeConn(context.Background(), sc, r)
			sc.Close()
		}()
		clients[r] = NewClient(c, r, size)
		t.Cleanup(func() { clients[r].Close() })
	}
	return s, clients, errs
}

// TestClientExchange is the broker's wire-up pattern: everyone puts,
// barrier, everyone gets everyone's value.
func TestClientExchange(t *testing.T) {
	const size = 5
	ctx := testCtx(t)
	_, clients, errs := group(t, size)
	var wg sync.WaitGroup
	results := make([][]string, size)
	fail := make(chan error, size)
	for r, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				if err := c.Init(ctx); err != nil {
					return err
				}
				if c.KVSName() != "job-1" || c.Maxes().KeyMax != DefaultKeyMax {
					return fmt.Errorf("kvsname %q maxes %+v", c.KVSName(), c.Maxes())
				}
				if n, err := c.Appnum(ctx); err != nil || n != 0 {
					return fmt.Errorf("appnum %d %v", n, err)
				}
				if n, err := c.UniverseSize(ctx); err != nil || n != size {
					return fmt.Errorf("universe %d %v", n, err)
				}
				if err := c.Put(ctx, "uri."+strconv.Itoa(r), fmt.Sprintf("tcp://10.0.0.%d:80", r)); err != nil {
					return err
				}
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				for i := 0; i < size; i++ {
					v, err := c.Get(ctx, "uri."+strconv.Itoa(i))
					if err != nil {
						return err
					}
					results[r] = append(results[r], v)
				}
				if v, err := c.Get(ctx, "PMI_process_mapping"); err != nil || v != "(vector,(0,1,5))" {
					return fmt.Errorf("mapping %q %v", v, err)
				}
				if v, err := c.Get(ctx, "PMI_unset"); err != nil || v != "" {
					return fmt.Errorf("reserved missing key: %q %v", v, err)
				}
				var perr *Error
				if _, err := c.Get(ctx, "nokey"); !errors.As(err, &perr) || perr.RC == 0 || perr.Cmd != "get" {
					return fmt.Errorf("missing key: %v", err)
				}
				return c.Finalize(ctx)
			}()
			if err != nil {
				fail <- fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Error(err)
	}
	for r := range clients {
		if err := <-errs; err != nil {
			t.Errorf("server session: %v", err)
		}
		for i, v := range results[r] {
			if want := fmt.Sprintf("tcp://10.0.0.%d:80", i); v != want {
				t.Errorf("rank %d got[%d] = %q, want %q", r, i, v, want)
			}
		}
	}
}

// TestBarrierHidesUnfencedPuts: a value is not visible to others until
// the barrier it was fenced in completes.
func TestBarrierHidesUnfencedPuts(t *testing.T) {
	ctx := testCtx(t)
	_, c, _ := group(t, 2)
	for _, cl := range c {
		if err := cl.Init(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c[0].Put(ctx, "x", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c[1].Get(ctx, "x"); err == nil {
		t.Fatal("rank 1 saw an unfenced put")
	}
	done := make(chan error, 1)
	go func() { done <- c[0].Barrier(ctx) }()
	if err := c[1].Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, err := c[1].Get(ctx, "x"); err != nil || v != "1" {
		t.Fatalf("after barrier: %q %v", v, err)
	}
}

func TestClientValidation(t *testing.T) {
	ctx := testCtx(t)
	_, c, _ := group(t, 1)
	if err := c[0].Put(ctx, "a", "b"); err == nil {
		t.Fatal("put before init accepted")
	}
	if err := c[0].Init(ctx); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"", "v"}, {"a=b", "v"}, {"a b", "v"}, {"k", "has space"}, {"k", "é"}} {
		if err := c[0].Put(ctx, kv[0], kv[1]); err == nil {
			t.Errorf("Put(%q, %q) accepted", kv[0], kv[1])
		}
	}
	long := make([]byte, DefaultValueMax)
	for i := range long {
		long[i] = 'x'
	}
	if err := c[0].Put(ctx, "k", string(long)); err == nil {
		t.Error("over-long value accepted")
	}
}

func TestClientContextCancel(t *testing.T) {
	_, c, _ := group(t, 2)
	ctx, cancel := context.WithCancel(testCtx(t))
	if err := c[0].Init(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c[0].Barrier(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("barrier after cancel: %v", err)
	}
}

// TestFromEnvFD passes a socket by descriptor number as a process
// manager does with PMI_FD.
func TestFromEnvFD(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sf := os.NewFile(uintptr(fds[1]), "server")
	sc, err := net.FileConn(sf)
	sf.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s := &Server{Info: Info{Size: 3, KVSName: "k"}, KVS: NewMemKVS(3)}
	go s.ServeConn(context.Background(), sc, 2)
	env := map[string]string{"PMI_FD": strconv.Itoa(fds[0]), "PMI_RANK": "2", "PMI_SIZE": "3"}
	if !Offered(func(k string) string { return env[k] }) {
		t.Fatal("Offered = false")
	}
	c, err := FromEnv(testCtx(t), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Rank() != 2 || c.Size() != 3 {
		t.Fatalf("rank %d size %d", c.Rank(), c.Size())
	}
	if err := c.Init(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Finalize(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestFromEnvPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Info: Info{Size: 2, KVSName: "k"}, KVS: NewMemKVS(2)}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-served
	}()
	var wg sync.WaitGroup
	for id := 0; id < 2; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := map[string]string{"PMI_PORT": ln.Addr().String(), "PMI_ID": strconv.Itoa(id)}
			c, err := FromEnv(testCtx(t), func(k string) string { return env[k] })
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if c.Rank() != id || c.Size() != 2 {
				t.Errorf("id %d: rank %d size %d", id, c.Rank(), c.Size())
			}
			if err := c.Init(testCtx(t)); err != nil {
				t.Error(err)
				return
			}
			if err := c.Put(testCtx(t), "k"+strconv.Itoa(id), "v"); err != nil {
				t.Error(err)
			}
			if err := c.Barrier(testCtx(t)); err != nil {
				t.Error(err)
			}
			if v, err := c.Get(testCtx(t), "k"+strconv.Itoa(1-id)); err != nil || v != "v" {
				t.Errorf("get: %q %v", v, err)
			}
			if err := c.Finalize(testCtx(t)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestFromEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want error
	}{
		{"none", map[string]string{}, ErrNoPMI},
		{"bad fd", map[string]string{"PMI_FD": "x", "PMI_RANK": "0", "PMI_SIZE": "1"}, nil},
		{"rank too big", map[string]string{"PMI_FD": "0", "PMI_RANK": "1", "PMI_SIZE": "1"}, nil},
		{"no size", map[string]string{"PMI_FD": "0", "PMI_RANK": "0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromEnv(context.Background(), func(k string) string { return tc.env[k] })
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}
