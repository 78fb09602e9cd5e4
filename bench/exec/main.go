// Command exec measures the execution path with real processes and
// prints, in one run: the machine's own fork+exec+wait rate for /bin/true
// (two processes at a time), the throughput of N real /bin/true jobs on
// a fluxgo instance beside it, their ratio, and the median and p99
// latency of `flux run true`, with where that time goes.
//
//	go run ./bench/exec [-flux bin/flux] [-n 2000] [-runs 200] [-size 1]
//	go run ./bench/exec -base /tmp/old-flux -flux bin/flux -rounds 3 -runs 0
//
// With -base it runs the throughput figure for two binaries in turns
// (a fresh instance each) and prints each pair's ratios: the figures of
// a shared machine drift by more than most changes gain, but two runs a
// minute apart drift together.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	base := flag.String("base", "", "a second flux binary (the build before) measured in turns with -flux, a fresh instance each, for before/after ratios from one run")
	rounds := flag.Int("rounds", 1, "with -base: pairs of throughput runs (base, then new, alternating)")
	n := flag.Int("n", 2000, "real /bin/true jobs for the throughput figure")
	runs := flag.Int("runs", 200, "flux run true invocations for the latency figure (0: none)")
	size := flag.Int("size", 1, "brokers in the instance")
	window := flag.Int("window", 512, "submits kept in flight")
	profile := flag.String("profile", "", "write rank 0's CPU profile of the (last) throughput run of -flux to this file")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("load average %s\n", benchkit.LoadAvg())
	if *base != "" {
		b, err := filepath.Abs(*base)
		if err != nil {
			fatal(err)
		}
		alternate(b, abs, *rounds, *n, *size, *window, *profile)
		fmt.Printf("load average %s\n", benchkit.LoadAvg())
		if *runs == 0 {
			return
		}
	}

	inst, err := benchkit.Start(abs, *size)
	if err != nil {
		fatal(err)
	}
	defer inst.Stop()
	h, err := flux.Open(inst.URI)
	if err != nil {
		fatal(err)
	}
	defer h.Close()

	if *base == "" {
		r := throughput(h, *n, *size, *window, *profile)
		r.print(*n, *size)
	}
	if *runs == 0 {
		return
	}
	api, apiIDs, err := apiLatency(h, *runs)
	if err != nil {
		fatal(err)
	}
	floor := cliFloor(abs, inst.URI, 50)
	lat, ids, err := runLatency(abs, inst.URI, *runs)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("flux run true                                  median %6.1f ms  p99 %6.1f ms   (target 10 / 30)\n", ms(lat.median), ms(lat.p99))
	fmt.Printf("  flux getattr rank (CLI start + 1 RPC)        median %6.1f ms  p99 %6.1f ms\n", ms(floor.median), ms(floor.p99))
	fmt.Printf("  submit + attach through the API (no CLI)     median %6.1f ms  p99 %6.1f ms\n", ms(api.median), ms(api.p99))
	// The floor no `flux run` can beat on this machine: the CLI process
	// itself (Go runtime and package initialisers of the one binary,
	// nothing else) plus the task's own fork+exec+wait.
	start := timeCommand(50, "FLUX_URI="+inst.URI, abs, "version")
	task := timeCommand(50, "", "/bin/true")
	fmt.Printf("  floor: flux version (binary start-up alone)  median %6.1f ms  p99 %6.1f ms\n", ms(start.median), ms(start.p99))
	fmt.Printf("         + /bin/true spawned alone             median %6.1f ms  p99 %6.1f ms  = %.1f ms (%.1fx the 10 ms target)\n",
		ms(task.median), ms(task.p99), ms(start.median+task.median), ms(start.median+task.median)/10)
	breakdown(h, ids, apiIDs)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/exec:", err)
	os.Exit(1)
}

type lat struct{ median, p99 time.Duration }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func summarize(d []time.Duration) lat {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return lat{s[len(s)/2], s[len(s)*99/100]}
}

