// Command testexec measures how close multi-node test-executor jobs end
// to their configured duration (issue 21's fourth item): on an instance
// of -size brokers with -nodes fake nodes, it submits -n exclusive
// `-N 1-64` test jobs whose system.exec.test.run_duration runs from 10 to
// 160 ms, waits for them all, and prints from their eventlogs by how much
// start -> finish, and start -> clean (run to inactive), exceed the
// configured duration: mean, median, p99 and max.
//
//	go run ./bench/testexec [-flux bin/flux] [-size 4] [-nodes 16384] [-n 600]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	size := flag.Int("size", 4, "brokers in the instance")
	nodes := flag.Int("nodes", 16384, "fake nodes in the inventory (0: the brokers' own)")
	n := flag.Int("n", 600, "test jobs")
	window := flag.Int("window", 256, "submits kept in flight")
	flag.Parse()
	if *n <= 0 || *n > 1000000 || *size <= 0 || *size > 1024 || *nodes < 0 || *nodes > 1<<20 || *window <= 0 {
		fatal(fmt.Errorf("-n must be 1-1000000, -size 1-1024, -nodes 0-%d, -window > 0", 1<<20))
	}
	var opts []string
	maxN := 64
	if *nodes > 0 {
		opts = append(opts, "-S", fmt.Sprintf(`resource.config=[{"hosts":"node[0-%d]","cores":"0-63"}]`, *nodes-1),
			"-S", "resource.monitor-force-up=1")
		maxN = min(maxN, *nodes)
	} else {
		maxN = min(maxN, *size)
	}
	fmt.Printf("load average %s\n", benchkit.LoadAvg())
	inst, err := benchkit.Start(*bin, *size, opts...)
	if err != nil {
		fatal(err)
	}
	defer inst.Stop()
	h, err := flux.Open(inst.URI)
	if err != nil {
		fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	waitReady(ctx, h)

	// jobspecs from flux submit --dry-run: every node count and duration
	durations := []int{10, 20, 40, 80, 160} // ms
	var counts []int
	for c := 1; c <= maxN; c *= 2 {
		counts = append(counts, c)
	}
	type kind struct {
		J   string
		dur time.Duration
	}
	var kinds []kind
	for _, c := range counts {
		for _, d := range durations {
			cmd := exec.Command(*bin, "submit", "--dry-run", "-N", strconv.Itoa(c), "--exclusive",
				fmt.Sprintf("--setattr=system.exec.test.run_duration=%dms", d), "true")
			cmd.Env = append(os.Environ(), "FLUX_URI="+inst.URI)
			out, err := cmd.Output()
			if err != nil {
				fatal(fmt.Errorf("flux submit --dry-run: %w", err))
			}
			kinds = append(kinds, kind{sign.Wrap(bytes.TrimSpace(out), uint32(os.Getuid())), time.Duration(d) * time.Millisecond})
		}
	}

	// submit n, round robin over the kinds, window at a time
	dur := make(map[jobid.ID]time.Duration, *n)
	var mu sync.Mutex
	sem := make(chan struct{}, *window)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		k := kinds[i%len(kinds)]
		sem <- struct{}{}
		f, err := h.RPC("job-ingest.submit", flux.NodeidAny, map[string]any{"J": k.J, "urgency": 16, "flags": 0}, 0)
		if err != nil {
			fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var resp struct {
				ID jobid.ID `json:"id"`
			}
			if err := f.Decode(ctx, &resp); err != nil {
				fatal(fmt.Errorf("submit: %w", err))
			}
			mu.Lock()
			dur[resp.ID] = k.dur
			mu.Unlock()
		}()
	}
	wg.Wait()
	// wait for every job (job-manager.wait needs waitable jobs: poll job-list)
	waitInactive(ctx, h, *n, 10*time.Minute)
	elapsed := time.Since(t0)

	var fin, clean, alloc []time.Duration
	byDur := map[time.Duration][]time.Duration{}
	for id, d := range dur {
		at := eventTimes(ctx, h, id)
		s, ok1 := at["start"]
		f, ok2 := at["finish"]
		c, ok3 := at["clean"]
		if !ok1 || !ok2 || !ok3 {
			fatal(fmt.Errorf("job %s: eventlog lacks start, finish or clean", id))
		}
		fin = append(fin, time.Duration((f-s)*1e9)-d)
		byDur[d] = append(byDur[d], time.Duration((f-s)*1e9)-d)
		clean = append(clean, time.Duration((c-s)*1e9)-d)
		if a, ok := at["alloc"]; ok {
			alloc = append(alloc, time.Duration((s-a)*1e9))
		}
	}
	fmt.Printf("%d exclusive -N 1-%d test jobs of 10-160 ms on %d broker(s), %d nodes: %.1f s, %.0f jobs/s  (load average %s)\n",
		*n, maxN, *size, max(*nodes, *size), elapsed.Seconds(), float64(*n)/elapsed.Seconds(), benchkit.LoadAvg())
	report("start -> finish, beyond the duration", fin)
	report("start -> clean (run to inactive), beyond", clean)
	report("alloc -> start", alloc)
	for _, d := range durations {
		report(fmt.Sprintf("start -> finish beyond, %d ms jobs", d), byDur[time.Duration(d)*time.Millisecond])
	}
}

func report(name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	fmt.Printf("  %-42s mean %7.2f ms  median %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", name,
		ms(sum/time.Duration(len(d))), ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(d[len(d)-1]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/testexec:", err)
	os.Exit(1)
}

// waitReady waits until the scheduler answers: it loads after the
// initial program may already run.
func waitReady(ctx context.Context, h *flux.Handle) {
	deadline := time.Now().Add(60 * time.Second)
	for h.Call(ctx, "sched.resource-status", flux.NodeidAny, nil, nil) != nil {
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("scheduler not ready after 60 s"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitInactive polls job-list until n jobs are inactive.
func waitInactive(ctx context.Context, h *flux.Handle, n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		var resp struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		err := h.Call(ctx, "job-list.list", flux.NodeidAny,
			map[string]any{"max_entries": 0, "states": 0x40, "results": 0, "attrs": []string{"id"}}, &resp)
		if err == nil && len(resp.Jobs) >= n {
			return
		}
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("only %d of %d jobs inactive after %v", len(resp.Jobs), n, limit))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventTimes reads a job's eventlog: the first time of each event name.
func eventTimes(ctx context.Context, h *flux.Handle, id jobid.ID) map[string]float64 {
	var resp struct {
		Eventlog string `json:"eventlog"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny,
		map[string]any{"id": id, "keys": []string{"eventlog"}, "flags": 0}, &resp); err != nil {
		fatal(fmt.Errorf("job %s: %w", id, err))
	}
	evs, err := eventlog.Parse([]byte(resp.Eventlog))
	if err != nil {
		fatal(fmt.Errorf("job %s: eventlog: %w", id, err))
	}
	at := map[string]float64{}
	for _, ev := range evs {
		if _, ok := at[ev.Name]; !ok {
			at[ev.Name] = ev.Timestamp
		}
	}
	return at
}
