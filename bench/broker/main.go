// Command broker measures the broker and messaging layer and prints one
// line per figure: RPC round trips to the local broker and across the
// tree, RPC throughput with concurrent clients, event fan-out, instance
// start-up time and idle broker memory, each beside the machine's raw
// unix-socket ping-pong measured in the same run.
//
//	go run ./bench/broker [-flux bin/flux] [-n 20000]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	n := flag.Int("n", 20000, "round trips per latency figure")
	flag.Parse()
	abs, _ := filepath.Abs(*bin)

	if path := os.Getenv("BENCH_ECHO_SOCKET"); path != "" {
		echoServer(path, os.Getenv("BENCH_ECHO_BLOCKING") != "")
		return
	}
	// The machine's floor: two processes each sleeping in read(2) on a
	// blocking socket, as a C client and server do.
	floor := crossProcessPingPong(*n, true)
	fmt.Printf("unix-socket ping-pong, 2 processes median %8.1f µs  p99 %8.1f µs  (blocking reads: the machine's floor)\n", us(floor.median), us(floor.p99))
	xraw := crossProcessPingPong(*n, false)
	fmt.Printf("  same, through Go's net poller    median %8.1f µs  p99 %8.1f µs\n", us(xraw.median), us(xraw.p99))
	inproc := rawPingPong(*n)
	fmt.Printf("  same, 2 goroutines of 1 process  median %8.1f µs  p99 %8.1f µs\n", us(inproc.median), us(inproc.p99))
	ratio := func(d time.Duration) string {
		return fmt.Sprintf("(%.1fx the floor)", float64(d)/float64(floor.median))
	}

	startFigures(abs)

	inst, err := benchkit.Start(abs, 16, "-S", "tbon.fanout=2")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer inst.Stop()
	h, err := flux.Open(inst.URI)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	local := rpcLatency(ctx, h, 0, *n)
	fmt.Printf("RPC to local broker (attr.get)     median %8.1f µs  p99 %8.1f µs  %s\n", us(local.median), us(local.p99), ratio(local.median))
	prev := runtime.GOMAXPROCS(1)
	local1 := rpcLatency(ctx, h, 0, *n)
	runtime.GOMAXPROCS(prev)
	fmt.Printf("  same, client with GOMAXPROCS=1   median %8.1f µs  p99 %8.1f µs  %s\n", us(local1.median), us(local1.p99), ratio(local1.median))
	bare := bareRPCLatency(inst.URI, *n)
	fmt.Printf("  same, bare socket client         median %8.1f µs  p99 %8.1f µs  %s: no client library, the broker's share\n", us(bare.median), us(bare.p99), ratio(bare.median))
	far := rpcLatency(ctx, h, 15, *n/4)
	hops := 0 // the tree's edges between rank 15 and rank 0, fanout 2
	for r := 15; r > 0; r = (r - 1) / 2 {
		hops++
	}
	fmt.Printf("RPC to rank 15 over %d hops         median %8.1f µs  p99 %8.1f µs\n", hops, us(far.median), us(far.p99))

	for _, clients := range []int{1, 8} {
		rate := rpcThroughput(inst.URI, clients, 3*time.Second)
		fmt.Printf("RPC throughput, %d client(s)        %10.0f msgs/s\n", clients, rate)
	}
	fan := eventFanout(inst, 200)
	fmt.Printf("event fan-out to 16 brokers        median %8.1f µs  (publish to last delivery)\n", us(fan))
	rss := brokerRSS(inst)
	fmt.Printf("broker RSS idle (rank 15)          %10.1f MB\n", float64(rss)/1024)
}

type lat struct{ median, p99 time.Duration }

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func summarize(d []time.Duration) lat {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return lat{d[len(d)/2], d[len(d)*99/100]}
}

// crossProcessPingPong measures a 32-byte round trip to an echo server in
// a second process (this program run again): the floor for a client and
// a broker that are separate processes. With blocking, both ends sleep in
// read(2) on blocking sockets; without, both wait in Go's net poller.
func crossProcessPingPong(n int, blocking bool) lat {
	dir, _ := os.MkdirTemp("", "pp")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s")
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "BENCH_ECHO_SOCKET="+path)
	if blocking {
		cmd.Env = append(cmd.Env, "BENCH_ECHO_BLOCKING=1")
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var c io.ReadWriteCloser
	for i := 0; i < 500; i++ {
		if blocking {
			c, err = dialBlocking(path)
		} else {
			c, err = net.Dial("unix", path)
		}
		if err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		panic(err)
	}
	defer c.Close()
	return pingPong(c, n)
}

