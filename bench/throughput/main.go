package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	counts := flag.String("n", "1000,10000,16000,64000", "job counts to run, comma-separated (a fresh instance each; the issue's rate targets are for 10,000)")
	nodes := flag.Int("nodes", 16384, "fake nodes in the inventory")
	cores := flag.Int("cores", 64, "cores per fake node")
	runDuration := flag.String("run", "0.001s", "test executor run duration of each job (FSD)")
	window := flag.Int("window", 4096, "submit requests kept in flight")
	profDir := flag.String("profile", "", "write broker CPU and heap profiles and a client CPU profile of each run into this directory")
	stages := flag.Bool("stages", false, "also print the median time between a job's events (where jobs wait)")
	var extra attrList
	flag.Var(&extra, "S", "extra broker attribute NAME=VALUE for the instance (repeatable)")
	confDir := flag.String("config-path", "", "start the instance with this configuration directory (flux start --config-path), e.g. to load jobtap plugins")
	modstats := flag.Bool("modstats", false, "also print each module's messages received and sent per job")
	hold := flag.Bool("hold", false, "keep the last instance running afterwards (its URI is printed) until stdin closes")
	setup := flag.String("setup", "", "a shell command run in each instance (FLUX_URI set) once its scheduler answers and before the first submit, e.g. flux account commands that put the submitting user in the accounting database")
	held := flag.Bool("held", false, "submit held jobs (urgency 0) and measure submission alone: what job-ingest, the KVS and the job manager's acceptance cost without the rest of the pipeline")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	var ns []int
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-n: bad job count %q", s))
		}
		ns = append(ns, n)
	}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			fatal(err)
		}
	}
	cfg := runConfig{
		bin:      abs,
		nodes:    *nodes,
		cores:    *cores,
		run:      *runDuration,
		window:   *window,
		profDir:  *profDir,
		stages:   *stages,
		hold:     *hold,
		attrs:    extra,
		confDir:  *confDir,
		modstats: *modstats,
		held:     *held,
		setup:    *setup,
	}
	fmt.Printf("throughput: %d nodes × %d cores, 1-core jobs running %s, %d submits in flight\n",
		cfg.nodes, cfg.cores, cfg.run, cfg.window)
	var results []result
	for _, n := range ns {
		res, err := cfg.measure(n, n == ns[len(ns)-1])
		if err != nil {
			fatal(fmt.Errorf("N=%d: %w", n, err))
		}
		results = append(results, res)
		if cfg.held {
			fmt.Printf("N=%-6d submit %8.0f jobs/s (held jobs: submission alone)  broker RSS %6.1f MB\n", n, res.submitRate, mb(res.rssKB))
		} else {
			fmt.Printf("N=%-6d submit %8.0f jobs/s  throughput %8.0f jobs/s  wall %7.2f s  broker RSS %6.1f MB (peak %6.1f)\n",
				n, res.submitRate, res.throughput, res.wall.Seconds(), mb(res.rssKB), mb(res.hwmKB))
		}
		fmt.Printf("        CPU per job: broker %6.1f µs, client %6.1f µs  (load average before: %s)\n",
			res.brokerCPU.Seconds()*1e6/float64(n), res.clientCPU.Seconds()*1e6/float64(n), res.load)
		fmt.Printf("        broker: %.0f%% of its CPU in the kernel, %.2f minor page faults per job\n",
			100*res.brokerStat.System.Seconds()/(res.brokerStat.User+res.brokerStat.System).Seconds(),
			float64(res.brokerStat.MinorFaults)/float64(n))
		if res.stages != "" {
			fmt.Print(res.stages)
		}
		if res.modstats != "" {
			fmt.Print(res.modstats)
		}
		if res.jobsTime > 0 {
			fmt.Printf("        flux jobs -a -c 0: %.3f s for %d lines (right after the run, the broker still writing back)\n", res.jobsTime.Seconds(), res.jobsLines)
		}
		if res.settledKB > 0 {
			fmt.Printf("        broker idle %v later: RSS %.1f MB holding %d inactive jobs; flux jobs -a -c 0: %.3f s\n",
				settleTime, mb(res.settledKB), n, res.jobsIdleTime.Seconds())
		}
	}
	if len(results) > 1 && !cfg.held {
		first, last := results[0], results[len(results)-1]
		fmt.Printf("throughput ratio N=%d / N=%d: %.2f\n", last.n, first.n, last.throughput/first.throughput)
	}
}

