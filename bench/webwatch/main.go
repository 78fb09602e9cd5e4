// Command webwatch measures what a browser watching the dashboard's jobs
// page costs the instance, running bench/web's workload (N jobs
// submitted at once, each running 1 ms in the test executor, until the
// queue drains) with headless Chromium showing the jobs page of flux web
// (following GET /v1/jobs/events) against with flux web running and no
// one watching, alternated in one run.
//
// Jobs/s swing by a factor of ten on a machine other work loads, so the
// figure to judge is CPU time, which the rest of the machine does not
// change: each round's broker CPU watched against unwatched (the
// broker's cost of serving the journal to flux web), and the CPU of
// broker, flux web and Chromium together watched against broker and
// (idle) flux web unwatched (the whole cost of watching, the browser's
// rendering included); the medians of the rounds' ratios, beside the
// throughput ratio and the load average. Figures are printed, never
// asserted.
//
//	go run ./bench/webwatch -flux bin/flux -jobs 4000 -rounds 4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	jobs := flag.Int("jobs", 4000, "jobs of each throughput run")
	rounds := flag.Int("rounds", 4, "alternations of the comparison")
	profile := flag.String("profile", "", "write flux web's CPU profile over the run to this file (go tool pprof bin/flux FILE)")
	flag.Parse()
	if *jobs < 1 || *jobs > 1<<20 || *rounds < 1 || *rounds > 100 {
		fatal(fmt.Errorf("-jobs must be 1..%d and -rounds 1..100", 1<<20))
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		fatal(errors.New("chromium is not installed (apt-get install chromium)"))
	}
	inst, err := benchkit.Start(abs, 1, "-S", `resource.config=[{"hosts":"node[0-255]","cores":"0-63"}]`, "-S", "resource.monitor-force-up=1")
	if err != nil {
		fatal(err)
	}
	defer inst.Stop()
	h, err := flux.Open(inst.URI)
	if err != nil {
		fatal(err)
	}
	defer h.Close()
	fx := func(args ...string) (string, error) {
		cmd := exec.Command(abs, args...)
		cmd.Env = append(os.Environ(), "FLUX_URI="+inst.URI)
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("flux %s: %v", strings.Join(args, " "), err)
		}
		return string(out), nil
	}
	if *profile != "" {
		os.Setenv("FLUXGO_CPUPROFILE", *profile) // flux web's only: the instance runs already
	}
	web, url, err := benchkit.StartWeb(abs, inst.URI)
	os.Unsetenv("FLUXGO_CPUPROFILE")
	if err != nil {
		fatal(err)
	}
	defer func() { web.Process.Signal(os.Interrupt); web.Wait() }()
	tok, err := fx("web", "token")
	if err != nil {
		fatal(err)
	}
	tok = strings.TrimSpace(tok)
	ctx, stopBrowser, err := browser(chrome)
	if err != nil {
		fatal(err)
	}
	defer stopBrowser()
	// log in once: the cookie stays for the later visits
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/")); err != nil {
		fatal(fmt.Errorf("opening the dashboard: %w", err))
	}
	code, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/ui/login", {method: "POST", body: new URLSearchParams({token: `+strconv.Quote(tok)+`})}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || code != 200 {
		fatal(fmt.Errorf("logging in: status %d: %v", code, err))
	}
	// the dashboard's queues page between watched runs: it holds no
	// stream (a page left for about:blank may linger in the back-forward
	// cache with its stream open)
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/#queues")); err != nil {
		fatal(err)
	}
	baseSubs, err := journalSubs(h)
	if err != nil {
		fatal(err)
	}
	browserPid := strconv.Itoa(chromedp.FromContext(ctx).Browser.Process().Pid)
	webPid := strconv.Itoa(web.Process.Pid)
	brokerPid, err := fx("getattr", "broker.pid")
	if err != nil {
		fatal(err)
	}
	brokerPid = strings.TrimSpace(brokerPid)

	total := 0
	runJobs := func(n int) (float64, error) {
		t0 := time.Now()
		if _, err := fx("submit", "--quiet", "--cc=1-"+strconv.Itoa(n), "--setattr=system.exec.test.run_duration=0.001s", "true"); err != nil {
			return 0, err
		}
		if _, err := fx("queue", "drain"); err != nil {
			return 0, err
		}
		total += n
		return float64(n) / time.Since(t0).Seconds(), nil
	}
	type run struct {
		rate                   float64
		webCPU, brCPU, instCPU time.Duration
	}
	measure := func(watch bool) (run, error) {
		if watch {
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`delete document.body.dataset.jobsLoaded; location.hash = "#jobs"; true`)); err != nil {
				return run{}, fmt.Errorf("opening the jobs page: %w", err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.dataset.jobsLoaded !== undefined`, chromedp.WithPollingTimeout(120*time.Second))); err != nil {
				return run{}, fmt.Errorf("loading the jobs page: %w", err)
			}
		} else if err := waitSubs(h, baseSubs); err != nil {
			return run{}, err
		}
		w0, b0, i0 := benchkit.ProcCPU(false, webPid), treeCPU(browserPid), treeCPU(brokerPid)
		rate, err := runJobs(*jobs)
		if err != nil {
			return run{}, err
		}
		r := run{rate: rate, webCPU: benchkit.ProcCPU(false, webPid) - w0, brCPU: treeCPU(browserPid) - b0, instCPU: treeCPU(brokerPid) - i0}
		if watch {
			// the page saw every job (its status line counts them)
			want := fmt.Sprintf(", %d jobs", total)
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("jobs-status").textContent.includes(`+strconv.Quote(want)+`)`,
				chromedp.WithPollingTimeout(60*time.Second))); err != nil {
				return run{}, fmt.Errorf("the jobs page does not count %d jobs: %w", total, err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.hash = "#queues"; true`)); err != nil {
				return run{}, err
			}
		}
		return r, nil
	}
	var with, without, ratios, brokerRatios, totalRatios []float64
	var brokerCPU [2]time.Duration       // unwatched, watched
	var watchCPU time.Duration           // flux web and Chromium, watched
	byType0 := treeCPUByType(browserPid) // processes started later count from 0
	for r := 0; r < *rounds; r++ {
		// the order alternates: a later run of the same instance tends
		// to be faster
		var a, b run
		var err1, err2 error
		if r%2 == 0 {
			a, err1 = measure(false)
			b, err2 = measure(true)
		} else {
			b, err2 = measure(true)
			a, err1 = measure(false)
		}
		if err := errors.Join(err1, err2); err != nil {
			fatal(err)
		}
		without, with, ratios = append(without, a.rate), append(with, b.rate), append(ratios, b.rate/a.rate)
		br := b.instCPU.Seconds() / a.instCPU.Seconds()
		tr := (b.instCPU + b.webCPU + b.brCPU).Seconds() / (a.instCPU + a.webCPU).Seconds()
		brokerRatios, totalRatios = append(brokerRatios, br), append(totalRatios, tr)
		fmt.Printf("round %d (load %s): %d jobs: %.0f jobs/s with no one watching (broker %.2f s CPU, flux web %.2f s), %.0f jobs/s with Chromium on the jobs page (broker %.2f s CPU, flux web %.2f s, Chromium %.2f s): jobs/s ratio %.3f, broker CPU ratio %.3f, all CPU ratio %.3f\n",
			r+1, benchkit.LoadAvg(), *jobs, a.rate, a.instCPU.Seconds(), a.webCPU.Seconds(), b.rate, b.instCPU.Seconds(), b.webCPU.Seconds(), b.brCPU.Seconds(), b.rate/a.rate, br, tr)
		brokerCPU[0] += a.instCPU
		brokerCPU[1] += b.instCPU
		watchCPU += b.webCPU + b.brCPU
	}
	fmt.Printf("medians of %d rounds' ratios, watched to unwatched (load %s): broker CPU %.3f (cost %+.1f%%); broker + flux web + Chromium CPU against broker + flux web %.3f (cost %+.1f%%); jobs/s %.3f (mean %.0f jobs/s unwatched, %.0f watched)\n",
		*rounds, benchkit.LoadAvg(), median(brokerRatios), 100*(median(brokerRatios)-1), median(totalRatios), 100*(median(totalRatios)-1),
		median(ratios), mean(without), mean(with))
	var kinds []string
	for k, d := range treeCPUByType(browserPid) {
		kinds = append(kinds, fmt.Sprintf("%s %.2f s", k, (d-byType0[k]).Seconds()))
	}
	slices.Sort(kinds)
	fmt.Printf("Chromium's CPU over the rounds by process: %s\n", strings.Join(kinds, ", "))
	// CPU time does not depend on how busy the rest of the machine is:
	// what the watching costs the broker, and what it costs in all
	n := float64(*rounds * *jobs)
	fmt.Printf("CPU per 1000 jobs: broker %.3f s unwatched, %.3f s watched (ratio %.3f); flux web and Chromium %.3f s while watching (%.1f%% of the broker's)\n",
		1000*brokerCPU[0].Seconds()/n, 1000*brokerCPU[1].Seconds()/n, brokerCPU[1].Seconds()/brokerCPU[0].Seconds(),
		1000*watchCPU.Seconds()/n, 100*watchCPU.Seconds()/brokerCPU[1].Seconds())
}

// journalSubs is the number of the job manager's journal subscribers.
func journalSubs(h *flux.Handle) (int, error) {
	var st struct {
		Journal int `json:"journal"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := h.Call(ctx, "job-manager.stats-get", flux.NodeidAny, nil, &st)
	return st.Journal, err
}

// waitSubs waits until flux web has dropped its journal subscription
// (10 s after its last watcher), so an unwatched run is one.
func waitSubs(h *flux.Handle, base int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := journalSubs(h)
		if err != nil || n <= base {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flux web still follows the journal (%d subscribers, %d before) 60 s after the page closed", n, base)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// treeCPU is the CPU time of process root and its descendants (Chromium
// runs its renderers as child processes).
func treeCPU(root string) time.Duration {
	var d time.Duration
	for _, t := range treeCPUByType(root) {
		d += t
	}
	return d
}

// treeCPUByType is treeCPU by Chromium process type (its --type=
// argument: renderer, gpu-process, utility ...; "browser" for the root).
func treeCPUByType(root string) map[string]time.Duration {
	ents, _ := os.ReadDir("/proc")
	parent := map[string]string{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[e.Name()] = f[1]
		}
	}
	out := map[string]time.Duration{}
	for pid := range parent {
		for p := pid; p != "" && p != "0" && p != "1"; p = parent[p] {
			if p != root {
				continue
			}
			kind := "browser"
			if cmd, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil {
				// Chromium rewrites its processes' titles: spaces, not NULs
				for _, a := range strings.FieldsFunc(string(cmd), func(r rune) bool { return r == 0 || r == ' ' }) {
					if t, ok := strings.CutPrefix(a, "--type="); ok {
						kind = t
					}
				}
			}
			out[kind] += benchkit.ProcCPU(false, pid)
			break
		}
	}
	return out
}

// browser starts headless Chromium with one tab.
func browser(path string) (context.Context, func(), error) {
	dir, err := os.MkdirTemp("", "webwatch-chromium")
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 800),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	stop := func() { cancel(); acancel(); os.RemoveAll(dir) }
	if err := chromedp.Do(ctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("starting chromium: %w", err)
	}
	return ctx, stop, nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/webwatch:", err)
	os.Exit(1)
}