// forkRate is the machine's floor for running /bin/true: par goroutines
// each fork+exec+wait it in a loop for d; processes per second.
func forkRate(par int, d time.Duration) (rate float64, cpu time.Duration) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fatal(err)
	}
	defer devnull.Close()
	fd := devnull.Fd()
	attr := &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{fd, fd, fd}}
	cpu0 := benchkit.SelfCPU(true)
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count := 0
			for time.Now().Before(deadline) {
				pid, err := syscall.ForkExec("/bin/true", []string{"true"}, attr)
				if err != nil {
					fatal(err)
				}
				var ws syscall.WaitStatus
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
					fatal(err)
				}
				count++
			}
			mu.Lock()
			total += count
			mu.Unlock()
		}()
	}
	wg.Wait()
	rate = float64(total) / time.Since(start).Seconds()
	return rate, (benchkit.SelfCPU(true) - cpu0) / time.Duration(total)
}

// brokerPIDs returns the process ids of the instance's brokers.
func brokerPIDs(h *flux.Handle, size int) []string {
	var pids []string
	for r := 0; r < size; r++ {
		var resp struct {
			Value string `json:"value"`
		}
		if err := h.Call(context.Background(), "attr.get", uint32(r), map[string]any{"name": "broker.pid"}, &resp); err == nil {
			pids = append(pids, resp.Value)
		}
	}
	return pids
}

// shellPIDs lists the job shell processes of the instance's brokers.
func shellPIDs(h *flux.Handle, size int) []string {
	var pids []string
	for r := 0; r < size; r++ {
		var resp struct {
			Shells []struct {
				PID int `json:"pid"`
			} `json:"shells"`
		}
		if err := h.Call(context.Background(), "job-shell.list", uint32(r), nil, &resp); err == nil {
			for _, s := range resp.Shells {
				pids = append(pids, strconv.Itoa(s.PID))
			}
		}
	}
	return pids
}

// jobThroughput submits n one-task /bin/true jobs and returns jobs per
// second from the first submit until the last job is inactive. Every
// job must finish with status 0.
func jobThroughput(h *flux.Handle, n, window int, profile string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	js, err := jobspec.FromCommand([]string{"/bin/true"}, jobspec.CommandOptions{})
	if err != nil {
		return 0, err
	}
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	js.SetCwd("/")
	b, err := json.Marshal(js)
	if err != nil {
		return 0, err
	}
	J := sign.Wrap(b, uint32(os.Getuid()))

	journal, err := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	if err != nil {
		return 0, err
	}
	defer journal.Close()
	mine := make(map[jobid.ID]bool, n)
	var mu sync.Mutex
	pending := map[jobid.ID]bool{} // clean seen before the submit answered
	var failures []string
	cleaned := 0
	allClean := make(chan struct{})
	go func() {
		for {
			m, err := journal.Next(ctx)
			if err != nil {
				return
			}
			var resp struct {
				ID     jobid.ID `json:"id"`
				Events []struct {
					Name    string          `json:"name"`
					Context json.RawMessage `json:"context"`
				} `json:"events"`
			}
			if m.UnmarshalPayload(&resp) != nil {
				continue
			}
			for _, ev := range resp.Events {
				switch ev.Name {
				case "finish":
					var c struct {
						Status int `json:"status"`
					}
					json.Unmarshal(ev.Context, &c)
					if c.Status != 0 {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s: status %d", resp.ID.String(), c.Status))
						mu.Unlock()
					}
				case "exception":
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: exception %s", resp.ID.String(), ev.Context))
					mu.Unlock()
				case "clean":
					mu.Lock()
					if mine[resp.ID] {
						cleaned++
					} else {
						pending[resp.ID] = true
					}
					if cleaned == n {
						close(allClean)
					}
					mu.Unlock()
				}
			}
		}
	}()

	if profile != "" {
		go func() {
			var resp any
			h.Call(ctx, "broker.profile", 0, map[string]any{"name": "cpu", "path": profile, "duration": 600}, &resp)
		}()
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	futs := make(chan *flux.Future, window)
	errc := make(chan error, 1)
	go func() {
		for f := range futs {
			var resp struct {
				ID jobid.ID `json:"id"`
			}
			if err := f.Decode(ctx, &resp); err != nil {
				errc <- err
				return
			}
			mu.Lock()
			mine[resp.ID] = true
			if pending[resp.ID] {
				delete(pending, resp.ID)
				cleaned++
				if cleaned == n {
					close(allClean)
				}
			}
			mu.Unlock()
		}
		errc <- nil
	}()
	req := map[string]any{"J": J, "urgency": 16, "flags": 0}
	for i := 0; i < n; i++ {
		f, err := h.RPC("job-ingest.submit", flux.NodeidAny, req, 0)
		if err != nil {
			return 0, err
		}
		futs <- f
	}
	close(futs)
	if err := <-errc; err != nil {
		return 0, fmt.Errorf("submit: %w", err)
	}
	select {
	case <-allClean:
	case <-ctx.Done():
		return 0, fmt.Errorf("only %d of %d jobs finished", cleaned, n)
	}
	elapsed := time.Since(start)
	if profile != "" {
		h.Call(ctx, "broker.profile", 0, map[string]any{"name": "cpu-stop"}, nil)
	}
	if len(failures) > 0 {
		return 0, fmt.Errorf("%d jobs failed, e.g. %s", len(failures), failures[0])
	}
	return float64(n) / elapsed.Seconds(), nil
}

// cliFloor times a CLI command that makes one RPC: the part of flux run's
// latency that is process start-up and connecting.
func cliFloor(bin, uri string, runs int) lat {
	return timeCommand(runs, "FLUX_URI="+uri, bin, "getattr", "rank")
}

// timeCommand runs a command runs times, one at a time, and returns the
// median and p99 of its wall time from fork to exit.
func timeCommand(runs int, env string, argv ...string) lat {
	var out []time.Duration
	for i := 0; i < runs; i++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env)
		t := time.Now()
		if err := cmd.Run(); err != nil {
			fatal(fmt.Errorf("%s: %v", strings.Join(argv, " "), err))
		}
		out = append(out, time.Since(t))
	}
	return summarize(out)
}