// modCount is a module's message counters (module.list).
type modCount struct {
	Name   string `json:"name"`
	Rx, Tx uint64
}

func moduleCounts(ctx context.Context, h *flux.Handle) map[string]modCount {
	var resp struct {
		Mods []modCount `json:"mods"`
	}
	if err := h.Call(ctx, "module.list", flux.NodeidAny, nil, &resp); err != nil {
		return nil
	}
	out := make(map[string]modCount, len(resp.Mods))
	for _, m := range resp.Mods {
		out[m.Name] = m
	}
	return out
}

// modulesPerJob formats the messages each module received and sent per
// job between two counts.
func modulesPerJob(before, after map[string]modCount, n int) string {
	names := make([]string, 0, len(after))
	for name := range after {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	total := 0.0
	for _, name := range names {
		rx := float64(after[name].Rx-before[name].Rx) / float64(n)
		tx := float64(after[name].Tx-before[name].Tx) / float64(n)
		if rx+tx < 0.01 {
			continue
		}
		total += rx
		fmt.Fprintf(&b, "        %-16s rx %6.2f  tx %6.2f  messages per job\n", name, rx, tx)
	}
	fmt.Fprintf(&b, "        %-16s rx %6.2f  messages per job delivered to modules\n", "(all)", total)
	return b.String()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "throughput:", err)
	os.Exit(1)
}

func mb(kb int) float64 { return float64(kb) / 1024 }

type runConfig struct {
	bin          string
	nodes, cores int
	run          string
	window       int
	profDir      string
	stages       bool
	hold         bool
	attrs        []string
	confDir      string
	modstats     bool
	held         bool   // urgency 0: measure submission alone
	setup        string // shell command run before the first submit (-setup)
}

// attrList collects -S NAME=VALUE flags.
type attrList []string

func (a *attrList) String() string     { return strings.Join(*a, ",") }
func (a *attrList) Set(v string) error { *a = append(*a, v); return nil }

type result struct {
	n            int
	submitRate   float64 // jobs/s from the first submit sent to the last id received
	throughput   float64 // jobs/s from the first submit sent to the last clean event
	wall         time.Duration
	rssKB, hwmKB int
	settledKB    int // RSS once the broker has been idle (last N only)
	load         string
	// CPU time used during the run: a figure that holds up when other
	// work shares the machine
	brokerCPU, clientCPU time.Duration
	brokerStat           benchkit.Stat // over the run: user, system, minor faults
	jobsTime             time.Duration // flux jobs -a -c 0 (last run only)
	jobsIdleTime         time.Duration // the same once the broker is idle
	jobsLines            int
	stages               string // per-stage latencies (-stages)
	modstats             string // messages per job by module (-modstats)
}