// dialBlocking connects to path with a blocking socket that never enters
// Go's net poller: reads sleep in read(2), as in a C program. (A socket
// the poller knows, even a blocking duplicate, also wakes the poller's
// thread on every arrival.)
func dialBlocking(path string) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// acceptBlocking listens on path and accepts one connection, all with
// blocking sockets outside the net poller.
func acceptBlocking(path string) (*os.File, error) {
	ln, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(ln)
	if err := syscall.Bind(ln, &syscall.SockaddrUnix{Name: path}); err != nil {
		return nil, err
	}
	if err := syscall.Listen(ln, 1); err != nil {
		return nil, err
	}
	fd, _, err := syscall.Accept(ln)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// pingPong times n 32-byte round trips on c.
func pingPong(c io.ReadWriter, n int) lat {
	buf := make([]byte, 64)
	out := make([]time.Duration, n)
	for i := range out {
		t := time.Now()
		c.Write(buf[:32])
		c.Read(buf)
		out[i] = time.Since(t)
	}
	return summarize(out)
}

// echoServer answers one connection on path, echoing what it reads.
func echoServer(path string, blocking bool) {
	if blocking {
		c, err := acceptBlocking(path)
		if err != nil {
			panic(err)
		}
		echo(c)
		return
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		panic(err)
	}
	c, err := ln.Accept()
	if err != nil {
		panic(err)
	}
	echo(c)
}

// echo writes back what it reads from c until c fails.
func echo(c io.ReadWriter) {
	buf := make([]byte, 64)
	for {
		k, err := c.Read(buf)
		if err != nil {
			return
		}
		c.Write(buf[:k])
	}
}

// rawPingPong measures a 1-byte round trip over a unix socket pair
// between two goroutines: the machine's floor for any local RPC.
func rawPingPong(n int) lat {
	dir, _ := os.MkdirTemp("", "pp")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		panic(err)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			echo(c)
		}
	}()
	c, _ := net.Dial("unix", path)
	defer c.Close()
	return pingPong(c, n)
}

func rpcLatency(ctx context.Context, h *flux.Handle, rank uint32, n int) lat {
	out := make([]time.Duration, n)
	req := map[string]string{"name": "rank"}
	for i := range out {
		t := time.Now()
		if err := h.Call(ctx, "attr.get", rank, req, nil); err != nil {
			panic(err)
		}
		out[i] = time.Since(t)
	}
	return summarize(out)
}

// bareRPCLatency times n attr.get round trips written and read on the
// local socket by this goroutine alone, with blocking reads and without
// the client library: what the broker adds to the socket's own round trip.
func bareRPCLatency(uri string, n int) lat {
	path, err := flux.SocketPath(uri)
	if err != nil {
		panic(err)
	}
	bc, err := dialBlocking(path)
	if err != nil {
		panic(err)
	}
	defer bc.Close()
	var auth [1]byte
	if _, err := io.ReadFull(bc, auth[:]); err != nil || auth[0] != 0 {
		panic(fmt.Sprintf("local connector refused: %v %v", auth[0], err))
	}
	req := message.NewRequest("attr.get", 0, []byte(`{"name":"rank"}`))
	req.Matchtag = 1
	wire := message.AppendFramed(nil, req)
	r := message.NewReader(bc)
	out := make([]time.Duration, n)
	for i := range out {
		t := time.Now()
		if _, err := bc.Write(wire); err != nil {
			panic(err)
		}
		m, err := r.Read()
		if err != nil {
			panic(err)
		}
		if m.Errnum != 0 {
			panic(fmt.Sprintf("attr.get: errno %d", m.Errnum))
		}
		out[i] = time.Since(t)
	}
	return summarize(out)
}

// rpcThroughput runs clients, each keeping 64 requests in flight.
func rpcThroughput(uri string, clients int, d time.Duration) float64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	deadline := time.Now().Add(d)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := flux.Open(uri)
			if err != nil {
				panic(err)
			}
			defer h.Close()
			ctx := context.Background()
			count := 0
			window := make(chan *flux.Future, 64)
			for time.Now().Before(deadline) {
				for len(window) < cap(window) {
					f, _ := h.RPC("broker.ping", flux.NodeidAny, map[string]int{"seq": count}, 0)
					window <- f
				}
				f := <-window
				f.Get(ctx)
				count++
			}
			for len(window) > 0 {
				(<-window).Get(ctx)
				count++
			}
			mu.Lock()
			total += count
			mu.Unlock()
		}()
	}
	start := time.Now()
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// eventFanout publishes events at rank 0 and times the arrival at a
// subscriber on every rank.
func eventFanout(inst *benchkit.Instance, n int) time.Duration {
	ctx := context.Background()
	var subs []*flux.Subscription
	for r := 0; r < inst.Size; r++ {
		h, err := flux.Open(inst.RankURI(r))
		if err != nil {
			panic(err)
		}
		s, err := h.Subscribe(ctx, "bench.")
		if err != nil {
			panic(err)
		}
		subs = append(subs, s)
	}
	pub, _ := flux.Open(inst.URI)
	var out []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		pub.Publish("bench.fanout", map[string]int{"i": i}, false)
		var wg sync.WaitGroup
		for _, s := range subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.Next(ctx)
			}()
		}
		wg.Wait()
		out = append(out, time.Since(t))
	}
	return summarize(out).median
}

func brokerRSS(inst *benchkit.Instance) int {
	h, err := flux.Open(inst.RankURI(15))
	if err != nil {
		return 0
	}
	defer h.Close()
	pid, err := h.Attr(context.Background(), "broker.pid")
	if err != nil {
		return 0
	}
	rss, _ := benchkit.ProcRSS(pid)
	return rss
}

// startFigures times `flux start -s N true`.
func startFigures(bin string) {
	for _, size := range []int{8, 16} {
		var times []time.Duration
		for i := 0; i < 5; i++ {
			t := time.Now()
			cmd := exec.Command(bin, "start", "-s", strconv.Itoa(size), "true")
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "flux start: %v\n%s", err, out)
				return
			}
			times = append(times, time.Since(t))
		}
		m := summarize(times).median
		fmt.Printf("flux start -s %-2d true               median %8.3f s\n", size, m.Seconds())
	}
}
