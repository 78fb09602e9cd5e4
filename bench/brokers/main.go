// Command brokers measures a many-broker instance on one machine (issue
// 26's fifth item): `flux start -s N` with fan-out F until every broker
// has joined, each broker's idle memory (RSS, and PSS: RSS with the
// binary's pages shared by every process divided among them), the CPU
// the brokers and their job-shell servers spent starting, the time an
// event takes to reach every broker, `flux run -N N true`, and the
// shutdown. It splits the start-up CPU by kind of process (rank 0, the
// interior brokers, the leaves, the job-shell servers), measures the
// idle cost (CPU and context switches a second, all threads counted),
// and splits RSS into anonymous pages and the binary's file pages, with
// beside it an idle `flux event sub` (a flux process that only waits:
// the floor of RSS). Beside it, alternating, the floor: N `flux version`
// processes of the same binary started at once (what starting N
// processes of this binary costs here), and the ratios to it.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	size := flag.Int("size", 256, "brokers")
	fanout := flag.Int("fanout", 16, "tbon.fanout")
	runs := flag.Int("runs", 3, "instances started (each alternated with the floor)")
	events := flag.Int("events", 50, "events published per run for the fan-out figure")
	jobs := flag.Int("jobs", 3, "flux run -N size true per run")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("%d brokers, tbon.fanout=%d, %d runs; load average before: %s\n", *size, *fanout, *runs, benchkit.LoadAvg())
	var all []figures
	var floors []floor
	for i := 0; i < *runs; i++ {
		if i%2 == 1 { // alternate which goes first
			floors = append(floors, measureFloor(abs, *size))
		}
		f, err := measure(abs, *size, *fanout, *events, *jobs)
		if err != nil {
			fatal(err)
		}
		all = append(all, f)
		if i%2 == 0 {
			floors = append(floors, measureFloor(abs, *size))
		}
		fl := floors[len(floors)-1]
		fmt.Printf("run %d: initial program after %.2f s with %d nodes up; join %.2f s (floor %.2f s: %.1fx), start-up CPU %.1f ms/broker (floor %.1f ms/process: %.1fx), RSS median %.1f MB max %.1f MB, PSS median %.1f MB (+ shell server %.1f MB), event fan-out median %.1f ms, flux run -N%d true median %.3f s, shutdown %.2f s; load %s\n",
			i+1, f.initial.Seconds(), f.upAtInitial, f.join.Seconds(), fl.wall.Seconds(), f.join.Seconds()/fl.wall.Seconds(),
			ms(f.cpu)/float64(*size), ms(fl.cpu)/float64(*size), (ms(f.cpu)/float64(*size))/(ms(fl.cpu)/float64(*size)),
			mb(f.rssMedian), mb(f.rssMax), mb(f.pssMedian), mb(f.shellPSS), ms(f.fanout), *size, f.run.Seconds(), f.stop.Seconds(), benchkit.LoadAvg())
		fmt.Printf("  CPU at the join: %v\n", f.byClass)
		fmt.Printf("  idle: %.3f%% of a core and %.1f context switches/s per broker (median leaf %.1f/s), %d threads per broker; RSS anon %.1f MB + file %.1f MB; an idle flux process that only waits: RSS %.1f MB, PSS %.1f MB\n",
			100*f.idleCPU, f.idleCS, f.leafCS, f.threads, mb(f.anonMedian), mb(f.fileMedian), mb(f.floorRSS), mb(f.floorPSS))
	}
	med := func(get func(figures) float64) float64 {
		var v []float64
		for _, f := range all {
			v = append(v, get(f))
		}
		return median(v)
	}
	fmed := func(get func(floor) float64) float64 {
		var v []float64
		for _, f := range floors {
			v = append(v, get(f))
		}
		return median(v)
	}
	join, fjoin := med(func(f figures) float64 { return f.join.Seconds() }), fmed(func(f floor) float64 { return f.wall.Seconds() })
	cpu, fcpu := med(func(f figures) float64 { return ms(f.cpu) / float64(*size) }), fmed(func(f floor) float64 { return ms(f.cpu) / float64(*size) })
	fmt.Printf("\nmedians of %d runs (%d brokers, fan-out %d)\n", *runs, *size, *fanout)
	fmt.Printf("  join (flux start until every broker's resources are up)            %8.2f s   floor %d x flux version at once %.2f s  ratio %.1f\n", join, *size, fjoin, join/fjoin)
	fmt.Printf("  start-up CPU per broker (broker + job-shell server, at join)         %8.1f ms  floor per flux version %.1f ms   ratio %.1f\n", cpu, fcpu, cpu/fcpu)
	fmt.Printf("  idle broker RSS median / max                                        %8.1f / %.1f MB\n", med(func(f figures) float64 { return mb(f.rssMedian) }), med(func(f figures) float64 { return mb(f.rssMax) }))
	fmt.Printf("  idle broker PSS median (its own memory + its share of the binary)   %8.1f MB, job-shell server %.1f MB\n", med(func(f figures) float64 { return mb(f.pssMedian) }), med(func(f figures) float64 { return mb(f.shellPSS) }))
	fmt.Printf("  idle CPU per broker + job-shell server (5 s after the join)         %8.3f%% of a core (all %d: %.1f%%)\n", 100*med(func(f figures) float64 { return f.idleCPU }), *size, 100*float64(*size)*med(func(f figures) float64 { return f.idleCPU }))
	fmt.Printf("  idle context switches per broker + job-shell server                  %8.1f /s (median leaf %.1f/s)\n", med(func(f figures) float64 { return f.idleCS }), med(func(f figures) float64 { return f.leafCS }))
	fmt.Printf("  idle broker RSS: anonymous / file (the binary's pages)              %8.1f / %.1f MB; floor (an idle flux event sub) RSS %.1f MB, PSS %.1f MB\n",
		med(func(f figures) float64 { return mb(f.anonMedian) }), med(func(f figures) float64 { return mb(f.fileMedian) }), med(func(f figures) float64 { return mb(f.floorRSS) }), med(func(f figures) float64 { return mb(f.floorPSS) }))
	fmt.Printf("  event fan-out to every broker (publish to last delivery)           %8.1f ms\n", med(func(f figures) float64 { return ms(f.fanout) }))
	fmt.Printf("  flux run -N%d true                                                 %8.3f s\n", *size, med(func(f figures) float64 { return f.run.Seconds() }))
	fmt.Printf("  shutdown (initial program's end to flux start's exit)              %8.2f s\n", med(func(f figures) float64 { return f.stop.Seconds() }))
}