// measure runs n jobs on a fresh instance.
func (c *runConfig) measure(n int, listJobs bool) (result, error) {
	res := result{n: n, load: benchkit.LoadAvg()}
	opts := []string{
		"-S", fmt.Sprintf(`resource.config=[{"hosts":"node[0-%d]","cores":"0-%d"}]`, c.nodes-1, c.cores-1),
		"-S", "resource.monitor-force-up=1",
	}
	for _, a := range c.attrs {
		opts = append(opts, "-S", a)
	}
	if c.confDir != "" {
		opts = append(opts, "--config-path", c.confDir)
	}
	inst, err := benchkit.Start(c.bin, 1, opts...)
	if err != nil {
		return res, err
	}
	defer func() {
		if c.hold && listJobs {
			fmt.Printf("instance kept: FLUX_URI=%s (close stdin to stop it)\n", inst.URI)
			io.Copy(io.Discard, os.Stdin)
		}
		inst.Stop()
	}()
	spec, err := c.jobspec(inst.URI)
	if err != nil {
		return res, err
	}
	h, err := flux.Open(inst.URI)
	if err != nil {
		return res, err
	}
	defer h.Close()
	ctx := context.Background()
	if err := waitSchedReady(ctx, h); err != nil {
		return res, err
	}
	if c.setup != "" {
		cmd := exec.Command("sh", "-c", c.setup)
		cmd.Env = append(os.Environ(), "FLUX_URI="+inst.URI, "PATH="+filepath.Dir(c.bin)+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return res, fmt.Errorf("-setup %q: %v\n%s", c.setup, err, out)
		}
	}
	pid, err := h.Attr(ctx, "broker.pid")
	if err != nil {
		return res, err
	}

	// The end of each job is all the count needs: the journal sends only
	// clean events (flux-core's "allow" filter), unless -stages wants
	// every event. (flux-core's throughput.py watches each job's
	// eventlog instead: one job-info stream per job.)
	journalReq := `{"allow":{"clean":1}}`
	if c.stages {
		journalReq = `{}`
	}
	journal, err := h.RPC("job-manager.events-journal", flux.NodeidAny, json.RawMessage(journalReq), flux.Streaming)
	if err != nil {
		return res, err
	}
	cleaned := make(chan time.Time, 1)
	var st *stageLog
	if c.stages {
		st = newStageLog()
	}
	// With -profile, a heap profile is also taken when 90% of the jobs
	// are clean: the live heap is largest near the end of a run.
	var midHeap func()
	if c.profDir != "" {
		path := filepath.Join(c.profDir, strconv.Itoa(n)) + ".broker.midheap"
		midHeap = func() {
			h.RPC("broker.profile", flux.NodeidAny, map[string]any{"name": "heap", "path": path}, 0)
		}
	}
	go followJournal(journal, n, cleaned, st, midHeap)

	var cpuProf *flux.Future
	var clientProf *os.File
	if c.profDir != "" {
		base := filepath.Join(c.profDir, strconv.Itoa(n))
		cpuProf, err = h.RPC("broker.profile", flux.NodeidAny, map[string]any{"name": "cpu", "path": base + ".broker.cpu", "duration": 3600}, 0)
		if err != nil {
			return res, err
		}
		if clientProf, err = os.Create(base + ".client.cpu"); err != nil {
			return res, err
		}
		pprof.StartCPUProfile(clientProf)
	}

	var mods0 map[string]modCount
	if c.modstats {
		mods0 = moduleCounts(ctx, h)
	}
	cpu0, ccpu0 := benchkit.ProcCPU(false, pid), benchkit.SelfCPU(false)
	stat0 := benchkit.ProcStat(pid)
	urgency := 16
	if c.held {
		urgency = 0
	}
	payload := []byte(`{"J":` + strconv.Quote(sign.Wrap(spec, uint32(os.Getuid()))) + `,"urgency":` + strconv.Itoa(urgency) + `,"flags":0}`)
	start := time.Now()
	lastID, err := submit(ctx, h, payload, n, c.window)
	if err != nil {
		return res, err
	}
	submitted := time.Since(start)
	end := time.Now()
	if !c.held {
		select {
		case end = <-cleaned:
		case <-time.After(time.Duration(n)*10*time.Millisecond + time.Minute):
			return res, fmt.Errorf("jobs did not all reach clean (last id %d)", lastID)
		}
	}
	res.wall = time.Since(start)
	res.brokerCPU, res.clientCPU = benchkit.ProcCPU(false, pid)-cpu0, benchkit.SelfCPU(false)-ccpu0
	stat1 := benchkit.ProcStat(pid)
	res.brokerStat = benchkit.Stat{User: stat1.User - stat0.User, System: stat1.System - stat0.System, MinorFaults: stat1.MinorFaults - stat0.MinorFaults}
	if clientProf != nil {
		pprof.StopCPUProfile()
		clientProf.Close()
		// end the broker CPU profile by asking for the heap one
		base := filepath.Join(c.profDir, strconv.Itoa(n))
		if err := h.Call(ctx, "broker.profile", flux.NodeidAny, map[string]any{"name": "cpu-stop"}, nil); err != nil {
			return res, err
		}
		if err := cpuProf.Decode(ctx, nil); err != nil {
			return res, fmt.Errorf("broker cpu profile: %w", err)
		}
		if err := h.Call(ctx, "broker.profile", flux.NodeidAny, map[string]any{"name": "heap", "path": base + ".broker.heap"}, nil); err != nil {
			return res, err
		}
	}
	res.submitRate = float64(n) / submitted.Seconds()
	res.throughput = float64(n) / end.Sub(start).Seconds()
	res.rssKB, res.hwmKB = benchkit.ProcRSS(pid)
	if c.modstats {
		res.modstats = modulesPerJob(mods0, moduleCounts(ctx, h), n)
	}
	if st != nil {
		res.stages = st.report()
	}
	if listJobs && !c.held {
		res.jobsTime, res.jobsLines, err = timeFluxJobs(c.bin, inst.URI, n)
		if err != nil {
			return res, err
		}
		res.settledKB = settledRSS(pid)
		if res.jobsIdleTime, _, err = timeFluxJobs(c.bin, inst.URI, n); err != nil {
			return res, err
		}
	}
	return res, nil
}