// runLatency times `flux run true` runs times and returns the job ids.
func runLatency(bin, uri string, runs int) (lat, []jobid.ID, error) {
	var out []time.Duration
	var ids []jobid.ID
	for i := 0; i < runs; i++ {
		cmd := exec.Command(bin, "run", "--env=FLUXBENCH=1", "true")
		cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
		t := time.Now()
		b, err := cmd.CombinedOutput()
		d := time.Since(t)
		if err != nil {
			return lat{}, nil, fmt.Errorf("flux run true: %v: %s", err, b)
		}
		out = append(out, d)
	}
	// the ids, from the job manager's journal of inactive jobs
	h, err := flux.Open(uri)
	if err != nil {
		return lat{}, nil, err
	}
	defer h.Close()
	var resp struct {
		Jobs []struct {
			ID jobid.ID `json:"id"`
		} `json:"jobs"`
	}
	err = h.Call(context.Background(), "job-list.list", flux.NodeidAny,
		map[string]any{"max_entries": runs, "attrs": []string{"id"}}, &resp)
	if err == nil {
		for _, j := range resp.Jobs {
			ids = append(ids, j.ID)
		}
	}
	return summarize(out), ids, nil
}

// apiLatency does what flux run true does through the client API, from
// one process: submit, then watch the eventlog, exec eventlog and output
// until each ends.
func apiLatency(h *flux.Handle, runs int) (lat, []jobid.ID, error) {
	ctx := context.Background()
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{})
	if err != nil {
		return lat{}, nil, err
	}
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	js.SetCwd("/")
	b, _ := json.Marshal(js)
	J := sign.Wrap(b, uint32(os.Getuid()))
	var out []time.Duration
	var ids []jobid.ID
	for i := 0; i < runs; i++ {
		t := time.Now()
		var resp struct {
			ID jobid.ID `json:"id"`
		}
		if err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": J, "urgency": 16, "flags": 0}, &resp); err != nil {
			return lat{}, nil, err
		}
		errc := make(chan error, 3)
		for _, path := range []string{"eventlog", "guest.exec.eventlog", "guest.output"} {
			go func() {
				f, err := h.RPC("job-info.eventlog-watch", flux.NodeidAny, map[string]any{"id": resp.ID, "path": path, "flags": 0}, flux.Streaming)
				if err != nil {
					errc <- err
					return
				}
				for {
					m, err := f.Next(ctx)
					if err != nil {
						if err == io.EOF {
							err = nil
						}
						errc <- err
						return
					}
					var ev struct {
						Event string `json:"event"`
					}
					m.UnmarshalPayload(&ev)
					if path == "eventlog" && strings.Contains(ev.Event, `"name":"clean"`) {
						h.RPC("job-info.eventlog-watch-cancel", flux.NodeidAny, map[string]any{"matchtag": f.Matchtag()}, flux.NoResponse)
					}
				}
			}()
		}
		for k := 0; k < 3; k++ {
			if err := <-errc; err != nil {
				return lat{}, nil, err
			}
		}
		out = append(out, time.Since(t))
		ids = append(ids, resp.ID)
	}
	return summarize(out), ids, nil
}

