// Command web measures flux web: GET /v1/jobs over many inactive jobs
// (every attribute, and the attributes flux jobs lists) beside flux
// jobs -a -c 0 over the same jobs, alternated, with their ratios, the
// CPU flux web spent per listing and the load average; and the job
// throughput of an instance with flux web running idle and scraped on
// /metrics every second against without it (alternated in one run; the
// medians of the rounds' ratios of the broker's CPU, of broker and
// flux web's CPU against the broker's alone, and of jobs/s; -rate-jobs
// 0 skips it). Figures are printed, never
// asserted. -profile FILE writes flux web's CPU profile over the
// listings (go tool pprof bin/flux FILE).
//
//	go run ./bench/web -flux bin/flux -jobs 64000 -rate-jobs 4000 -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	jobs := flag.Int("jobs", 64000, "inactive jobs listed by GET /v1/jobs and flux jobs -a")
	rateJobs := flag.Int("rate-jobs", 4000, "jobs of each throughput run")
	rounds := flag.Int("rounds", 3, "alternations of each comparison")
	profile := flag.String("profile", "", "write flux web's CPU profile over the listings to this file")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	if *jobs < 1 || *rateJobs < 0 || *rounds < 1 || *jobs > 1<<20 || *rateJobs > 1<<20 || *rounds > 100 {
		fatal(fmt.Errorf("-jobs and -rate-jobs must be 1..%d and -rounds 1..100", 1<<20))
	}
	inst, err := benchkit.Start(abs, 1, "-S", `resource.config=[{"hosts":"node[0-255]","cores":"0-63"}]`, "-S", "resource.monitor-force-up=1")
	if err != nil {
		fatal(err)
	}
	defer inst.Stop()
	fx := func(args ...string) (string, error) {
		cmd := exec.Command(abs, args...)
		cmd.Env = append(os.Environ(), "FLUX_URI="+inst.URI)
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("flux %s: %v", strings.Join(args, " "), err)
		}
		return string(out), nil
	}
	// throughput: N jobs submitted and run to completion, with and
	// without flux web (scraped every second) beside the instance. The
	// figure to judge is the broker's CPU per job, which a loaded
	// machine does not change as it changes jobs/s.
	bp, err := fx("getattr", "broker.pid")
	if err != nil {
		fatal(err)
	}
	brokerPid := strings.TrimSpace(bp)
	type rate struct {
		jobsPerSec        float64
		brokerCPU, webCPU time.Duration
	}
	runJobs := func(n int, webPid string) (rate, error) {
		b0, w0 := benchkit.ProcCPU(false, brokerPid), benchkit.ProcCPU(false, webPid)
		t0 := time.Now()
		if _, err := fx("submit", "--quiet", "--cc=1-"+strconv.Itoa(n), "--setattr=system.exec.test.run_duration=0.001s", "true"); err != nil {
			return rate{}, err
		}
		if _, err := fx("queue", "drain"); err != nil {
			return rate{}, err
		}
		r := rate{jobsPerSec: float64(n) / time.Since(t0).Seconds(), brokerCPU: benchkit.ProcCPU(false, brokerPid) - b0}
		if webPid != "" {
			r.webCPU = benchkit.ProcCPU(false, webPid) - w0
		}
		return r, nil
	}
	var ratios, cpuRatios, allRatios []float64
	withWeb := func() (rate, error) {
		stop, pid, err := startWeb(abs, inst.URI, true)
		if err != nil {
			return rate{}, err
		}
		defer stop()
		return runJobs(*rateJobs, pid)
	}
	for r := 0; *rateJobs > 0 && r < *rounds; r++ {
		// the order alternates too: a later run of the same instance
		// tends to be faster
		var a, b rate
		var err1, err2 error
		if r%2 == 0 {
			a, err1 = runJobs(*rateJobs, "")
			b, err2 = withWeb()
		} else {
			b, err2 = withWeb()
			a, err1 = runJobs(*rateJobs, "")
		}
		if err := errors.Join(err1, err2); err != nil {
			fatal(err)
		}
		cr := b.brokerCPU.Seconds() / a.brokerCPU.Seconds()
		ar := (b.brokerCPU + b.webCPU).Seconds() / a.brokerCPU.Seconds()
		ratios, cpuRatios, allRatios = append(ratios, b.jobsPerSec/a.jobsPerSec), append(cpuRatios, cr), append(allRatios, ar)
		fmt.Printf("round %d (load %s): %d jobs: without flux web %.0f jobs/s, broker %.2f s CPU; with flux web scraped every 1 s %.0f jobs/s, broker %.2f s CPU, flux web %.2f s: ratios jobs/s %.3f, broker CPU %.3f, broker + flux web CPU %.3f\n",
			r+1, benchkit.LoadAvg(), *rateJobs, a.jobsPerSec, a.brokerCPU.Seconds(), b.jobsPerSec, b.brokerCPU.Seconds(), b.webCPU.Seconds(), b.jobsPerSec/a.jobsPerSec, cr, ar)
	}
	if *rateJobs > 0 {
		fmt.Printf("idle flux web, medians of %d rounds' ratios with to without: broker CPU %.3f, broker + flux web CPU %.3f, jobs/s %.3f (load %s)\n",
			*rounds, median(cpuRatios), median(allRatios), median(ratios), benchkit.LoadAvg())
	}

	// GET /v1/jobs beside flux jobs -a -c 0 over the same jobs
	have := *rounds * 2 * *rateJobs
	if have < *jobs {
		if _, err := runJobs(*jobs-have, ""); err != nil {
			fatal(err)
		}
	}
	if *profile != "" {
		os.Setenv("FLUXGO_CPUPROFILE", *profile) // flux web's only: the instance runs already
	}
	cmd, url, err := benchkit.StartWeb(abs, inst.URI)
	os.Unsetenv("FLUXGO_CPUPROFILE")
	if err != nil {
		fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	webPid := strconv.Itoa(cmd.Process.Pid)
	tok, err := fx("web", "token")
	if err != nil {
		fatal(err)
	}
	tok = strings.TrimSpace(tok)
	get := func(path string) (total, first time.Duration, bytes int64, cpu time.Duration, err error) {
		cpu0 := benchkit.ProcCPU(false, webPid)
		t0 := time.Now()
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		defer resp.Body.Close()
		var one [1]byte
		k, _ := io.ReadFull(resp.Body, one[:])
		first = time.Since(t0)
		n, err := io.Copy(io.Discard, resp.Body)
		total = time.Since(t0)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
		}
		return total, first, n + int64(k), benchkit.ProcCPU(false, webPid) - cpu0, err
	}
	// the attributes of flux jobs' default format, as flux jobs asks
	const cliAttrs = "userid,urgency,priority,state,name,queue,ntasks,nnodes,duration,t_run,t_cleanup,result,nodelist,annotations,dependencies"
	var all, some, cli []float64
	for r := 0; r < *rounds; r++ {
		type figure struct {
			d        time.Duration
			first    time.Duration
			bytes    int64
			cpu      time.Duration
			lines    int
			loadavg  string
			describe string
		}
		runs := []func() (figure, error){
			func() (figure, error) {
				d, first, n, cpu, err := get("/v1/jobs")
				return figure{d: d, first: first, bytes: n, cpu: cpu, describe: "GET /v1/jobs"}, err
			},
			func() (figure, error) {
				d, first, n, cpu, err := get("/v1/jobs?attrs=" + cliAttrs)
				return figure{d: d, first: first, bytes: n, cpu: cpu, describe: "GET /v1/jobs?attrs=(flux jobs')"}, err
			},
			func() (figure, error) {
				t0 := time.Now()
				out, err := fx("jobs", "-a", "-c", "0")
				return figure{d: time.Since(t0), lines: strings.Count(out, "\n"), describe: "flux jobs -a -c 0"}, err
			},
		}
		// alternate which goes first: a listing warms the next one's caches
		order := []int{0, 1, 2}
		if r%2 == 1 {
			order = []int{2, 1, 0}
		}
		figs := make([]figure, 3)
		for _, i := range order {
			f, err := runs[i]()
			if err != nil {
				fatal(err)
			}
			f.loadavg = benchkit.LoadAvg()
			figs[i] = f
		}
		all, some, cli = append(all, figs[0].d.Seconds()), append(some, figs[1].d.Seconds()), append(cli, figs[2].d.Seconds())
		fmt.Printf("round %d over %d jobs (load %s):\n", r+1, max(have, *jobs), figs[2].loadavg)
		for _, f := range figs[:2] {
			fmt.Printf("  %s: %.3f s (first byte %.3f s), %d KB, flux web CPU %.2f s; ratio to flux jobs %.2f\n",
				f.describe, f.d.Seconds(), f.first.Seconds(), f.bytes/1024, f.cpu.Seconds(), f.d.Seconds()/figs[2].d.Seconds())
		}
		fmt.Printf("  flux jobs -a -c 0: %.3f s (%d lines)\n", figs[2].d.Seconds(), figs[2].lines)
	}
	fmt.Printf("median over %d rounds: GET /v1/jobs %.3f s, with flux jobs' attributes %.3f s, flux jobs -a -c 0 %.3f s: ratios %.2f and %.2f (load %s)\n",
		*rounds, median(all), median(some), median(cli), median(all)/median(cli), median(some)/median(cli), benchkit.LoadAvg())
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// startWeb runs flux web on a free port; with scrape, a goroutine gets
// /metrics every second as Prometheus would. stop ends both; pid is
// flux web's.
func startWeb(bin, uri string, scrape bool) (stop func(), pid string, err error) {
	cmd, u, err := benchkit.StartWeb(bin, uri)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !scrape {
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			req, _ := http.NewRequestWithContext(ctx, "GET", u+"/metrics", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}, strconv.Itoa(cmd.Process.Pid), nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/web:", err)
	os.Exit(1)
}