// jobspec asks flux submit --dry-run for the jobspec of a one-core test
// job, so the payloads are exactly what the CLI sends (environment and
// working directory included).
func (c *runConfig) jobspec(uri string) ([]byte, error) {
	cmd := exec.Command(c.bin, "submit", "--dry-run", "--setattr=system.exec.test.run_duration="+c.run, "true")
	cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("flux submit --dry-run: %w", err)
	}
	return bytes.TrimSpace(out), nil
}

// waitSchedReady waits until the scheduler answers: it loads after the
// initial program may already run.
func waitSchedReady(ctx context.Context, h *flux.Handle) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := h.Call(ctx, "sched.resource-status", flux.NodeidAny, nil, nil)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scheduler not ready: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submit sends n copies of payload to job-ingest keeping window requests
// in flight and returns the last job id.
func submit(ctx context.Context, h *flux.Handle, payload []byte, n, window int) (uint64, error) {
	futs := make(chan *flux.Future, window)
	errs := make(chan error, 1)
	go func() {
		defer close(futs)
		for i := 0; i < n; i++ {
			f, err := h.RPC("job-ingest.submit", flux.NodeidAny, json.RawMessage(payload), 0)
			if err != nil {
				errs <- err
				return
			}
			futs <- f
		}
	}()
	var last uint64
	got := 0
	for f := range futs {
		var resp struct {
			ID uint64 `json:"id"`
		}
		if err := f.Decode(ctx, &resp); err != nil {
			return 0, fmt.Errorf("submit: %w", err)
		}
		last = resp.ID
		got++
	}
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	if got != n {
		return 0, fmt.Errorf("submitted %d of %d jobs", got, n)
	}
	return last, nil
}

var cleanName = []byte(`"name":"clean"`)

// followJournal counts clean events on the job manager's journal and
// reports when the n-th arrives; st, if not nil, records every event.
func followJournal(f *flux.Future, n int, done chan<- time.Time, st *stageLog, mid func()) {
	ctx := context.Background()
	count := 0
	midAt := n * 9 / 10
	for {
		m, err := f.Next(ctx)
		if err != nil {
			return
		}
		if st != nil {
			st.add(m.JSON())
		}
		count += bytes.Count(m.JSON(), cleanName)
		if mid != nil && count >= midAt {
			mid()
			mid = nil
		}
		if count >= n {
			done <- time.Now()
			return
		}
	}
}

// timeFluxJobs runs flux jobs -a -c 0 three times and returns the best
// time and the number of lines it printed.
func timeFluxJobs(bin, uri string, n int) (time.Duration, int, error) {
	best := time.Duration(0)
	lines := 0
	for try := 0; try < 3; try++ {
		cmd := exec.Command(bin, "jobs", "-a", "-c", "0")
		cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
		t := time.Now()
		out, err := cmd.Output()
		d := time.Since(t)
		if err != nil {
			return 0, 0, fmt.Errorf("flux jobs -a -c 0: %w", err)
		}
		lines = bytes.Count(out, []byte("\n")) - 1 // header
		if best == 0 || d < best {
			best = d
		}
	}
	return best, lines, nil
}

// settleTime is how long settledRSS leaves the broker idle: past the
// broker's idle trim (10 s without a collection returns free memory).
const settleTime = 15 * time.Second

// settledRSS waits settleTime with the broker idle and returns its RSS:
// what holding the jobs costs, rather than what the burst left behind.
func settledRSS(pid string) int {
	time.Sleep(settleTime)
	rss, _ := benchkit.ProcRSS(pid)
	return rss
}
