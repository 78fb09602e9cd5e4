// Command web measures flux web: GET /v1/jobs over many inactive jobs
// beside flux jobs -a -c 0 over the same jobs (alternated, with their
// ratio), and the job throughput of an instance with flux web running
// idle and scraped on /metrics every second against without it
// (alternated in one run, with the ratio). Figures are printed, never
// asserted.
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
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	if *jobs < 1 || *rateJobs < 1 || *rounds < 1 || *jobs > 1<<20 || *rateJobs > 1<<20 || *rounds > 100 {
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
	// without flux web (scraped every second) beside the instance
	runJobs := func(n int) (float64, error) {
		t0 := time.Now()
		if _, err := fx("submit", "--quiet", "--cc=1-"+strconv.Itoa(n), "--setattr=system.exec.test.run_duration=0.001s", "true"); err != nil {
			return 0, err
		}
		if _, err := fx("queue", "drain"); err != nil {
			return 0, err
		}
		return float64(n) / time.Since(t0).Seconds(), nil
	}
	var without, with []float64
	withWeb := func() (float64, error) {
		stop, _, err := startWeb(abs, inst.URI, true)
		if err != nil {
			return 0, err
		}
		defer stop()
		return runJobs(*rateJobs)
	}
	for r := 0; r < *rounds; r++ {
		// the order alternates too: a later run of the same instance
		// tends to be faster
		var a, b float64
		var err1, err2 error
		if r%2 == 0 {
			a, err1 = runJobs(*rateJobs)
			b, err2 = withWeb()
		} else {
			b, err2 = withWeb()
			a, err1 = runJobs(*rateJobs)
		}
		if err := errors.Join(err1, err2); err != nil {
			fatal(err)
		}
		without, with = append(without, a), append(with, b)
		fmt.Printf("round %d: %d jobs: %.0f jobs/s without flux web, %.0f jobs/s with flux web scraped every 1 s (ratio %.3f)\n", r+1, *rateJobs, a, b, b/a)
	}
	fmt.Printf("throughput: mean %.0f jobs/s without, %.0f with: ratio %.3f\n", mean(without), mean(with), mean(with)/mean(without))

	// GET /v1/jobs beside flux jobs -a -c 0 over the same jobs
	have := *rounds * 2 * *rateJobs
	if have < *jobs {
		if _, err := runJobs(*jobs - have); err != nil {
			fatal(err)
		}
	}
	stop, url, err := startWeb(abs, inst.URI, false)
	if err != nil {
		fatal(err)
	}
	defer stop()
	tok, err := fx("web", "token")
	if err != nil {
		fatal(err)
	}
	tok = strings.TrimSpace(tok)
	for r := 0; r < *rounds; r++ {
		t0 := time.Now()
		req, _ := http.NewRequest("GET", url+"/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fatal(err)
		}
		nb, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		api := time.Since(t0)
		t0 = time.Now()
		out, err := fx("jobs", "-a", "-c", "0")
		if err != nil {
			fatal(err)
		}
		cli := time.Since(t0)
		fmt.Printf("round %d: GET /v1/jobs over %d jobs: %.3f s (%d KB, status %d); flux jobs -a -c 0: %.3f s (%d lines); ratio %.2f\n",
			r+1, max(have, *jobs), api.Seconds(), nb/1024, resp.StatusCode, cli.Seconds(), strings.Count(out, "\n"), api.Seconds()/cli.Seconds())
	}
}

// startWeb runs flux web on a free port; with scrape, a goroutine gets
// /metrics every second as Prometheus would. stop ends both.
func startWeb(bin, uri string, scrape bool) (stop func(), url string, err error) {
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
	}, u, nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/web:", err)
	os.Exit(1)
}
