// Command memory measures how much memory a broker keeps as inactive jobs
// accumulate: it starts a one-broker instance with the default module set,
// submits test-executor jobs in steps until N jobs are inactive (1k, 16k
// and 64k by default), and prints rank 0's resident set size after each
// step, once the broker has had time to settle (KVS cache expiry, GC).
//
//	go run ./bench/memory -flux bin/flux [-jobs 1000,16000,64000] [-statedir DIR]
//
// Each step prints one line
//
//	broker RSS after N inactive jobs: X MB
//
// followed by the peak RSS so far (VmHWM), how long the jobs took, the
// KVS root sequence and content store size (what the KVS wrote to get
// there) and, with -profile DIR, where a heap profile of the settled
// broker was written (read it with go tool pprof -top bin/flux FILE). The
// figure is the resident set as the kernel reports it, not the Go heap:
// it is what an administrator sees. Each step submits its jobs at once
// (flux submit --cc), so the broker also goes through a burst of pending
// jobs; the peak shows it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	jobs := flag.String("jobs", "1000,16000,64000", "comma-separated inactive job counts to report at")
	settle := flag.Duration("settle", 15*time.Second, "how long to let the broker settle before reading RSS")
	statedir := flag.String("statedir", "", "run the instance with this statedir (default: none, scratch content store)")
	profile := flag.String("profile", "", "write a heap profile of rank 0 into this directory after each step")
	var setattrs stringList
	flag.Var(&setattrs, "S", "extra broker attribute NAME=VALUE (repeatable)")
	flag.Parse()

	steps, err := parseSteps(*jobs)
	if err != nil {
		fail(err)
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fail(err)
	}
	attrs := append([]string(nil), setattrs...)
	if *statedir != "" {
		attrs = append(attrs, "statedir="+*statedir)
	}
	var opts []string
	for _, a := range attrs {
		opts = append(opts, "-S", a)
	}
	inst, err := benchkit.Start(abs, 1, opts...)
	if err != nil {
		fail(err)
	}
	defer inst.Stop()
	h, err := flux.Open(inst.URI)
	if err != nil {
		fail(err)
	}
	defer h.Close()
	ctx := context.Background()
	pid, err := h.Attr(ctx, "broker.pid")
	if err != nil {
		fail(fmt.Errorf("broker.pid: %w", err))
	}
	time.Sleep(2 * time.Second)
	rss, _ := benchkit.ProcRSS(pid)
	fmt.Printf("broker RSS idle: %.1f MB\n", mb(rss))

	done := 0
	for _, n := range steps {
		start := time.Now()
		if err := submit(abs, inst, done+1, n); err != nil {
			fail(err)
		}
		if err := waitInactive(ctx, h, n); err != nil {
			fail(err)
		}
		elapsed := time.Since(start)
		_, peak := benchkit.ProcRSS(pid)
		time.Sleep(*settle)
		rss, peak2 := benchkit.ProcRSS(pid)
		peak = max(peak, peak2)
		fmt.Printf("broker RSS after %d inactive jobs: %.1f MB\n", n, mb(rss))
		fmt.Printf("    peak RSS so far %.1f MB; %d jobs in %.1fs (%.0f jobs/s)\n",
			mb(peak), n-done, elapsed.Seconds(), float64(n-done)/elapsed.Seconds())
		fmt.Printf("    %s\n", storeFigures(ctx, h))
		if *profile != "" {
			path := filepath.Join(*profile, fmt.Sprintf("heap-%d.prof", n))
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			req := map[string]string{"name": "heap", "path": path}
			if err := h.Call(ctx, "broker.profile", 0, req, nil); err != nil {
				fmt.Fprintf(os.Stderr, "memory: heap profile: %v\n", err)
			} else {
				fmt.Printf("    heap profile %s\n", path)
			}
		}
		done = n
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "memory:", err)
	os.Exit(1)
}

func mb(kb int) float64 { return float64(kb) / 1024 }

// parseSteps parses the -jobs list: increasing positive counts.
func parseSteps(s string) ([]int, error) {
	var steps []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-jobs: %q is not a positive job count", f)
		}
		if len(steps) > 0 && n <= steps[len(steps)-1] {
			return nil, fmt.Errorf("-jobs: counts must increase (%d after %d)", n, steps[len(steps)-1])
		}
		steps = append(steps, n)
	}
	return steps, nil
}

// storeFigures summarizes what the KVS wrote: its root sequence (one per
// commit batch) and the size of the content store.
func storeFigures(ctx context.Context, h *flux.Handle) string {
	var kvsStats struct {
		Root struct {
			Rootseq int `json:"rootseq"`
		} `json:"root"`
	}
	var sqlite struct {
		Objects int64 `json:"object_count"`
		Size    int64 `json:"dbfile_size"`
	}
	if err := h.Call(ctx, "kvs.stats-get", 0, nil, &kvsStats); err != nil {
		return fmt.Sprintf("kvs.stats-get: %v", err)
	}
	if err := h.Call(ctx, "content-sqlite.stats-get", 0, nil, &sqlite); err != nil {
		return fmt.Sprintf("content-sqlite.stats-get: %v", err)
	}
	return fmt.Sprintf("KVS root sequence %d; content store %d objects, %.0f MB",
		kvsStats.Root.Rootseq, sqlite.Objects, float64(sqlite.Size)/(1<<20))
}

// waitInactive polls job-list until n jobs are inactive.
func waitInactive(ctx context.Context, h *flux.Handle, n int) error {
	deadline := time.Now().Add(time.Duration(n)*10*time.Millisecond + 5*time.Minute)
	last, lastChange := -1, time.Now()
	for time.Now().Before(deadline) {
		var resp struct {
			JobStates map[string]int `json:"job_states"`
		}
		if err := h.Call(ctx, "job-list.job-stats", 0, map[string]any{}, &resp); err != nil {
			return fmt.Errorf("job-list.job-stats: %w", err)
		}
		got := resp.JobStates["inactive"]
		if got >= n {
			return nil
		}
		if got != last {
			last, lastChange = got, time.Now()
		} else if time.Since(lastChange) > 2*time.Minute {
			return fmt.Errorf("stuck at %d of %d inactive jobs", got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("timed out waiting for %d inactive jobs (have %d)", n, last)
}

// submit submits jobs first..last (a --cc range) of the test executor.
func submit(bin string, inst *benchkit.Instance, first, last int) error {
	cmd := exec.Command(bin, "submit", fmt.Sprintf("--cc=%d-%d", first, last), "--quiet",
		"--setattr=system.exec.test.run_duration=0.001s", "true")
	cmd.Env = append(os.Environ(), "FLUX_URI="+inst.URI)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("flux submit --cc=%d-%d: %w", first, last, err)
	}
	return nil
}