type figures struct {
	join, cpu, fanout, run, stop time.Duration
	initial                      time.Duration // when the initial program ran
	upAtInitial                  int           // nodes up then
	idleCPU                      float64       // cores per broker (+ shell server) while idle
	idleCS, leafCS               float64       // context switches a second per broker (+ shell server), median leaf
	byClass                      classes       // CPU at the join by kind of process
	anonMedian, fileMedian       int           // KiB of a broker's RSS: anonymous, file (the binary)
	threads                      int           // median threads per broker
	floorRSS, floorPSS           int           // KiB: an idle flux process that only waits
	rssMedian, rssMax, pssMedian int           // KiB
	shellPSS                     int           // KiB, median over ranks
}

type floor struct{ wall, cpu time.Duration }

// measureFloor starts n `flux version` at once and waits for all.
func measureFloor(bin string, n int) floor {
	cpu0 := benchkit.SelfCPU(true)
	t := time.Now()
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.Command(bin, "version")
		if err := cmds[i].Start(); err != nil {
			fatal(err)
		}
	}
	for _, c := range cmds {
		c.Wait()
	}
	return floor{wall: time.Since(t), cpu: benchkit.SelfCPU(true) - cpu0}
}

func measure(bin string, size, fanout, events, jobs int) (figures, error) {
	var f figures
	t := time.Now()
	cmd := exec.Command(bin, "start", "-s", strconv.Itoa(size), "-S", "tbon.fanout="+strconv.Itoa(fanout),
		"sh", "-c", `echo "$FLUX_URI"; exec cat >/dev/null`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return f, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return f, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return f, err
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return f, fmt.Errorf("flux start -s %d: no initial program: %v", size, err)
	}
	f.join = time.Since(t)
	uri := strings.TrimSpace(line)
	rankURI := func(r int) string { return strings.Replace(uri, "/0/local", "/"+strconv.Itoa(r)+"/local", 1) }
	base := strings.TrimSuffix(strings.TrimPrefix(uri, "local://"), "/0/local")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	withURI := func(c *exec.Cmd) *exec.Cmd { c.Env = append(os.Environ(), "FLUX_URI="+uri); return c }
	// the initial program can start before the last brokers' resources
	// are up: wait for them (the join figure is until all are)
	for deadline := time.Now().Add(5 * time.Minute); ; {
		up, err := withURI(exec.Command(bin, "resource", "list", "-s", "up", "-no", "{nnodes}")).CombinedOutput()
		if err != nil {
			return f, fmt.Errorf("flux resource list: %v: %s", err, up)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(up)))
		if n == size {
			break
		}
		if f.initial == 0 {
			f.initial, f.upAtInitial = f.join, n
		}
		if time.Now().After(deadline) {
			return f, fmt.Errorf("%d of %d nodes up 5 minutes after flux start", n, size)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.join = time.Since(t)
	if f.initial == 0 {
		f.initial, f.upAtInitial = f.join, size
	}

	// one handle per rank: the brokers' pids, then the fan-out
	handles := make([]*flux.Handle, size)
	pids := []string{strconv.Itoa(cmd.Process.Pid)}
	var rss, pss []int
	for r := range handles {
		h, err := flux.Open(rankURI(r))
		if err != nil {
			return f, fmt.Errorf("rank %d: %v", r, err)
		}
		defer h.Close()
		handles[r] = h
		pid, err := h.Attr(ctx, "broker.pid")
		if err != nil {
			return f, fmt.Errorf("rank %d broker.pid: %v", r, err)
		}
		pids = append(pids, pid)
	}
	shells := shellPids(base)
	procs := append(pids, shells...)
	f.cpu = benchkit.ProcCPU(false, procs...)
	f.byClass = classCPU(pids[1:], shells, fanout)
	// the floor of an idle process's memory: a flux command that only
	// waits (connected, subscribed to nothing that comes)
	waiter := withURI(exec.Command(bin, "event", "sub", "bench.nothing"))
	if err := waiter.Start(); err != nil {
		return f, err
	}
	defer func() { waiter.Process.Kill(); waiter.Wait() }()
	time.Sleep(2 * time.Second) // settle after the join
	procs = append(pids, shellPids(base)...)
	cpu0, cs0 := benchkit.ProcCPU(false, procs...), int64(0)
	leafCS0 := make(map[string]int64)
	for _, pid := range procs {
		c := ctxSwitches(pid)
		cs0 += c
		leafCS0[pid] = c
	}
	idleStart := time.Now()
	time.Sleep(5 * time.Second) // idle
	idle := time.Since(idleStart)
	var cs1 int64
	var leafRates []float64
	for _, pid := range procs {
		c := ctxSwitches(pid)
		cs1 += c
		if isLeaf(pid, pids, fanout) {
			leafRates = append(leafRates, float64(c-leafCS0[pid])/idle.Seconds())
		}
	}
	f.idleCPU = float64(benchkit.ProcCPU(false, procs...)-cpu0) / float64(idle) / float64(size)
	f.idleCS = float64(cs1-cs0) / idle.Seconds() / float64(size)
	f.leafCS = median(leafRates)
	var anon, file, thr []int
	for _, pid := range pids[1:] {
		r, _ := benchkit.ProcRSS(pid)
		rss = append(rss, r)
		pss = append(pss, procPSS(pid))
		m := procMem(pid)
		anon, file, thr = append(anon, m.anon), append(file, m.file), append(thr, threads(pid))
	}
	f.anonMedian, f.fileMedian, f.threads = medianInt(anon), medianInt(file), medianInt(thr)
	f.floorRSS, _ = benchkit.ProcRSS(strconv.Itoa(waiter.Process.Pid))
	f.floorPSS = procPSS(strconv.Itoa(waiter.Process.Pid))
	var spss []int
	for _, pid := range shells {
		spss = append(spss, procPSS(pid))
	}
	sort.Ints(rss)
	f.rssMedian, f.rssMax, f.pssMedian, f.shellPSS = rss[len(rss)/2], rss[len(rss)-1], medianInt(pss), medianInt(spss)

	f.fanout = fanOut(ctx, handles, events)

	var runs []float64
	for i := 0; i < jobs; i++ {
		t := time.Now()
		out, err := withURI(exec.Command(bin, "run", "-N", strconv.Itoa(size), "true")).CombinedOutput()
		if err != nil {
			return f, fmt.Errorf("flux run -N%d true: %v\n%s", size, err, out)
		}
		runs = append(runs, time.Since(t).Seconds())
	}
	f.run = time.Duration(median(runs) * float64(time.Second))

	t = time.Now()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return f, fmt.Errorf("flux start: %v", err)
	}
	f.stop = time.Since(t)
	return f, nil
}

// fanOut publishes n events from rank 0 and returns the median time
// until the last of every rank's subscriber has it.
func fanOut(ctx context.Context, handles []*flux.Handle, n int) time.Duration {
	subs := make([]*flux.Subscription, len(handles))
	for r, h := range handles {
		s, err := h.Subscribe(ctx, "bench.")
		if err != nil {
			fatal(fmt.Errorf("rank %d subscribe: %v", r, err))
		}
		subs[r] = s
	}
	var out []float64
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := handles[0].Publish("bench.fanout", map[string]int{"i": i}, false); err != nil {
			fatal(err)
		}
		var wg sync.WaitGroup
		for _, s := range subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Next(ctx); err != nil {
					fatal(err)
				}
			}()
		}
		wg.Wait()
		out = append(out, float64(time.Since(t)))
	}
	return time.Duration(median(out))
}

// shellPids finds the job-shell servers of the instance under base.
func shellPids(base string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[1] == "shell" && strings.Contains(string(b), base+"/") {
			out = append(out, e.Name())
		}
	}
	return out
}

// procPSS is a process's proportional set size in KiB.
func procPSS(pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pss:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func medianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(kib int) float64         { return float64(kib) / 1024 }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "brokers:", err)
	os.Exit(1)
}