// breakdown prints the median and p99 time between the events of the
// flux run jobs, beside those of the API's jobs: where the latency goes
// inside the instance, and what the CLI process running beside it costs.
func breakdown(h *flux.Handle, cliIDs, apiIDs []jobid.ID) {
	type step struct{ from, to string }
	steps := []step{
		{"submit", "validate"}, {"validate", "alloc"}, {"alloc", "exec:init"},
		{"exec:init", "exec:shell.init"}, {"exec:shell.init", "exec:shell.start"},
		{"exec:shell.start", "exec:shell.task-exit"}, {"exec:shell.task-exit", "exec:shell-exit"},
		{"exec:shell-exit", "exec:done"}, {"exec:done", "finish"}, {"finish", "clean"},
		{"submit", "clean"},
	}
	cli := stepDeltas(h, cliIDs, len(steps), func(i int) (string, string) { return steps[i].from, steps[i].to })
	api := stepDeltas(h, apiIDs, len(steps), func(i int) (string, string) { return steps[i].from, steps[i].to })
	fmt.Printf("  inside the instance (%d flux run jobs | %d API jobs):\n", len(cliIDs), len(apiIDs))
	for i, s := range steps {
		if len(cli[i]) == 0 || len(api[i]) == 0 {
			continue
		}
		c, a := summarize(cli[i]), summarize(api[i])
		name := strings.TrimPrefix(s.from, "exec:") + " -> " + strings.TrimPrefix(s.to, "exec:")
		fmt.Printf("    %-34s median %6.2f | %6.2f ms  p99 %6.2f | %6.2f ms\n", name, ms(c.median), ms(a.median), ms(c.p99), ms(a.p99))
	}
}

// stepDeltas reads the jobs' eventlogs and returns, for each of n steps
// (the names of the events that start and end it, exec events prefixed
// "exec:"), the time each job took over it.
func stepDeltas(h *flux.Handle, ids []jobid.ID, n int, step func(int) (string, string)) [][]time.Duration {
	ctx := context.Background()
	deltas := make([][]time.Duration, n)
	for _, id := range ids {
		var resp struct {
			Eventlog string `json:"eventlog"`
			Exec     string `json:"guest.exec.eventlog"`
		}
		err := h.Call(ctx, "job-info.lookup", flux.NodeidAny,
			map[string]any{"id": id, "keys": []string{"eventlog", "guest.exec.eventlog"}, "flags": 0}, &resp)
		if err != nil {
			continue
		}
		at := map[string]float64{}
		for prefix, text := range map[string]string{"": resp.Eventlog, "exec:": resp.Exec} {
			evs, err := eventlog.Parse([]byte(text))
			if err != nil {
				continue
			}
			for _, ev := range evs {
				if _, ok := at[prefix+ev.Name]; !ok {
					at[prefix+ev.Name] = ev.Timestamp
				}
			}
		}
		for i := range deltas {
			from, to := step(i)
			a, ok1 := at[from]
			b, ok2 := at[to]
			if ok1 && ok2 {
				deltas[i] = append(deltas[i], time.Duration((b-a)*1e9))
			}
		}
	}
	return deltas
}
